package natsqueue

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/test/localstack"
)

// TestReplyGetsThroughTheWorkersFrozenServer: the worker's server freezes
// as the worker replies, while the producer, connected elsewhere, stays
// connected and so never looks in the store. The reply, sent as a request
// for a receipt, dies with the frozen server; the worker reconnects and
// stores the result. It must then send the reply again, or the caller
// waits out its deadline for a job that is done (make chaos-cluster, "job
// stream's leader frozen", issue 54).
func TestReplyGetsThroughTheWorkersFrozenServer(t *testing.T) {
	s := newTestServer(t)
	cl := newClient(t, s.dial())
	// The late looks would find the stored result by themselves, and the
	// test would pass without the second sending it is about.
	cl.LookLate(LateLooks{})
	proxy, err := localstack.NewProxy(s.ns.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	logs := &lockedBuffer{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st := DefaultSettings()
	st.AckWait = 10 * time.Second
	w, err := Dial(ctx, ConnectOptions{URL: proxy.URL()}, st, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	w.storeTry = time.Second // the Put swallowed by the freeze is given up sooner
	p, err := w.NewPuller(ctx, genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}

	job := testJob()
	answer := make(chan error, 1)
	go func() {
		// Well past the worker's recovery (a receipt's wait, a reconnect
		// and a second Put: a few seconds), well within the job's minute.
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := cl.Run(rctx, job)
		if err == nil {
			var b []byte
			b, err = io.ReadAll(r.Body)
			r.Body.Close()
			if err == nil && string(b) != "answer" {
				err = genq.Errorf(genq.Internal, "the caller got %q", b)
			}
		}
		answer <- err
	}()
	d := pullJob(t, p, job.ID)

	proxy.Freeze()
	completed := make(chan error, 1)
	go func() {
		completed <- d.Complete(ctx, genq.Result{ContentType: "text/plain", Data: []byte("answer")}, ReplyMeta{Worker: "w1"})
	}()
	// The reply's request is unconfirmed, so its bytes went into the
	// frozen link; only then does the worker notice its server is gone.
	waitLog(t, logs, "reply not confirmed; storing the result", 10*time.Second)
	proxy.Cut()

	if err := <-completed; err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := <-answer; err != nil {
		t.Fatalf("the caller, connected to a server that never froze, got %v; want the answer", err)
	}
}

// waitLog waits until logs hold line.
func waitLog(t *testing.T, logs *lockedBuffer, line string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(logs.String(), line); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the logs within %s:\n%s", line, within, logs.String())
		}
	}
}
