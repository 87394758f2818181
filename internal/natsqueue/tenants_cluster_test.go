package natsqueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/genq/genq/internal/tenant"
)

// countersLeader is the name of the node that leads the counters' stream.
func countersLeader(ctx context.Context, t *testing.T, c *Conn) string {
	t.Helper()
	s, err := c.js.Stream(ctx, "KV_"+TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("the counters' stream: %+v, %v", info, err)
	}
	return info.Cluster.Leader
}

// checkedStore is a tenant.Store that checks every read against the
// writes acknowledged before it started: a read older than one of them
// is stale, and a limit checked on it is checked on old counts.
type checkedStore struct {
	tenant.Store
	mu    *sync.Mutex
	acked *uint64 // the highest revision acknowledged, over every api
	stale *int
}

func (s checkedStore) Get(ctx context.Context, key string) (tenant.Counters, uint64, error) {
	s.mu.Lock()
	before := *s.acked
	s.mu.Unlock()
	c, rev, err := s.Store.Get(ctx, key)
	if err == nil && rev < before {
		s.mu.Lock()
		*s.stale++
		s.mu.Unlock()
	}
	return c, rev, err
}

func (s checkedStore) Update(ctx context.Context, key string, c tenant.Counters, rev uint64) (uint64, error) {
	n, err := s.Store.Update(ctx, key, c, rev)
	if err == nil {
		s.mu.Lock()
		*s.acked = max(*s.acked, n)
		s.mu.Unlock()
	}
	return n, err
}

// leaderLossTally counts one api's requests in TestTenantCountersSurviveLeaderLoss.
type leaderLossTally struct {
	tried, admitted, settled, settledAfter int
}

// TestTenantCountersSurviveLeaderLoss: two apis, one on the counters'
// leader's node and one on a follower's, admit and settle one tenant's
// requests while that leader is stopped. No read, during the run or
// after, misses a write acknowledged before it; every settlement
// acknowledged is counted, and nothing more than was tried (a write whose
// answer was lost in the failover may have landed); both apis go on after
// the new leader is elected.
func TestTenantCountersSurviveLeaderLoss(t *testing.T) {
	nodes, _ := startClusterNodes(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	st := DefaultSettings()
	st.Replicas = 3
	probe, err := Dial(ctx, ConnectOptions{URL: nodes[0].ClientURL()}, st, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := probe.TenantStore(ctx); err != nil {
		t.Fatal(err)
	}
	leader := countersLeader(ctx, t, probe)
	probe.Close()
	var lead *server.Server
	var others []*server.Server
	for _, n := range nodes {
		if n.Name() == leader {
			lead = n
		} else {
			others = append(others, n)
		}
	}
	var mu sync.Mutex
	var acked uint64
	stale := 0
	urls := []string{lead.ClientURL() + "," + others[0].ClientURL(), others[1].ClientURL()}
	var limiters []*tenant.Limiter
	for i, url := range urls {
		store := dialTenantStore(ctx, t, url, st)
		checked := checkedStore{Store: store, mu: &mu, acked: &acked, stale: &stale}
		limiters = append(limiters, tenant.NewLimiter(checked, fmt.Sprintf("api-%d", i)))
	}
	tallies := make([]leaderLossTally, len(limiters))
	// The leader stops once both apis have run 20 requests, while they run
	// more; neither runs its last 20 before it has stopped.
	stopped := make(chan struct{})
	var midway sync.WaitGroup
	midway.Add(len(limiters))
	var wg sync.WaitGroup
	wg.Go(func() {
		midway.Wait()
		lead.Shutdown() // the counters' leader goes; the others elect one
		close(stopped)
	})
	for api, l := range limiters {
		wg.Go(func() {
			for i := range 60 {
				switch i {
				case 20:
					midway.Done()
				case 40:
					<-stopped
				}
				runOne(ctx, l, &tallies[api], stopped)
			}
		})
	}
	wg.Wait()
	var sum leaderLossTally
	for api, n := range tallies {
		sum.tried += n.tried
		sum.admitted += n.admitted
		sum.settled += n.settled
		if n.settledAfter == 0 {
			t.Errorf("api-%d settled nothing after the leader stopped: %+v", api, n)
		}
	}
	var reads []tenant.Counters
	for _, l := range limiters {
		got, err := l.Today(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, got)
	}
	got := reads[0]
	counted := got.Total().Requests
	t.Logf("leader %s stopped; %d tried, %d admitted, %d settled, %d counted, %d tokens; %d stale reads",
		leader, sum.tried, sum.admitted, sum.settled, counted, got.Tokens, stale)
	if stale > 0 {
		t.Errorf("%d reads missed a write acknowledged before they started", stale)
	}
	if reads[1].Total().Requests != counted || reads[1].Tokens != got.Tokens {
		t.Errorf("the apis read different counters: %+v and %+v", reads[0].Total(), reads[1].Total())
	}
	if counted < int64(sum.settled) || counted > int64(sum.admitted) || got.Tokens < int64(sum.admitted) || got.Tokens > int64(sum.tried) {
		t.Errorf("want settled ≤ counted ≤ admitted ≤ tokens ≤ tried")
	}
}

// runOne admits and settles one request of tenant a, of one token, and
// counts it in n.
func runOne(ctx context.Context, l *tenant.Limiter, n *leaderLossTally, stopped <-chan struct{}) {
	// A limit that never bites: the requests are admitted and settled on
	// the record, one swap each (a tenant without limits would gather its
	// usage for a flush).
	a := tenant.Tenant{Name: "a", Limits: tenant.Limits{RPM: 1 << 40}}
	u := tenant.Usage{Route: "r", Model: "m", Requests: 1, CompletionTokens: 1}
	// Long enough to span the election, so that every request but those
	// whose answer the stopped leader took with it is counted.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n.tried++
	tk, err := l.Admit(rctx, a, tenant.Cost{Tokens: 1}, time.Now().Add(time.Minute))
	if err != nil {
		return
	}
	n.admitted++
	if l.Settle(rctx, tk, tenant.Cost{Tokens: 1}, u) != nil {
		return
	}
	n.settled++
	select {
	case <-stopped:
		n.settledAfter++
	default:
	}
}

// TestTenantSwapResentInCluster: in a cluster a swap sent again after its
// answer was lost is acknowledged at the revision it was stored at even
// once another api's write followed it: the stream's deduplication is
// checked before the revision, so the resend is not taken for a conflict
// (which would make the limiter count it twice).
func TestTenantSwapResentInCluster(t *testing.T) {
	t.Parallel()
	urls := startCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st := DefaultSettings()
	st.Replicas = 3
	store := dialTenantStore(ctx, t, urls, st)
	subject, first := firstSwap(ctx, t, store)
	if _, err := swapOnce(ctx, store.js, subject, []byte(`{"tokens":2}`), first.Sequence, "another api's"); err != nil {
		t.Fatal(err)
	}
	got, err := store.send(ctx, &swapMsg{subject: subject, data: []byte(`{"tokens":1}`), rev: 0, id: "first", lost: true})
	if err != nil || got != first.Sequence {
		t.Errorf("the resend: revision %d, %v; want %d", got, err, first.Sequence)
	}
}
