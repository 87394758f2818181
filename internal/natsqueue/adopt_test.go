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

// apiSettings are an api's, none of them the default.
func apiSettings() Settings {
	s := DefaultSettings()
	s.QueueCapacity, s.BatchQueueCapacity = 7, 9
	s.MaxJobAge, s.DedupWindow = 2*time.Hour, 3*time.Minute
	s.ResultTTL, s.ResultMaxBytes = 30*time.Minute, 1<<20
	s.HeartbeatTTL, s.AckWait, s.MaxAttempts = 5*time.Second, 4*time.Second, 2
	return s
}

func adopting() Settings {
	s := DefaultSettings()
	s.Adopt = true
	return s
}

// TestWorkersAdoptTheAPIsAssets: a worker (Adopt, the defaults) started
// after the api leaves every asset as the api made it and reads the api's
// settings back; started before any api it creates what is missing, and
// follows the api's settings once the api starts.
func TestWorkersAdoptTheAPIsAssets(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	server := func() string {
		ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		return ns.ClientURL()
	}
	dial := func(url string, s Settings) *Conn {
		c, err := Dial(ctx, ConnectOptions{URL: url}, s, log, genq.VariantB)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	// same reports whether got are the api's settings, adopted.
	same := func(got Settings) bool {
		want := apiSettings()
		want.Adopt = true
		return got == want
	}

	t.Run("api first", func(t *testing.T) {
		url := server()
		api := dial(url, apiSettings())
		w := dial(url, adopting())
		if got := w.Settings(); !same(got) {
			t.Fatalf("worker settings %+v; want the api's %+v", got, apiSettings())
		}
		// Nothing was written over: the assets still hold the api's.
		if got := dial(url, apiSettings()).Settings(); got != apiSettings() {
			t.Fatalf("%+v", got)
		}
		st, err := api.js.Stream(ctx, JobsStream)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; cfg.MaxMsgsPerSubject != 7 || cfg.MaxAge != 2*time.Hour || cfg.Duplicates != 3*time.Minute {
			t.Fatalf("the worker rewrote %s: %+v", JobsStream, cfg)
		}
		status, err := api.workers.Status(ctx)
		if err != nil || status.TTL() != 5*time.Second {
			t.Fatalf("the worker rewrote %s: ttl %v, %v", WorkersBucket, status.TTL(), err)
		}
		// The worker's own re-creation of the heartbeat bucket (after a
		// NATS restart) uses the api's life.
		if err := api.js.DeleteKeyValue(ctx, WorkersBucket); err != nil {
			t.Fatal(err)
		}
		if err := w.Beat(ctx, genq.Heartbeat{WorkerID: "w1", Variant: genq.VariantB}); err != nil {
			t.Fatal(err)
		}
		kv, err := api.js.KeyValue(ctx, WorkersBucket)
		if err != nil {
			t.Fatal(err)
		}
		if status, err := kv.Status(ctx); err != nil || status.TTL() != 5*time.Second {
			t.Fatalf("re-created heartbeat bucket: ttl %v, %v; want the api's 5s", status.TTL(), err)
		}
	})

	t.Run("worker first", func(t *testing.T) {
		url := server()
		w := dial(url, adopting())
		if got, def := w.Settings(), DefaultSettings(); got.QueueCapacity != def.QueueCapacity || got.HeartbeatTTL != def.HeartbeatTTL || got.AckWait != def.AckWait {
			t.Fatalf("a worker alone: %+v; want the defaults", got)
		}
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		go w.FollowConsumerLimits(fctx, genq.VariantB, 50*time.Millisecond)
		dial(url, apiSettings()) // the api starts
		for !same(w.Settings()) {
			select {
			case <-ctx.Done():
				t.Fatalf("the worker never followed the api's settings: %+v", w.Settings())
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}
