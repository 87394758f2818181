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

// writeError answers with err's status and its user-facing message. Details
// of internal errors go to the log only.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	code := genq.ErrorCode(err)
	status := statusOf(code)
	if code == genq.Internal {
		log.Error("request failed", "err", err)
	}
	if code == genq.Overloaded || code == genq.Unavailable {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	writeJSON(w, status, errorResponse{Error: genq.ErrorMessage(err)})
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
