package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/submit"
	"github.com/genq/genq/internal/worker"
)

// upperBackend answers a prompt in upper case, or fails on "fail", or
// answers image/png bytes of the prompt for variant C.
type upperBackend struct{ calls atomic.Int64 }

func (b *upperBackend) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu"}, Model: "upper", Slots: 4}
}
func (b *upperBackend) Close() error { return nil }
func (b *upperBackend) Generate(_ context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	b.calls.Add(1)
	if job.Text == "fail" {
		return genq.Result{}, genq.Errorf(genq.Invalid, "refused")
	}
	if job.Variant == genq.VariantC {
		return genq.NewImageResult([]byte("PNG:" + job.Text)), nil
	}
	return genq.NewTextResult(strings.ToUpper(job.Text)), nil
}

func startWorker(t *testing.T, url string, v genq.Variant) *upperBackend {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	conn, err := natsqueue.Dial(t.Context(), natsqueue.ConnectOptions{URL: url}, natsqueue.DefaultSettings(), log, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	b := &upperBackend{}
	rt := worker.New(worker.Config{WorkerID: "w", Variant: v, PollWait: 300 * time.Millisecond}, conn, b, log, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

func submitLines(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	return submitLinesCtx(t.Context(), url, args...)
}

func submitLinesCtx(ctx context.Context, url string, args ...string) (string, error) {
	var out bytes.Buffer
	getenv := func(k string) string {
		if k == "NATS_URL" {
			return url
		}
		return ""
	}
	err := run(ctx, append([]string{"submit"}, args...), env{getenv: getenv, stdout: &out, stderr: &out})
	return out.String(), err
}

func readResults(t *testing.T, dir string) []submit.Result {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, submit.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rs []submit.Result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r submit.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func TestSubmitText(t *testing.T) {
	ns := embeddedNATS(t)
	b := startWorker(t, ns.ClientURL(), genq.VariantB)

	dir := t.TempDir()
	in := filepath.Join(dir, "prompts.jsonl")
	var lines []string
	for _, p := range []string{"alpha", "beta", "gamma", "delta", "epsilon"} {
		lines = append(lines, `{"text":"`+p+`"}`)
	}
	lines = append(lines, `{"id":"mine-1","text":"zeta"}`, "", `{"text":"fail"}`)
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	log, err := submitLines(t, ns.ClientURL(), "--variant", "B", "--in", in, "--out", out, "--concurrency", "3")
	if err == nil || !strings.Contains(err.Error(), "1 of 7 jobs failed") {
		t.Fatalf("first run: err = %v\n%s", err, log)
	}
	got := map[string]string{}
	for _, r := range readResults(t, out) {
		if r.GeneratedText != nil {
			got[r.ID] = *r.GeneratedText
		} else if r.Error != "refused" || r.Code != genq.Invalid {
			t.Fatalf("unexpected failure %+v", r)
		}
	}
	if len(got) != 6 || got["mine-1"] != "ZETA" {
		t.Fatalf("results = %v", got)
	}
	calls := b.calls.Load()

	// A rerun skips the six done and retries the failure only.
	log, err = submitLines(t, ns.ClientURL(), "--variant", "B", "--in", in, "--out", out)
	if err == nil || !strings.Contains(log, "6 skipped as already done") {
		t.Fatalf("rerun: err = %v\n%s", err, log)
	}
	if n := b.calls.Load() - calls; n != 1 {
		t.Fatalf("rerun ran %d jobs, want 1", n)
	}
	// One line per id, the retried one's last outcome.
	ids := map[string]bool{}
	for _, r := range readResults(t, out) {
		if ids[r.ID] {
			t.Errorf("results.jsonl has two lines for %s", r.ID)
		}
		ids[r.ID] = true
	}
	if len(ids) != 7 {
		t.Errorf("results.jsonl has %d ids, want 7", len(ids))
	}
	if strings.Contains(log, "nats disconnected") {
		t.Errorf("a clean exit logged a disconnect:\n%s", log)
	}
}

// TestSubmitRerunAfterInterrupt: a batch interrupted while its jobs wait in
// the queue (Ctrl-C cancels them) finishes on a rerun, promptly.
func TestSubmitRerunAfterInterrupt(t *testing.T) {
	ns := embeddedNATS(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "prompts.jsonl")
	_ = os.WriteFile(in, []byte(`{"text":"one"}`+"\n"+`{"text":"two"}`+"\n"+`{"id":"three","text":"three"}`+"\n"), 0o644)
	out := filepath.Join(dir, "results")
	// No worker: the jobs wait in the queue until the interrupt.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if log, err := submitLinesCtx(ctx, ns.ClientURL(), "--in", in, "--out", out); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("first run: %v\n%s", err, log)
	}
	startWorker(t, ns.ClientURL(), genq.VariantB)
	log, err := submitLines(t, ns.ClientURL(), "--in", in, "--out", out, "--timeout", "20s")
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, log)
	}
	if rs := readResults(t, out); len(rs) != 3 {
		t.Fatalf("results: %+v", rs)
	}
}

// TestSubmitBadLines: a bad line is reported and recorded, and the rest of
// the batch runs; --strict aborts before anything is sent.
func TestSubmitBadLines(t *testing.T) {
	ns := embeddedNATS(t)
	b := startWorker(t, ns.ClientURL(), genq.VariantB)
	dir := t.TempDir()
	in := filepath.Join(dir, "prompts.jsonl")
	_ = os.WriteFile(in, []byte(`{"text":"good"}`+"\n"+`{"text":`+"\n"+`{"id":"x","text":""}`+"\n"), 0o644)
	out := filepath.Join(dir, "results")
	if log, err := submitLines(t, ns.ClientURL(), "--in", in, "--out", out, "--strict"); err == nil || b.calls.Load() != 0 {
		t.Fatalf("--strict: %v, %d jobs ran\n%s", err, b.calls.Load(), log)
	}
	log, err := submitLines(t, ns.ClientURL(), "--in", in, "--out", out)
	if err == nil || !strings.Contains(log, "line 2:") || !strings.Contains(log, "line 3: text field is required") {
		t.Fatalf("err = %v\n%s", err, log)
	}
	codes := map[string]genq.Code{}
	for _, r := range readResults(t, out) {
		codes[r.ID] = r.Code
	}
	if len(codes) != 3 || codes["x"] != genq.Invalid || codes["line-2"] != genq.Invalid || b.calls.Load() != 1 {
		t.Fatalf("results %v, %d jobs ran; want the good one run and two invalid lines", codes, b.calls.Load())
	}
}

func TestSubmitHelp(t *testing.T) {
	log, err := submitLines(t, "nats://127.0.0.1:1", "--help")
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(log, "-strict") {
		t.Fatalf("err = %v\n%s", err, log)
	}
}

func TestSubmitImagesWritesPNGFiles(t *testing.T) {
	ns := embeddedNATS(t)
	startWorker(t, ns.ClientURL(), genq.VariantC)
	dir := t.TempDir()
	in := filepath.Join(dir, "p.jsonl")
	_ = os.WriteFile(in, []byte(`{"id":"fox","text":"a red fox"}`+"\n"), 0o644)
	out := filepath.Join(dir, "out")
	if log, err := submitLines(t, ns.ClientURL(), "--variant", "C", "--in", in, "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	b, err := os.ReadFile(filepath.Join(out, "fox.png"))
	if err != nil || string(b) != "PNG:a red fox" {
		t.Fatalf("fox.png = %q, %v", b, err)
	}
}

func TestSubmitRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"no text":   `{"id":"a"}`,
		"bad json":  `{"text":`,
		"bad id":    `{"id":"../x","text":"a"}`,
		"duplicate": `{"id":"a","text":"x"}` + "\n" + `{"id":"a","text":"y"}`,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			in := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
			_ = os.WriteFile(in, []byte(content+"\n"), 0o644)
			// No NATS is needed: the input is checked before connecting.
			_, err := submitLines(t, "nats://127.0.0.1:1", "--in", in, "--out", filepath.Join(dir, "out"), "--strict")
			if err == nil || !strings.Contains(err.Error(), "line") {
				t.Fatalf("err = %v", err)
			}
		})
	}
	var u usageError
	if _, err := submitLines(t, "nats://127.0.0.1:1", "--out", dir); !errors.As(err, &u) {
		t.Fatalf("missing --in: err = %v", err)
	}
}

// embeddedNATS starts a JetStream server for one test.
func embeddedNATS(t *testing.T) *server.Server {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Waited for, so that the server has let go of its store before the
	// test's temporary folder is removed.
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}
