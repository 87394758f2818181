package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/worker"
)

// A model over the budget is announced unloadable, with why, for as long
// as the fleet serves, and its beat is withdrawn when the fleet stops.
func TestFleetAnnouncesRefusedModel(t *testing.T) {
	h := newHarness(t)
	big := genq.Model{Name: "big", Kind: genq.KindChat, Queue: genq.QueueToken(genq.KindChat, "big"), SizeBytes: 1000}
	f, err := worker.NewFleet([]genq.Model{big}, worker.FleetOptions{Budget: 100, Log: testLog(),
		Load: func(context.Context, genq.Model, func(float64)) (genq.Backend, error) {
			return nil, errors.New("a refused model was loaded")
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := h.conn.WatchWorkers(ctx, big.Queue)
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- f.Serve(serveCtx, h.dial(), worker.Config{WorkerID: "w1", HeartbeatEvery: 100 * time.Millisecond},
			func(m genq.Model) genq.BackendInfo { return genq.BackendInfo{Model: m.Name, Slots: 1} }, testLog(), prometheus.NewRegistry())
	}()

	hb := waitFor(t, ctx, func() []genq.Heartbeat { return ws.Of(big.Queue).Live() }, func(n int) bool { return n == 1 })
	if hb[0].WorkerID != "w1" || hb[0].ModelState != genq.ModelUnloadable || !strings.Contains(hb[0].LoadError, "MODEL_MEMORY_BUDGET of 100 bytes") {
		t.Errorf("beat %+v; want w1's, unloadable, saying the budget", hb[0])
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	// Well within the beat's TTL: withdrawn, not expired.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	waitFor(t, wctx, func() []genq.Heartbeat { return ws.Of(big.Queue).Live() }, func(n int) bool { return n == 0 })
}

// waitFor polls live until ok holds of its length, and returns it.
func waitFor(t *testing.T, ctx context.Context, live func() []genq.Heartbeat, ok func(int) bool) []genq.Heartbeat {
	t.Helper()
	for {
		if hbs := live(); ok(len(hbs)) {
			return hbs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("heartbeats %+v: not as wanted in time", live())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
