package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// TestStatusOf pins the one mapping from application codes to HTTP statuses
// (the table of docs/api.md, "The seed routes").
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

// TestRenderersShareTheMapping: both error shapes take the same status and
// headers from the one mapping, and OpenAI's shape carries what its SDKs
// read.
func TestRenderersShareTheMapping(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, code := range []genq.Code{genq.Invalid, genq.Unauthorized, genq.NotFound, genq.TooLarge, genq.Overloaded,
		genq.Unavailable, genq.Timeout, genq.Internal} {
		err := genq.Errorf(code, "what went wrong")
		seed, v1 := httptest.NewRecorder(), httptest.NewRecorder()
		writeError(seed, log, err)
		writeV1Error(v1, log, err)
		if seed.Code != statusOf(code) || v1.Code != seed.Code || v1.Header().Get("Retry-After") != seed.Header().Get("Retry-After") {
			t.Errorf("%s: seed %d, v1 %d", code, seed.Code, v1.Code)
		}
		var body openai.ErrorResponse
		if err := json.Unmarshal(v1.Body.Bytes(), &body); err != nil || body.Error.Message != "what went wrong" ||
			body.Error.Type == "" || body.Error.Code != string(code) || !strings.Contains(v1.Body.String(), `"param":null`) {
			t.Errorf("%s: v1 body %s", code, v1.Body)
		}
	}
}
