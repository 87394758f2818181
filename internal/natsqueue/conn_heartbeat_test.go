package natsqueue

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
)

// TestHeartbeatsSurviveANATSRestart: GENQ_WORKERS lives in memory, so a
// standalone server that restarts has lost it. The next heartbeat must
// re-create it, and the api's watch must see heartbeats again.
func TestHeartbeatsSurviveANATSRestart(t *testing.T) {
	store := t.TempDir()
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	url, port := ns.ClientURL(), ns.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := DefaultSettings()
	s.HeartbeatTTL = 2 * time.Second
	dial := func() *Conn {
		c, err := Dial(ctx, ConnectOptions{URL: url}, s, log, genq.VariantB)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	api, worker := dial(), dial()
	ws, err := api.WatchWorkers(ctx, genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	beatUntilLive := func(id string) {
		t.Helper()
		for {
			err := worker.Beat(ctx, genq.Heartbeat{WorkerID: id, Variant: genq.VariantB, At: time.Now()})
			for _, hb := range ws.Live() {
				if hb.WorkerID == id {
					return
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("worker %s never live; last heartbeat error: %v", id, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	beatUntilLive("before")

	ns.Shutdown()
	ns.WaitForShutdown()
	ns, err = natsembed.Start(natsembed.Options{Port: port, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	beatUntilLive("after")
}
