package natsqueue

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
)

// TestWorkerKeepsTheConsumersLimits: the api wrote the consumers; a
// worker started with other flags serves by their AckWait and attempts
// (the server's), leaves them as they are, and follows a later rewrite.
// A worker of several models (several queues, whose consumers the api
// makes with the same settings) does so too.
func TestWorkerKeepsTheConsumersLimits(t *testing.T) {
	for name, queues := range map[string][]genq.Variant{
		"one variant":    {genq.VariantB},
		"several models": {genq.QueueToken(genq.KindChat, "a"), genq.QueueToken(genq.KindChat, "b")},
	} {
		t.Run(name, func(t *testing.T) { checkConsumersLimits(t, queues) })
	}
}

func checkConsumersLimits(t *testing.T, queues []genq.Variant) {
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dial := func(s Settings) *Conn {
		c, err := Dial(ctx, ConnectOptions{URL: ns.ClientURL()}, s, log, queues...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	api := DefaultSettings()
	api.AckWait, api.MaxAttempts = 5*time.Second, 2
	dial(api)

	own := DefaultSettings()
	own.AckWait, own.MaxAttempts, own.Adopt = 30*time.Second, 7, true
	w := dial(own)
	if got := w.Settings(); got.AckWait != 5*time.Second || got.MaxAttempts != 2 {
		t.Fatalf("worker settings = ack wait %s, %d attempts; want the consumer's 5s, 2", got.AckWait, got.MaxAttempts)
	}
	for _, q := range queues {
		info, err := w.js.Consumer(ctx, JobsStream, ConsumerName(q))
		if err != nil {
			t.Fatal(err)
		}
		if cfg := info.CachedInfo().Config; cfg.AckWait != 5*time.Second || cfg.MaxDeliver != maxDeliver(2) {
			t.Fatalf("the worker rewrote the consumer of %s: ack wait %s, max deliver %d", q, cfg.AckWait, cfg.MaxDeliver)
		}
	}

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go w.FollowConsumerLimits(fctx, queues[0], 50*time.Millisecond)
	api.AckWait, api.MaxAttempts = 9*time.Second, 4
	dial(api) // the api restarts with new flags
	for w.Settings().AckWait != 9*time.Second || w.Settings().MaxAttempts != 4 {
		select {
		case <-ctx.Done():
			t.Fatalf("worker never followed the rewrite: %+v", w.Settings())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestMaxDeliverLeavesRoomForSuspects: the consumer's delivery limit and
// the attempts read back from it agree, with room for every charged
// attempt, an uncharged crash after each, and a delivery that only
// dead-letters.
func TestMaxDeliverLeavesRoomForSuspects(t *testing.T) {
	for _, tt := range []struct{ attempts, maxDeliver int }{{1, 3}, {3, 7}, {5, 11}} {
		if got := maxDeliver(tt.attempts); got != tt.maxDeliver {
			t.Errorf("maxDeliver(%d) = %d, want %d", tt.attempts, got, tt.maxDeliver)
		}
		if got := attemptsOf(tt.maxDeliver); got != tt.attempts {
			t.Errorf("attemptsOf(%d) = %d, want %d", tt.maxDeliver, got, tt.attempts)
		}
	}
	for _, md := range []int{-1, 0, 1, 2} {
		if got := attemptsOf(md); got != 0 {
			t.Errorf("attemptsOf(%d) = %d, want 0 (no limit read)", md, got)
		}
	}
}
