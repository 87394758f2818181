package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
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
	status := statusOf(code)
	logAnswered(w, log, status, err)
	if (code == genq.Overloaded || code == genq.Unavailable) && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds)) // a tenant's limit sets its own
	}
	return status
}

// logAnswered logs a request answered with err, in one line, whatever its
// route and its error shape: its method and route, its status and code,
// the field at fault where it is known, and the reason its client reads.
// Never the body, nor a key: what the line holds is what the answer
// says. A refusal (4xx) is information; genq's own failure (5xx) a
// warning, or an error with its details when it is internal.
func logAnswered(w http.ResponseWriter, log *slog.Logger, status int, err error) {
	code := genq.ErrorCode(err)
	attrs := []any{"status", status, "code", code}
	if rec := recorderOf(w); rec != nil && rec.req != nil {
		// The server's own log: the caller's may say the route already.
		log = rec.log
		attrs = append(attrs, "method", rec.req.Method, "route", routeOf(rec.req))
		if id := w.Header().Get(HeaderJobID); id != "" {
			attrs = append(attrs, "job_id", id)
		}
	}
	if field := fieldOf(err); field != "" {
		attrs = append(attrs, "field", field)
	}
	attrs = append(attrs, "reason", genq.ErrorMessage(err))
	switch {
	case code == genq.Internal:
		log.Error("request failed", append(attrs, "err", err)...)
	case status >= 500:
		log.Warn("request failed", append(attrs, "err", err)...)
	default:
		log.Info("request refused", attrs...)
	}
}

// recorderOf finds the statusRecorder under w, which countRequests puts
// under every route's writer; nil when there is none.
func recorderOf(w http.ResponseWriter) *statusRecorder {
	for w != nil {
		if rec, ok := w.(*statusRecorder); ok {
			return rec
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// fieldOf names the request's field err is about: the one the error
// names, the one a context refusal is about, else the field its message
// opens with ("max_tokens must be…", "messages[2]: …", "tools.0.name:
// Field required"); "" when it names none.
func fieldOf(err error) string {
	if f := genq.ErrorField(err); f != "" {
		return f
	}
	if ce, ok := genq.ContextExceededOf(err); ok {
		return ce.Input
	}
	msg := genq.ErrorMessage(err)
	path := fieldPath.FindString(msg)
	if path == "" {
		return ""
	}
	rest := msg[len(path):]
	if strings.HasPrefix(rest, ":") || strings.ContainsAny(path, "_.[") {
		return strings.TrimSuffix(path, ":")
	}
	next, _, _ := strings.Cut(strings.TrimPrefix(rest, " "), " ")
	if fieldVerbs[next] {
		return path
	}
	return ""
}

// fieldPath is a field's path at the start of a message: a name, then
// .name, .0 or [0] parts.
var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+|\[[0-9]+\])*`)

// fieldVerbs are the words that follow a field's bare name in genq's
// messages ("n must be…", "text field is required", "messages hold…").
var fieldVerbs = map[string]bool{"must": true, "is": true, "holds": true, "hold": true, "names": true, "field": true, "needs": true}

// writeV1Error answers with err's status in OpenAI's error shape, for the
// /v1 routes.
func writeV1Error(w http.ResponseWriter, log *slog.Logger, err error) {
	writeJSON(w, errorStatus(w, log, err), openai.ErrorResponse{Error: v1ErrorOf(err)})
}

// v1ErrorOf is err in OpenAI's words, with OpenAI's own codes for a
// tenant's limit (its type what the limit counts) and for a model the key
// may not use.
func v1ErrorOf(err error) openai.Error {
	e := openai.ErrorOf(err)
	var refusal *tenant.Refusal
	var denied *modelDenied
	switch {
	case errors.As(err, &refusal):
		e.Type, e.Code = refusal.Kind(), "rate_limit_exceeded"
	case errors.As(err, &denied):
		field := "model"
		e.Code, e.Param = openai.CodeModelNotFound, &field
	}
	return e
}
