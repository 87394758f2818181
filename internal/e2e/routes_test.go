package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
)

func TestRootAndReadiness(t *testing.T) {
	s := newStack(t, stackOptions{})

	r := s.get("/")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET / = %d %q", r.status, r.header.Get("Content-Type"))
	}
	var root map[string]any
	if err := json.Unmarshal(r.body, &root); err != nil {
		t.Fatal(err)
	}
	if root["message"] != "Hello World" || root["cuda_available"] != false {
		t.Fatalf("GET / body = %s", r.body)
	}

	r = s.get("/readiness")
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ready"}` {
		t.Fatalf("GET /readiness = %d %s", r.status, r.body)
	}

	// A CUDA worker's heartbeat turns cuda_available on.
	b := newTestBackend(1)
	b.device = genq.Device{Kind: "cuda", Name: "NVIDIA A10G", Engine: "ggml"}
	s.startWorker(b, time.Second)
	s.waitLive(1)
	body := s.get("/").body
	_ = json.Unmarshal(body, &root)
	if root["cuda_available"] != true || !strings.Contains(string(body), `"devices":[{"kind":"cuda","name":"NVIDIA A10G","engine":"ggml"}]`) {
		t.Fatalf("with a CUDA worker live, GET / = %s", body)
	}
}

func TestReadinessWakesWhenNoWorker(t *testing.T) {
	s := newStack(t, stackOptions{})
	// Kubernetes' readiness probe is not traffic: it wakes nothing.
	probe, err := http.NewRequest(http.MethodGet, s.api.URL+"/readiness", nil)
	if err != nil {
		t.Fatal(err)
	}
	probe.Header.Set("User-Agent", "kube-probe/1.31")
	resp, err := http.DefaultClient.Do(probe)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond)
	if resp.StatusCode != http.StatusOK || s.streamMsgs() != 0 {
		t.Fatalf("kube-probe readiness = %d and queued %d messages", resp.StatusCode, s.streamMsgs())
	}
	for range 3 {
		if r := s.get("/readiness"); r.status != http.StatusOK {
			t.Fatalf("readiness = %d", r.status)
		}
	}
	// Rate-limited: three calls within the interval queue one signal.
	deadline := time.Now().Add(5 * time.Second)
	for s.streamMsgs() != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.streamMsgs(); n != 1 {
		t.Fatalf("wake-up signals queued = %d, want 1", n)
	}
	// A worker drops it without running anything.
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	deadline = time.Now().Add(5 * time.Second)
	for s.streamMsgs() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.streamMsgs(); n != 0 || b.calls.Load() != 0 {
		t.Fatalf("after a worker started: %d messages left, %d backend calls", n, b.calls.Load())
	}
	// With a live worker, readiness queues nothing.
	s.waitLive(1)
	s.get("/readiness")
	time.Sleep(100 * time.Millisecond)
	if n := s.streamMsgs(); n != 0 {
		t.Fatalf("readiness with a live worker queued %d messages", n)
	}
}

func TestGenerateText(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(2)
	s.startWorker(b, time.Second)

	r := s.generate("echo:hello")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("generate = %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if strings.TrimSpace(string(r.body)) != `{"generated_text":"HELLO"}` {
		t.Fatalf("generate body = %s", r.body)
	}
	if id := r.header.Get(httpapi.HeaderJobID); len(id) != 36 {
		t.Fatalf("job id header = %q", id)
	}
}

func TestRoutingErrors(t *testing.T) {
	s := newStack(t, stackOptions{})
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, ""},
		{http.MethodGet, "/generate", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPost, "/", http.StatusMethodNotAllowed, "GET"},
		{http.MethodDelete, "/readiness", http.StatusMethodNotAllowed, "GET"},
	}
	for _, tc := range tests {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			r, err := s.do(t.Context(), tc.method, tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d", r.status, tc.status)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow = %q, want %q", got, tc.allow)
			}
			if r.errorText(t) == "" {
				t.Fatal("empty error message")
			}
		})
	}
}
