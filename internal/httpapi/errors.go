package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/genq/genq/internal/genq"
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

// v1ErrorResponse is OpenAI's error shape, which its SDKs parse.
type v1ErrorResponse struct {
	Error v1Error `json:"error"`
}

type v1Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// writeV1Error answers with err's status in OpenAI's error shape, for the
// /v1 routes. The SDKs pick their error class from the status; type names
// the class in OpenAI's words, and code is genq's own.
func writeV1Error(w http.ResponseWriter, log *slog.Logger, err error) {
	status := errorStatus(w, log, err)
	code := genq.ErrorCode(err)
	writeJSON(w, status, v1ErrorResponse{Error: v1Error{
		Message: genq.ErrorMessage(err), Type: v1ErrorType(code), Code: string(code),
	}})
}

func v1ErrorType(code genq.Code) string {
	switch code {
	case genq.Invalid, genq.TooLarge:
		return "invalid_request_error"
	case genq.Unauthorized:
		return "authentication_error"
	case genq.NotFound:
		return "not_found_error"
	case genq.Overloaded:
		return "rate_limit_error"
	case genq.Unavailable, genq.Timeout, genq.Canceled:
		return "service_unavailable_error"
	}
	return "server_error"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
