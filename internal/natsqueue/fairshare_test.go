package natsqueue

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// simTenant is a tenant of a simulated queue: its jobs' cost, its weight,
// and how many jobs it has waiting (-1: never runs out).
type simTenant struct {
	name    string
	weight  float64
	cost    int64
	waiting int
}

// simulate serves picks jobs one at a time by fair share, as a worker of
// one slot would, and returns the tokens served to each tenant.
func simulate(tenants []simTenant, picks int) map[string]int64 {
	f := newFairShare()
	served := map[string]int64{}
	left := map[string]int{}
	for _, t := range tenants {
		left[t.name] = t.waiting
	}
	for range picks {
		var cs []candidate
		byName := map[string]simTenant{}
		for _, t := range tenants {
			if left[t.name] != 0 {
				cs = append(cs, candidate{tenant: t.name})
				byName[t.name] = t
			}
		}
		if len(cs) == 0 {
			break
		}
		t := byName[f.order(cs)[0].tenant]
		f.charge(t.name, t.weight, t.cost)
		served[t.name] += t.cost
		left[t.name]--
	}
	return served
}

func TestFairShareByTokens(t *testing.T) {
	tests := []struct {
		name    string
		tenants []simTenant
		picks   int
		// want is each tenant's share of the tokens served.
		want map[string]float64
	}{
		{"equal weights, equal jobs", []simTenant{{"a", 1, 100, -1}, {"b", 1, 100, -1}}, 1000,
			map[string]float64{"a": 0.5, "b": 0.5}},
		{"long prompts do not crowd out short ones", []simTenant{{"long", 1, 2000, -1}, {"short", 1, 150, -1}}, 2000,
			map[string]float64{"long": 0.5, "short": 0.5}},
		{"weights 1:3", []simTenant{{"a", 1, 300, -1}, {"b", 3, 300, -1}}, 2000,
			map[string]float64{"a": 0.25, "b": 0.75}},
		{"weights 1:3, costs 5:1", []simTenant{{"a", 1, 500, -1}, {"b", 3, 100, -1}}, 4000,
			map[string]float64{"a": 0.25, "b": 0.75}},
		{"a tenant alone gets everything", []simTenant{{"a", 1, 100, -1}}, 100,
			map[string]float64{"a": 1}},
		{"three tenants 1:1:2", []simTenant{{"a", 1, 100, -1}, {"b", 1, 700, -1}, {"c", 2, 300, -1}}, 4000,
			map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5}},
		{"what one leaves goes to the other", []simTenant{{"a", 1, 100, 10}, {"b", 1, 100, -1}}, 100,
			map[string]float64{"a": 0.1, "b": 0.9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served := simulate(tt.tenants, tt.picks)
			var total int64
			for _, n := range served {
				total += n
			}
			for name, want := range tt.want {
				got := float64(served[name]) / float64(total)
				if math.Abs(got-want) > 0.02 {
					t.Errorf("%s got %.3f of %d tokens, want %.3f (served %v)", name, got, total, want, served)
				}
			}
		})
	}
}

// A tenant that waited for nothing for a while banks no credit: when it
// comes back, it shares with the tenant that kept the worker busy, rather
// than taking every turn until it has caught up.
func TestFairShareBanksNoCredit(t *testing.T) {
	f := newFairShare()
	for range 100 { // a alone
		f.order([]candidate{{tenant: "a"}})
		f.charge("a", 1, 100)
	}
	var got []string
	for range 6 {
		first := f.order([]candidate{{tenant: "a"}, {tenant: "b"}})[0].tenant
		f.charge(first, 1, 100)
		got = append(got, first)
	}
	if fmt.Sprint(got) != "[b a b a b a]" {
		t.Fatalf("turns after b came back: %v, want them alternating", got)
	}
}

// Slots that free together pick one after the other before any pull is
// charged: each pick reserves its tenant's turn, so eight picks at 3:1
// weights, the heavy tenant's jobs 2.5 times as costly, split about as
// the tokens should, where eight looks at one order took the first tenant
// eight times.
func TestFairSharePicksTogether(t *testing.T) {
	f := newFairShare()
	heavy := candidate{tenant: "heavy", queue: &tenantQueue{weight: 1}}
	light := candidate{tenant: "light3", queue: &tenantQueue{weight: 3}}
	cs := []candidate{heavy, light}
	cost := map[string]int64{"heavy": 180, "light3": 72}
	// A while of picks settled one at a time: each tenant's cost is known.
	for range 40 {
		c, guess, ok := f.pick(cs, nil)
		if !ok {
			t.Fatal("no pick")
		}
		f.chargeReserved(c.tenant, c.weight(), guess, cost[c.tenant])
	}
	// Eight slots free at once: eight picks before any pull is charged.
	n := map[string]int{}
	for range 8 {
		c, _, ok := f.pick(cs, nil)
		if !ok {
			t.Fatal("no pick")
		}
		n[c.tenant]++
	}
	// 8 picks of 3:1 by tokens: heavy's 180 against light3's 72/3 = 24 a
	// job, so about one heavy job to seven of light3's.
	if n["heavy"] > 2 || n["light3"] < 6 {
		t.Fatalf("eight picks together took heavy %d times and light3 %d, want about 1 and 7", n["heavy"], n["light3"])
	}
	// A pull that finds nothing gives its guess back.
	before := f.served["heavy"]
	c, guess, _ := f.pick([]candidate{heavy}, nil)
	f.release(c.tenant, c.weight(), guess)
	if f.served["heavy"] != before {
		t.Fatalf("a released pick left heavy's virtual time at %v, want %v", f.served["heavy"], before)
	}
	// Tried candidates are passed over.
	if c, _, ok := f.pick(cs, map[string]bool{"heavy": true, "light3": true}); ok {
		t.Fatalf("picked %s among candidates all tried", c.tenant)
	}
}

// A job charged its estimate and settled with its real cost counts as the
// real cost: a tenant whose answers stop short gets the turns it is owed.
func TestFairShareSettles(t *testing.T) {
	f := newFairShare()
	f.order([]candidate{{tenant: "a"}, {tenant: "b"}})
	f.charge("a", 1, 1000)
	f.settle("a", 1, 1000, 100)
	f.charge("b", 1, 500)
	if first := f.order([]candidate{{tenant: "a"}, {tenant: "b"}})[0].tenant; first != "a" {
		t.Fatalf("after a's job took 100 tokens and b's 500, %s goes first, want a", first)
	}
}

// A ring wakes every slot waiting for the bell, and one that took the
// bell before a ring that came during its looks does not wait at all.
func TestBellWakesEveryWaiter(t *testing.T) {
	b := newBell()
	rung := b.rung()
	woke := make(chan struct{}, 3)
	for range 3 {
		go func() { waitRing(time.Hour, [2]<-chan struct{}{rung, nil}); woke <- struct{}{} }()
	}
	b.ring()
	for range 3 {
		<-woke // an hour's wait would end the test by its timeout
	}
	late := b.rung()
	b.ring() // during the looks, before the wait
	waitRing(time.Hour, [2]<-chan struct{}{nil, late})
}

// A job's cost counts its request's text and its answer's bound, not its
// envelope: two jobs that differ only in their reply subject cost alike.
func TestJobCost(t *testing.T) {
	chat := func(content, replyTo string, maxTokens int) genq.Job {
		j := genq.Job{Envelope: genq.Envelope{ID: "0193f1c2-0000-7000-8000-000000000000", Variant: genq.VariantB, ReplyTo: replyTo}}
		j.Messages = []genq.Message{{Role: "user", Content: content}}
		j.MaxTokens = maxTokens
		return j
	}
	cost := func(j genq.Job, maxTokens int) int64 {
		data, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		return JobCost(j, len(data), maxTokens)
	}
	tests := []struct {
		name   string
		job    genq.Job
		maxTok int
		min    int64
		max    int64
	}{
		{"short prompt, 16 tokens", chat("hi", "_INBOX.a.b", 16), 256, 16, 16 + 16},
		{"400-byte prompt, 16 tokens", chat(strings.Repeat("x", 400), "_INBOX.a.b", 16), 256, 16 + 100, 16 + 100 + 16},
		{"no bound: the workers'", chat("hi", "", 0), 256, 256, 256 + 16},
		{"a long reply subject costs nothing", chat("hi", "_INBOX."+strings.Repeat("r", 400), 16), 256, 16, 16 + 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cost(tt.job, tt.maxTok); got < tt.min || got > tt.max {
				t.Fatalf("cost %d, want %d to %d", got, tt.min, tt.max)
			}
		})
	}
}

// A ring counts its tenant's job in the worker's view at once; a tenant
// the view does not hold yet has the consumers listed at the next look.
func TestRingCountsTheTenantsJob(t *testing.T) {
	q := newTenantQueues(nil, Interactive, genq.VariantB, nil, newHeadroom())
	known := &tenantQueue{tenant: "a"}
	q.queues[TenantConsumerName(Interactive, genq.VariantB, "a")] = known
	q.listed = time.Now()
	q.rang("a")
	q.rang("a")
	q.rang("")
	if known.pending != 2 || q.listed.IsZero() {
		t.Fatalf("after two rings of a and one of no tenant: pending %d, listing due %t; want 2, false", known.pending, q.listed.IsZero())
	}
	q.rang("b")
	if !q.listed.IsZero() {
		t.Fatal("a ring of a tenant not in the view left the listing as it was")
	}
}

// A tenant's job taken from a worker's own subject, or stolen, is charged
// at its tenant consumer's weight when this worker listed one, else at
// the weight the job's Genq-Weight says: a tenant whose jobs all came
// routed has no consumer here, and was charged as of weight 1.
func TestChargeWeightOfARoutedJob(t *testing.T) {
	tq := newTenantQueues(nil, Interactive, "B", nil, newHeadroom())
	tq.queues[TenantConsumerName(Interactive, "B", "listed")] = &tenantQueue{tenant: "listed", weight: 2}
	for _, tc := range []struct {
		tenant string
		said   float64
		want   float64 // virtual time after 600 tokens
	}{
		{"listed", 3, 300}, // the consumer's weight
		{"routed", 3, 200}, // the job's header
		{"unsaid", 0, 600}, // neither: weight 1
	} {
		tq.charge(&Delivery{Tenant: tc.tenant, Weight: tc.said, Cost: 600}, 0)
		if got := tq.share.served[tc.tenant]; got != tc.want {
			t.Errorf("%s (header weight %g): charged %g, want %g", tc.tenant, tc.said, got, tc.want)
		}
	}
}
