package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// statusOf is the one place where an application error code becomes an
// HTTP status.
func statusOf(code genq.Code) int {
	switch code {
	case genq.Invalid:
		return http.StatusBadRequest
	case genq.Unauthorized:
		return http.StatusUnauthorized
	case genq.NotFound:
		return http.StatusNotFound
	case genq.TooLarge:
		return http.StatusRequestEntityTooLarge
	case genq.Overloaded:
		return http.StatusTooManyRequests
	case genq.Unavailable:
		return http.StatusServiceUnavailable
	case genq.Timeout:
		return http.StatusGatewayTimeout
	case genq.Canceled:
		return 499 // client closed request; nobody reads it, but logs and metrics do
	default:
		return http.StatusInternalServerError
	}
}

// retryAfterSeconds is sent with answers that invite a retry.
const retryAfterSeconds = 1

type errorResponse struct {
	Error string `json:"error"`
}

// errorRenderer answers a request with err, in its route's error shape.
// Every renderer takes its status from statusOf.
type errorRenderer func(w http.ResponseWriter, log *slog.Logger, err error)

// reject answers a request that never became a job.
func (s *Server) reject(w http.ResponseWriter, err error) {
	s.rejectAs(w, err, writeError)
}

// rejectAs is reject in render's error shape.
func (s *Server) rejectAs(w http.ResponseWriter, err error, render errorRenderer) {
	reason := "invalid"
	if genq.ErrorCode(err) == genq.TooLarge {
		reason = "too_large"
	}
	s.metrics.rejections.WithLabelValues(reason).Inc()
	render(w, s.log, err)
}

// writeError answers with err's status and its user-facing message, in the
// seed routes' shape {"error":"…"}. Details of internal errors go to the log
// only.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	writeJSON(w, errorStatus(w, log, err), errorResponse{Error: genq.ErrorMessage(err)})
}

// errorStatus is err's status, with the headers and the log line that go
// with it: the part every error shape shares.
func errorStatus(w http.ResponseWriter, log *slog.Logger, err error) int {
	code := genq.ErrorCode(err)
	if code == genq.Internal {
		log.Error("request failed", "err", err)
	}
	if code == genq.Overloaded || code == genq.Unavailable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	return statusOf(code)
}

// writeV1Error answers with err's status in OpenAI's error shape, for the
// /v1 routes.
func writeV1Error(w http.ResponseWriter, log *slog.Logger, err error) {
	writeJSON(w, errorStatus(w, log, err), openai.ErrorResponse{Error: openai.ErrorOf(err)})
}
