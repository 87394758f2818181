package tenant

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for limiters under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestLimiter(store Store, api string, c *clock) *Limiter {
	l := NewLimiter(store, api)
	l.now = c.now
	return l
}

// countingStore counts a Store's round trips.
type countingStore struct {
	Store
	mu           sync.Mutex
	gets, writes int
}

func (s *countingStore) Get(ctx context.Context, key string) (Counters, uint64, error) {
	s.mu.Lock()
	s.gets++
	s.mu.Unlock()
	return s.Store.Get(ctx, key)
}

func (s *countingStore) Update(ctx context.Context, key string, c Counters, rev uint64) (uint64, error) {
	s.mu.Lock()
	s.writes++
	s.mu.Unlock()
	return s.Store.Update(ctx, key, c, rev)
}

func refusalOf(t *testing.T, err error) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v, want a refusal", err)
	}
	return r
}

func TestLimits(t *testing.T) {
	start := time.Date(2026, 11, 29, 10, 0, 15, 0, time.UTC) // 45 s left in the minute
	far := start.Add(time.Hour)
	for _, tt := range []struct {
		name    string
		tenant  Tenant
		cost    Cost
		admits  int    // how many of the same request in a row are admitted
		limit   string // the limit that refuses the next
		after   time.Duration
		settle  bool // settle each with what it reserved before the next
		waitFor time.Duration
	}{
		{name: "rpm", tenant: Tenant{Name: "a", Limits: Limits{RPM: 3}}, admits: 3, limit: "rpm", after: 45 * time.Second, settle: true},
		{name: "tpm", tenant: Tenant{Name: "a", Limits: Limits{TPM: 250}}, cost: Cost{Tokens: 100}, admits: 3, limit: "tpm", after: 45 * time.Second, settle: true},
		{name: "tpd", tenant: Tenant{Name: "a", Limits: Limits{TPD: 1000}}, cost: Cost{Tokens: 400}, admits: 3, limit: "tpd", after: 13*time.Hour + 59*time.Minute + 45*time.Second, settle: true},
		{name: "images", tenant: Tenant{Name: "a", Limits: Limits{ImagesPerDay: 5}}, cost: Cost{Images: 2}, admits: 2, limit: "images_per_day", settle: true, after: 13*time.Hour + 59*time.Minute + 45*time.Second},
		{name: "concurrency", tenant: Tenant{Name: "a", Limits: Limits{Concurrency: 2}}, admits: 2, limit: "concurrency", after: time.Second},
		{name: "none", tenant: Tenant{Name: "a"}, cost: Cost{Tokens: 1e6, Images: 100}, admits: 20, settle: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: start}
			l := newTestLimiter(NewMemStore(), "api-1", c)
			ctx := context.Background()
			for i := range tt.admits {
				tk, err := l.Admit(ctx, tt.tenant, tt.cost, far)
				if err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
				if tt.settle {
					if err := l.Settle(ctx, tk, tt.cost, Usage{Route: "r", Model: "m"}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tt.limit == "" {
				return
			}
			_, err := l.Admit(ctx, tt.tenant, tt.cost, far)
			r := refusalOf(t, err)
			if r.Limit != tt.limit || r.RetryAfter != tt.after || r.Tenant != "a" {
				t.Errorf("refused by %s after %s for %s; want %s after %s", r.Limit, r.RetryAfter, r.Tenant, tt.limit, tt.after)
			}
			c.add(tt.after)
			if tt.limit == "concurrency" {
				c.add(time.Hour) // the requests in flight lapse at their deadline
			}
			if _, err := l.Admit(ctx, tt.tenant, tt.cost, far.Add(2*time.Hour+24*time.Hour)); err != nil {
				t.Errorf("after %s: %v", tt.after, err)
			}
		})
	}
}

// TestSettleReplacesTheReservation: a request reserves its answer's most
// tokens and is charged what it took; the counters keep its usage.
func TestSettleReplacesTheReservation(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	l := newTestLimiter(NewMemStore(), "api-1", c)
	ctx := context.Background()
	a := Tenant{Name: "a", Limits: Limits{TPM: 1000, TPD: 5000, Concurrency: 1}}
	tk, err := l.Admit(ctx, a, Cost{Tokens: 900}, c.t.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status.TokensRemaining != 100 || tk.Status.TokensLimit != 1000 {
		t.Errorf("status %+v, want 100 of 1000 tokens left", tk.Status)
	}
	u := Usage{Route: "/v1/chat/completions", Model: "m", Requests: 1, PromptTokens: 30, CachedTokens: 10, CompletionTokens: 20, EngineSeconds: 0.5}
	if err := l.Settle(ctx, tk, Cost{Tokens: 50}, u); err != nil {
		t.Fatal(err)
	}
	got, err := l.Today(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tokens != 50 || got.MinuteTokens != 50 || got.Running(c.t) != 0 || len(got.Usage) != 1 || got.Usage[0] != u {
		t.Errorf("counters %+v, want 50 tokens, none in flight, the usage", got)
	}
	// Settled a minute later, a request is charged what it took beyond its
	// reservation in the new minute, and its day is corrected.
	tk, _ = l.Admit(ctx, a, Cost{Tokens: 10}, c.t.Add(time.Minute))
	c.add(time.Minute)
	if err := l.Settle(ctx, tk, Cost{Tokens: 40}, u); err != nil {
		t.Fatal(err)
	}
	got, _ = l.Today(ctx, "a")
	if got.Tokens != 90 || got.MinuteTokens != 30 || got.Usage[0].Requests != 2 {
		t.Errorf("counters %+v, want 90 tokens today, 30 this minute, 2 requests", got)
	}
}

// TestOneRoundTripPerAdmission: one api alone admits with one write and
// no read once it holds the record.
func TestOneRoundTripPerAdmission(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := &countingStore{Store: NewMemStore()}
	l := newTestLimiter(store, "api-1", c)
	ctx := context.Background()
	a := Tenant{Name: "a", Limits: Limits{RPM: 100}}
	for range 10 {
		if _, err := l.Admit(ctx, a, Cost{}, c.t.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if store.gets != 1 || store.writes != 10 {
		t.Errorf("%d reads and %d writes for 10 admissions, want 1 and 10", store.gets, store.writes)
	}
}

// TestDailyTokensAcrossAPIs: three apis admit one tenant's requests at
// once over one store; the day's tokens go over the limit by one request
// at most, whatever the interleaving, since every admission is a
// compare-and-swap of the one record.
func TestDailyTokensAcrossAPIs(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := NewMemStore()
	apis := []*Limiter{newTestLimiter(store, "api-1", c), newTestLimiter(store, "api-2", c), newTestLimiter(store, "api-3", c)}
	a := Tenant{Name: "a", Limits: Limits{TPD: 1050}}
	ctx := context.Background()
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			l := apis[i%len(apis)]
			tk, err := l.Admit(ctx, a, Cost{Tokens: 100}, c.t.Add(time.Minute))
			if err != nil {
				refusalOf(t, err)
				return
			}
			mu.Lock()
			admitted++
			mu.Unlock()
			if err := l.Settle(ctx, tk, Cost{Tokens: 100}, Usage{Route: "r", Model: "m", Requests: 1}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, _ := apis[0].Today(ctx, "a")
	if admitted != 11 || got.Tokens != 1100 || got.Total().Requests != 11 {
		t.Errorf("%d admitted, %d tokens, %d requests counted; want 11, 1100, 11", admitted, got.Tokens, got.Total().Requests)
	}
}

// TestDeadAPILeaseLapses: the requests in flight of an api that died
// without settling stop counting at their deadline.
func TestDeadAPILeaseLapses(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := NewMemStore()
	dead, alive := newTestLimiter(store, "api-dead", c), newTestLimiter(store, "api-alive", c)
	a := Tenant{Name: "a", Limits: Limits{Concurrency: 1}}
	ctx := context.Background()
	if _, err := dead.Admit(ctx, a, Cost{}, c.t.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := alive.Admit(ctx, a, Cost{}, c.t.Add(time.Minute))
	if r := refusalOf(t, err); r.Limit != "concurrency" {
		t.Fatalf("refused by %s, want concurrency", r.Limit)
	}
	c.add(30 * time.Second)
	if _, err := alive.Admit(ctx, a, Cost{}, c.t.Add(time.Minute)); err != nil {
		t.Fatalf("after the dead api's deadline: %v", err)
	}
}

// TestRecordCountsAgainstTheDay: what a batch's request took, recorded
// without admission, counts against the tenant's day and adds its usage;
// a request that only queued work adds none.
func TestRecordCountsAgainstTheDay(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	l := newTestLimiter(NewMemStore(), "api-1", c)
	ctx := context.Background()
	a := Tenant{Name: "a", Limits: Limits{TPD: 100}}
	tk, err := l.Admit(ctx, a, Cost{}, c.t.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, tk, Cost{}, Usage{}); err != nil { // a batch's creation
		t.Fatal(err)
	}
	if err := l.Record(ctx, "a", Cost{Tokens: 100}, Usage{Route: "/v1/batches", Model: "m", Requests: 1, CompletionTokens: 100}); err != nil {
		t.Fatal(err)
	}
	got, _ := l.Today(ctx, "a")
	if len(got.Usage) != 1 || got.Usage[0].Route != "/v1/batches" || got.Tokens != 100 {
		t.Fatalf("counters %+v, want the batch's usage alone and 100 tokens", got)
	}
	_, err = l.Admit(ctx, a, Cost{}, c.t.Add(time.Minute))
	if r := refusalOf(t, err); r.Limit != "tpd" {
		t.Fatalf("refused by %s, want tpd", r.Limit)
	}
}

// TestBusyRecordAcrossAPIs: eight apis admitting one tenant's requests at
// once, over a store that answers after a while as NATS does, all get
// through: colliding apis back off and wait their turn rather than run
// out of attempts.
func TestBusyRecordAcrossAPIs(t *testing.T) {
	store := slowStore{NewMemStore()}
	var apis []*Limiter
	for i := range 8 {
		apis = append(apis, NewLimiter(store, "api-"+string(rune('a'+i))))
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8*25)
	for _, l := range apis {
		wg.Go(func() {
			for range 25 {
				// A limit that never bites: the tenant's requests are
				// admitted against its record, one swap each.
				tk, err := l.Admit(ctx, Tenant{Name: "busy", Limits: Limits{RPM: 1 << 20}}, Cost{Tokens: 1}, time.Now().Add(time.Minute))
				if err == nil {
					err = l.Settle(ctx, tk, Cost{Tokens: 1}, Usage{Route: "r", Model: "m", Requests: 1})
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, _ := apis[0].Today(ctx, "busy")
	if got.Total().Requests != 200 || got.Tokens != 200 || got.Running(time.Now()) != 0 {
		t.Fatalf("counters %+v, want 200 requests and tokens, none in flight", got)
	}
}

// slowStore answers each write after 200 µs, a round trip to NATS.
type slowStore struct{ *MemStore }

func (s slowStore) Update(ctx context.Context, key string, c Counters, rev uint64) (uint64, error) {
	time.Sleep(200 * time.Microsecond)
	return s.MemStore.Update(ctx, key, c, rev)
}

// TestOpenTenantsWriteOnceAFlush: a tenant without limits is admitted and
// settled with no round trip; a flush writes all of its usage in one
// swap, and that of several apis adds up.
func TestOpenTenantsWriteOnceAFlush(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := &countingStore{Store: NewMemStore()}
	ctx := context.Background()
	open := Tenant{Name: "anonymous", Limits: Limits{Weight: 2, Models: []string{"m"}}}
	apis := []*Limiter{newTestLimiter(store, "api-1", c), newTestLimiter(store, "api-2", c)}
	for i, l := range apis {
		for range 50 {
			tk, err := l.Admit(ctx, open, Cost{Tokens: 100}, c.t.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Settle(ctx, tk, Cost{Tokens: 3, Images: int64(i)}, Usage{Route: "/v1/embeddings", Model: "m", Requests: 1, PromptTokens: 3}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if store.gets != 0 || store.writes != 0 {
		t.Fatalf("%d reads and %d writes before a flush, want none", store.gets, store.writes)
	}
	for _, l := range apis {
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if store.writes != 2 {
		t.Errorf("%d writes for two apis' flushes, want 2", store.writes)
	}
	got, err := apis[0].Today(ctx, "anonymous")
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{Route: "/v1/embeddings", Model: "m", Requests: 100, PromptTokens: 300}
	if got.Tokens != 300 || got.Images != 50 || got.Running(c.t) != 0 || len(got.Usage) != 1 || got.Usage[0] != want {
		t.Errorf("counters %+v, want 300 tokens, 50 images, none in flight, usage %+v", got, want)
	}
	if err := apis[0].Flush(ctx); err != nil || store.writes != 2 {
		t.Errorf("a flush with nothing gathered: %v, %d writes, want none more", err, store.writes)
	}
}

// TestOpenTenantUsageIsWrittenUnasked: gathered usage is written within
// usageFlushEvery without a call to Flush.
func TestOpenTenantUsageIsWrittenUnasked(t *testing.T) {
	l := NewLimiter(NewMemStore(), "api-1")
	ctx := context.Background()
	tk, err := l.Admit(ctx, Tenant{Name: "anonymous"}, Cost{}, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, tk, Cost{Tokens: 7}, Usage{Route: "r", Model: "m", Requests: 1}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * usageFlushEvery); ; {
		got, err := l.Today(ctx, "anonymous")
		if err != nil {
			t.Fatal(err)
		}
		if got.Tokens == 7 && got.Total().Requests == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v long after the flush was due, want 7 tokens and a request", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failingStore refuses writes while fail is set.
type failingStore struct {
	*MemStore
	mu   sync.Mutex
	fail bool
}

func (s *failingStore) Update(ctx context.Context, key string, c Counters, rev uint64) (uint64, error) {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return 0, errors.New("the store is down")
	}
	return s.MemStore.Update(ctx, key, c, rev)
}

// TestFlushKeepsWhatItCouldNotWrite: usage whose write failed is written
// by the next flush, with what came meanwhile.
func TestFlushKeepsWhatItCouldNotWrite(t *testing.T) {
	store := &failingStore{MemStore: NewMemStore(), fail: true}
	l := NewLimiter(store, "api-1")
	ctx := context.Background()
	settle := func() {
		tk, err := l.Admit(ctx, Tenant{Name: "anonymous"}, Cost{}, time.Now().Add(time.Minute))
		if err == nil {
			err = l.Settle(ctx, tk, Cost{Tokens: 5}, Usage{Route: "r", Model: "m", Requests: 1, PromptTokens: 5})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	settle()
	if err := l.Flush(ctx); err == nil {
		t.Fatal("a flush to a store that is down: no error")
	}
	settle()
	store.mu.Lock()
	store.fail = false
	store.mu.Unlock()
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := l.Today(ctx, "anonymous")
	if got.Tokens != 10 || got.Total().Requests != 2 || got.Total().PromptTokens != 10 {
		t.Errorf("counters %+v, want both requests' 10 tokens", got)
	}
}
