package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/httpapi"
)

// TestUIRoutes: /ui/ serves the embedded page under a strict CSP, and
// /ui/api/status tells the variant, the live workers and the lanes'
// depths; behind API_KEYS the status needs a key and the page does not.
func TestUIRoutes(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.startWorker(newTestBackend(1), time.Second)
	s.waitLive(1)
	page := s.get("/ui/")
	if page.status != http.StatusOK || !strings.Contains(string(page.body), `<script src="app.js" defer>`) ||
		!strings.Contains(page.header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("/ui/: %d %v %.200s", page.status, page.header, page.body)
	}
	if r := s.get("/ui"); r.status != http.StatusOK { // redirected to /ui/
		t.Fatalf("/ui: %d", r.status)
	}
	var st struct {
		Variant     string            `json:"variant"`
		Kind        string            `json:"kind"`
		Workers     []json.RawMessage `json:"workers"`
		Interactive *uint64           `json:"interactive_depth"`
		Batch       *uint64           `json:"batch_depth"`
		Recent      []json.RawMessage `json:"recent"`
	}
	r := s.get("/ui/api/status")
	if err := json.Unmarshal(r.body, &st); err != nil || r.status != 200 || st.Variant != "B" || st.Kind != "text" || len(st.Workers) != 1 ||
		st.Interactive == nil || st.Batch == nil || len(st.Recent) != 30 {
		t.Fatalf("status: %d %s", r.status, r.body)
	}

	keyed := newStack(t, stackOptions{http: httpapi.Config{APIKeys: []string{"k"}}})
	// An asynchronous job shows in the status.
	sub := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":"echo:x","max_tokens":2}}`)
	id := decodeAs[struct {
		ID string `json:"id"`
	}](t, sub).ID
	var withJobs struct {
		Jobs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(s.get("/ui/api/status").body, &withJobs); err != nil || len(withJobs.Jobs) != 1 || withJobs.Jobs[0].ID != id {
		t.Fatalf("the status's jobs: %+v (%v), want %s", withJobs, err, id)
	}
	if r := keyed.get("/ui/api/status"); r.status != http.StatusUnauthorized {
		t.Fatalf("status without a key: %d", r.status)
	}
	if r := keyed.get("/ui/app.js"); r.status != http.StatusOK {
		t.Fatalf("the page's script without a key: %d", r.status)
	}
}
