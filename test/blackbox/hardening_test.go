package blackbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHardenedAPI runs nats-server, the api and one worker as processes and
// checks what clients and operators see of the api's hardening: a refused
// body answered to a client that writes before it reads, metrics kept off
// the public port with a bounded label set, and a worker whose id holds
// dots counted as live.
func TestHardenedAPI(t *testing.T) {
	s := newStack(t, "LOG_LEVEL=info")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := s.StartNATS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	// A host name with dots is the default worker id on most clouds.
	if _, err := s.StartWorker(ctx, true, "WORKER_ID=ip-10-0-0-5.ec2.internal-1a2b3c4d"); err != nil {
		t.Fatal(err)
	}

	t.Run("a worker id with dots is live", func(t *testing.T) {
		var root struct {
			LiveWorkers int `json:"live_workers"`
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if err := getJSON(ctx, s.URL()+"/", &root); err != nil {
				t.Fatal(err)
			}
			if root.LiveWorkers == 1 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("live_workers = %d, want 1", root.LiveWorkers)
	})

	t.Run("a second worker on the default metrics port takes a free one", func(t *testing.T) {
		// Hold the default port as a first worker on this host would (or
		// find it held already, which is as good).
		if ln, err := net.Listen("tcp", ":9091"); err == nil {
			defer ln.Close()
		}
		w, err := s.StartWorker(ctx, true, "METRICS_ADDR=:9091")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(w.Log(), "the default metrics address is taken") {
			t.Fatalf("no warning about the taken port:\n%s", w.Log())
		}
		_ = w.Stop(10 * time.Second)
	})

	t.Run("python urllib gets 413 for a 2 MiB body", func(t *testing.T) {
		python, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("python3 is not installed")
		}
		// urllib writes the whole body before it reads the answer.
		const script = `
import json, sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], data=b'{"text":"' + b'a' * (2 << 20) + b'"}',
                             headers={"Content-Type": "application/json"}, method="POST")
try:
    urllib.request.urlopen(req, timeout=30)
    print("status 200")
except urllib.error.HTTPError as e:
    print("status", e.code, json.loads(e.read())["error"])
`
		for i := range 3 {
			out, err := exec.CommandContext(ctx, python, "-c", script, s.URL()+"/generate").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "status 413 ") || !strings.Contains(string(out), "over the limit") {
				t.Fatalf("try %d: %v\n%s", i, err, out)
			}
		}
	})

	t.Run("metrics on the internal address only, methods bounded", func(t *testing.T) {
		for i := range 20 {
			req, _ := http.NewRequestWithContext(ctx, fmt.Sprintf("X%d", i), s.URL()+"/generate", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		resp, err := http.Get(s.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("public /metrics = %d, want 404", resp.StatusCode)
		}
		resp, err = http.Get(s.MetricsURL())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `genq_http_requests_total{code="405",method="other",route="unmatched"} 20`; !strings.Contains(string(body), want) {
			t.Fatalf("internal /metrics lacks %s", want)
		}
		if strings.Contains(string(body), `method="X1"`) {
			t.Fatal("a made-up method became a label value")
		}
	})
}

func getJSON(ctx context.Context, url string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
