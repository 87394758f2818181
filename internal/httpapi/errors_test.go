package httpapi

import (
	"net/http"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestStatusOf pins the one mapping from application codes to HTTP statuses
// (the README's route table).
func TestStatusOf(t *testing.T) {
	for code, want := range map[genq.Code]int{
		genq.Invalid:      http.StatusBadRequest,
		genq.Unauthorized: http.StatusUnauthorized,
		genq.NotFound:     http.StatusNotFound,
		genq.TooLarge:     http.StatusRequestEntityTooLarge,
		genq.Overloaded:   http.StatusTooManyRequests,
		genq.Unavailable:  http.StatusServiceUnavailable,
		genq.Timeout:      http.StatusGatewayTimeout,
		genq.Canceled:     499,
		genq.Internal:     http.StatusInternalServerError,
		"something new":   http.StatusInternalServerError,
	} {
		if got := statusOf(code); got != want {
			t.Errorf("statusOf(%q) = %d, want %d", code, got, want)
		}
	}
}
