package natsqueue

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/tenant"
)

func tenantConn(tb testing.TB) *Conn {
	tb.Helper()
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	c, err := Dial(context.Background(), ConnectOptions{URL: ns.ClientURL()}, DefaultSettings(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// TestTenantStoreSwaps: a write at a revision that is no longer the
// record's, or a create of a record that is there, is tenant.ErrConflict;
// the right revision writes.
func TestTenantStoreSwaps(t *testing.T) {
	ctx := context.Background()
	store, err := tenantConn(t).TenantStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := tenant.CounterKey("a", "2026-11-29")
	c, rev, err := store.Get(ctx, key)
	if err != nil || rev != 0 || c.Tokens != 0 {
		t.Fatalf("a missing record: %+v, rev %d, %v", c, rev, err)
	}
	first, err := store.Update(ctx, key, tenant.Counters{Tokens: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		rev  uint64
		want error
	}{
		{"create again", 0, tenant.ErrConflict},
		{"a stale revision", first + 7, tenant.ErrConflict},
		{"the record's revision", first, nil},
	} {
		if _, err := store.Update(ctx, key, tenant.Counters{Tokens: 2}, tt.rev); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	c, _, _ = store.Get(ctx, key)
	keys, err := store.Keys(ctx, "2026-11-29")
	if c.Tokens != 2 || err != nil || len(keys) != 1 || keys[0] != key {
		t.Errorf("after the swaps: %+v, keys %v, %v", c, keys, err)
	}
}

// BenchmarkTenantAdmission is one request's cost in the counters on one
// api: its admission (one compare-and-swap) and its settlement (another),
// over an embedded nats-server with file storage.
func BenchmarkTenantAdmission(b *testing.B) {
	ctx := context.Background()
	store, err := tenantConn(b).TenantStore(ctx)
	if err != nil {
		b.Fatal(err)
	}
	l := tenant.NewLimiter(store, "api-1")
	a := tenant.Tenant{Name: "a", Limits: tenant.Limits{TPD: 1 << 50, RPM: 1 << 50}}
	u := tenant.Usage{Route: "/v1/chat/completions", Model: "m", Requests: 1, PromptTokens: 30, CompletionTokens: 20}
	for b.Loop() {
		tk, err := l.Admit(ctx, a, tenant.Cost{Tokens: 64}, time.Now().Add(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Settle(ctx, tk, tenant.Cost{Tokens: 50}, u); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTenantSwapResent: a swap sent again after its answer was lost is
// answered with the revision it was stored at; one that was never stored
// is a conflict, however many times it was sent.
func TestTenantSwapResent(t *testing.T) {
	ctx := context.Background()
	store, err := tenantConn(t).TenantStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subject, first := firstSwap(ctx, t, store)
	for _, tt := range []struct {
		name string
		m    swapMsg
		want uint64
	}{
		{"resent once stored", swapMsg{rev: 0, id: "first", lost: true}, first.Sequence},
		{"never stored, resent at an old revision", swapMsg{rev: 0, id: "never", lost: true}, 0},
		{"never stored, sent once at an old revision", swapMsg{rev: 0, id: "never"}, 0},
	} {
		tt.m.subject, tt.m.data = subject, []byte(`{"tokens":2}`)
		got, err := store.send(ctx, &tt.m)
		if tt.want == 0 && !errors.Is(err, tenant.ErrConflict) || tt.want != 0 && (err != nil || got != tt.want) {
			t.Errorf("%s: revision %d, %v; want %d (0: a conflict)", tt.name, got, err, tt.want)
		}
	}
	c, rev, err := store.Get(ctx, tenant.CounterKey("a", "2026-11-29"))
	if err != nil || rev != first.Sequence || c.Tokens != 1 {
		t.Errorf("after the resends: %+v at %d, %v; want the first write's", c, rev, err)
	}
}
