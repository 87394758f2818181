package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
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

// TestTenantCountersSurviveLeaderLoss: two apis on different nodes of a
// 3-node cluster admit and settle one tenant's requests while the leader
// of the counters' stream is stopped. Every request settled is counted
// once, none twice: the counters hold at least the requests that were
// settled and at most those that were admitted (a write whose answer was
// lost in the failover may have landed).
func TestTenantCountersSurviveLeaderLoss(t *testing.T) {
	nodes, urls := startClusterNodes(t)
	st := DefaultSettings()
	st.Replicas = 3
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nodeURLs := strings.Split(urls, ",")
	var limiters []*tenant.Limiter
	var leader string
	for i := range 2 {
		c, err := Dial(ctx, ConnectOptions{URL: nodeURLs[i] + "," + nodeURLs[(i+1)%3]}, st, testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		store, err := c.TenantStore(ctx)
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, tenant.NewLimiter(store, fmt.Sprintf("api-%d", i)))
		if i == 0 {
			s, err := c.js.Stream(ctx, "KV_"+TenantsBucket)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctx)
			if err != nil || info.Cluster == nil {
				t.Fatalf("the counters' stream: %+v, %v", info, err)
			}
			leader = info.Cluster.Leader
		}
	}
	a := tenant.Tenant{Name: "a"}
	u := tenant.Usage{Route: "r", Model: "m", Requests: 1, CompletionTokens: 1}
	var mu sync.Mutex
	admitted, settled := 0, 0
	var wg sync.WaitGroup
	for api, l := range limiters {
		wg.Go(func() {
			for i := range 60 {
				if api == 0 && i == 20 {
					for _, n := range nodes {
						if n.Name() == leader {
							n.Shutdown() // the counters' leader goes; the others elect one
						}
					}
				}
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				tk, err := l.Admit(rctx, a, tenant.Cost{Tokens: 1}, time.Now().Add(time.Minute))
				if err == nil {
					mu.Lock()
					admitted++
					mu.Unlock()
					if err = l.Settle(rctx, tk, tenant.Cost{Tokens: 1}, u); err == nil {
						mu.Lock()
						settled++
						mu.Unlock()
					}
				}
				rcancel()
			}
		})
	}
	wg.Wait()
	var got tenant.Counters
	var err error
	for range 50 { // the new leader may still be taking over
		if got, err = limiters[1].Today(ctx, "a"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	counted := got.Total().Requests
	t.Logf("leader %s stopped; %d admitted, %d settled, %d counted, %d tokens", leader, admitted, settled, counted, got.Tokens)
	if err != nil || settled < 60 || counted < int64(settled) || counted > int64(admitted) || got.Tokens < counted || got.Tokens > int64(admitted) {
		t.Fatalf("%d admitted, %d settled, %d counted, %d tokens, %v: want at least half settled, and settled ≤ counted ≤ admitted",
			admitted, settled, counted, got.Tokens, err)
	}
}
