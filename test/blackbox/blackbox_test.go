// Package blackbox runs genq's real binaries as separate processes on
// loopback, with a real nats-server, and checks what an operator would see.
package blackbox

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/test/localstack"
)

// newStack builds the binaries (cheap after the first time, thanks to the
// build cache) and starts nats-server and the api for a tiny variant B model.
func newStack(t *testing.T, env ...string) *localstack.Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("black-box tests build and run every binary")
	}
	root, err := localstack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	binDir := t.TempDir()
	bin, err := localstack.Build(ctx, root, binDir)
	if err != nil {
		t.Fatal(err)
	}
	s := &localstack.Stack{Bin: bin, Dir: t.TempDir(), Variant: "B", Env: env}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("logs:\n%s", tailString(s.Logs(), 8000))
		}
	})
	if err := s.WriteTinyModel(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestSIGKILLUnderLoadLosesNothing is the spine's promise: a worker killed
// mid-job loses no request. 40 requests at concurrency 8 against two
// workers; one is killed with SIGKILL one second in.
func TestSIGKILLUnderLoadLosesNothing(t *testing.T) {
	s := newStack(t, "JOB_ACK_WAIT=3s", "LOG_LEVEL=info")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := s.StartNATS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	victim, err := s.StartWorker(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartWorker(ctx, true); err != nil {
		t.Fatal(err)
	}

	reqs := make([]localstack.Request, 40)
	for i := range reqs {
		reqs[i] = localstack.Request{Text: "Tell me a story about a queue, number " + strings.Repeat("x", i)}
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		time.Sleep(time.Second)
		victim.Kill()
	}()
	outs := localstack.Fire(ctx, http.DefaultClient, s.URL(), reqs, 8, 2*time.Minute)
	<-killed
	rep := localstack.Summarize("sigkill", outs, s.Logs())
	t.Logf("\n%s", localstack.Table([]localstack.Report{rep}))
	if rep.OK != len(reqs) {
		for i, o := range outs {
			if o.Status != http.StatusOK {
				t.Errorf("request %d: %d %v %s", i, o.Status, o.Err, o.Body)
			}
		}
		t.Fatalf("%d of %d answered 200", rep.OK, len(reqs))
	}
	if !strings.Contains(victim.Log(), `"msg":"job started"`) {
		t.Fatal("the killed worker had started no job: the test proved nothing")
	}
}

// TestLogsHoldNoSecrets runs a full stack with NATS credentials, API keys
// and a hub token set, drives every route, and searches all logs for them.
func TestLogsHoldNoSecrets(t *testing.T) {
	const (
		natsUser = "genq-user"
		natsPass = "nats-pass-7f3a9c1e"
		apiKey   = "api-key-5d2b8e4f"
		badKey   = "wrong-key-1c9e7a3b"
		hubToken = "hf_tokenvalue0a1b2c3d4e5f"
	)
	s := newStack(t, "NATS_USER="+natsUser, "NATS_PASSWORD="+natsPass, "HF_TOKEN="+hubToken, "MODEL_HUB_TOKEN="+hubToken, "LOG_LEVEL=debug")
	s.NATSArgs = []string{"--user", natsUser, "--pass", natsPass}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := s.StartNATS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAPI(ctx, "API_KEYS="+apiKey); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartWorker(ctx, true); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{apiKey, badKey, ""} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/generate", strings.NewReader(`{"text":"hello"}`))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 401}[key == apiKey]; resp.StatusCode != want {
			t.Fatalf("key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
	for _, url := range []string{s.URL() + "/", s.URL() + "/readiness", s.MetricsURL()} {
		if err := localstack.WaitHTTP(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	logs := s.Logs()
	if !strings.Contains(logs, `"msg":"job done"`) {
		t.Fatal("no job ran: the logs prove nothing")
	}
	for name, secret := range map[string]string{"NATS password": natsPass, "API key": apiKey, "wrong API key": badKey, "hub token": hubToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs contain the %s", name)
		}
	}
	if _, err := os.Stat(s.Dir); err != nil {
		t.Fatal(err)
	}
}
