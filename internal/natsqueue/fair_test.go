package natsqueue

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/genq/genq/internal/genq"
)

// tenantJob is a job of the given prompt length in bytes and answer bound.
func tenantJob(promptBytes, maxTokens int) genq.Job {
	j := testJob()
	j.Text = strings.Repeat("x", promptBytes)
	j.MaxTokens = maxTokens
	return j
}

// publishAs queues n jobs of one tenant through c, as an api does for a
// request of that tenant.
func publishAs(t *testing.T, c *Conn, class Class, share genq.Share, n, promptBytes, maxTokens int) {
	t.Helper()
	ctx := genq.WithShare(t.Context(), share)
	for range n {
		if _, err := c.Publish(ctx, tenantJob(promptBytes, maxTokens), WithClass(class)); err != nil {
			t.Fatal(err)
		}
	}
}

// serveWhileBothWait pulls with the workers' pullers in turn, one job at a
// time (each a worker of one slot whose backend costs what the job's
// header says), acks each, and counts the tokens served to each tenant
// until one of them has no job left: the share while both wait.
func serveWhileBothWait(t *testing.T, workers []*Puller, class Class, queued map[string]int) map[string]int64 {
	t.Helper()
	served := map[string]int64{}
	for i := 0; ; i++ {
		d, err := workers[i%len(workers)].Next(2 * time.Second)
		if err != nil || d == nil {
			t.Fatalf("pull %d: %v, %v", i, d, err)
		}
		if d.Source != FromTenant || d.Class != class {
			t.Fatalf("pulled a %s job from %s, want a %s one from a tenant's consumer", d.Class, d.Source, class)
		}
		ack(t, d)
		served[d.Tenant] += d.Cost
		if queued[d.Tenant]--; queued[d.Tenant] == 0 {
			return served
		}
	}
}

// TestFairShareOverNATS: two tenants with jobs waiting in both classes,
// one with 10 times the other's jobs, each four times as long: over a real
// nats-server, the workers serve them tokens in proportion to their
// weights while both wait, whether one worker pulls or two (each with
// its own fair share, on its own connection), and whether one api or
// two published.
func TestFairShareOverNATS(t *testing.T) {
	tests := []struct {
		name           string
		class          Class
		heavy, light   float64 // weights
		workers, apis  int
		wantLightShare float64
	}{
		{"interactive, equal weights", Interactive, 1, 1, 1, 1, 0.5},
		{"batch, equal weights", Batch, 1, 1, 1, 1, 0.5},
		{"interactive, weights 1:3", Interactive, 1, 3, 1, 1, 0.75},
		{"interactive, two apis and two workers", Interactive, 1, 1, 2, 2, 0.5},
		{"batch, weights 1:3, two apis and two workers", Batch, 1, 3, 2, 2, 0.75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t)
			var apis []*Conn
			for range tt.apis {
				apis = append(apis, s.dial())
			}
			suffix := uuid.NewString()[:8]
			heavy := genq.Share{Tenant: "heavy-" + suffix, Weight: tt.heavy}
			light := genq.Share{Tenant: "light-" + suffix, Weight: tt.light}
			// The light tenant's jobs are short (100 bytes of prompt, 50
			// tokens of answer: 75 tokens), the heavy one's long (400
			// bytes, 200 tokens: 300), and it queues 10 times as many.
			publishAs(t, apis[0], tt.class, light, 80, 100, 50)
			for i := range 800 {
				publishAs(t, apis[i%len(apis)], tt.class, heavy, 1, 400, 200)
			}
			var workers []*Puller
			for range tt.workers {
				p, err := s.dial().NewPuller(t.Context(), genq.VariantB)
				if err != nil {
					t.Fatal(err)
				}
				workers = append(workers, p)
			}
			served := serveWhileBothWait(t, workers, tt.class, map[string]int{heavy.Tenant: 800, light.Tenant: 80})
			got := float64(served[light.Tenant]) / float64(served[light.Tenant]+served[heavy.Tenant])
			t.Logf("tokens served while both waited: light %d, heavy %d: light's share %.3f", served[light.Tenant], served[heavy.Tenant], got)
			if math.Abs(got-tt.wantLightShare) > 0.1*tt.wantLightShare {
				t.Fatalf("light tenant's share of the tokens %.3f, want %.3f within 10%%", got, tt.wantLightShare)
			}
		})
	}
}

// A job of no tenant, from an old producer on the shared subject, is still
// served while tenants' jobs wait: the shared consumer takes its turn.
func TestFairShareServesTheSharedSubject(t *testing.T) {
	s := newTestServer(t)
	c := s.dial()
	publishAs(t, c, Interactive, genq.Share{Tenant: "busy"}, 20, 100, 50)
	old := testJob()
	if _, err := c.Publish(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if n, _, err := c.Depths(t.Context(), genq.VariantB); err != nil || n != 21 {
		t.Fatalf("depth %d, %v: want 21, the tenant's jobs counted with the shared subject's", n, err)
	}
	p, err := c.NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for range 21 {
		d, err := p.Next(2 * time.Second)
		if err != nil || d == nil {
			t.Fatalf("pull: %v, %v", d, err)
		}
		ack(t, d)
		order = append(order, fmt.Sprintf("%s/%s", d.Source, d.Tenant))
		if d.Job.ID == old.ID {
			if len(order) > 2 {
				t.Fatalf("the shared subject's job came %dth: %v", len(order), order)
			}
			return
		}
	}
	t.Fatalf("the shared subject's job never came: %v", order)
}

// A tenant's job is never routed by prefix, so it cannot skip its turn; a
// job of no tenant still is.
func TestTenantsJobsAreNotRouted(t *testing.T) {
	hbs := &heartbeats{}
	hbs.set(routedBeat("w1", 4), routedBeat("w2", 4))
	cl := &Client{router: NewRouter(hbs)}
	tests := []struct {
		name   string
		ctx    context.Context
		routed bool
	}{
		{"no tenant", context.Background(), true},
		{"a tenant's", genq.WithShare(context.Background(), genq.Share{Tenant: "team-a"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject, done := cl.subjectOf(tt.ctx, chatJob(1))
			defer done()
			if (subject != "") != tt.routed {
				t.Fatalf("subject %q, want routed %t", subject, tt.routed)
			}
		})
	}
}

// A tenant's first burst of jobs, published at once, all wait for its
// consumer and are queued, and a weight changed on its keys reaches the
// consumer the workers read.
func TestTenantConsumerBurstAndReweigh(t *testing.T) {
	s := newTestServer(t)
	c := s.dial()
	ctx := genq.WithShare(t.Context(), genq.Share{Tenant: "burst", Weight: 2})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := c.Publish(ctx, tenantJob(10, 10)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	weight := func() string {
		cons, err := c.js.Consumer(t.Context(), JobsStream, TenantConsumerName(Interactive, genq.VariantB, "burst"))
		if err != nil {
			t.Fatal(err)
		}
		return cons.CachedInfo().Config.Metadata[metaWeight]
	}
	if w := weight(); w != "2" {
		t.Fatalf("weight %q, want 2", w)
	}
	if n, _, err := c.Depths(t.Context(), genq.VariantB); err != nil || n != 50 {
		t.Fatalf("depth %d, %v: want the 50 jobs", n, err)
	}
	publishAs(t, c, Interactive, genq.Share{Tenant: "burst", Weight: 5}, 1, 10, 10)
	if w := weight(); w != "5" {
		t.Fatalf("weight %q after the keys changed it, want 5", w)
	}
}

// Over a real nats-server: a worker of two slots whose other slot holds a
// heavy tenant's job keeps its last free slot for the light tenant it saw
// lately, though the heavy one has jobs waiting, and the light tenant's
// next job takes it at once; the heavy one gets the slot back once it
// holds none.
func TestHeadroomOverNATS(t *testing.T) {
	s := newTestServer(t)
	c := s.dial()
	p, err := c.NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	p.KeepHeadroom(2, 1, time.Minute)
	suffix := uuid.NewString()[:8]
	light := genq.Share{Tenant: "light-" + suffix, Weight: 1}
	heavy := genq.Share{Tenant: "heavy-" + suffix, Weight: 1}
	pull := func(wait time.Duration, want string) *Delivery {
		t.Helper()
		d, err := p.Next(wait)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && d != nil:
			t.Fatalf("pulled a job of %q, want none: the slot kept for the light tenant", d.Tenant)
		case want != "" && (d == nil || d.Tenant != want):
			t.Fatalf("pulled %v, want a job of %s", d, want)
		}
		return d
	}
	publishAs(t, c, Interactive, light, 1, 100, 50)
	d := pull(2*time.Second, light.Tenant)
	ack(t, d)
	p.Settled(d)

	publishAs(t, c, Interactive, heavy, 5, 400, 200)
	first := pull(2*time.Second, heavy.Tenant)
	pull(300*time.Millisecond, "")
	publishAs(t, c, Interactive, light, 1, 100, 50)
	d = pull(2*time.Second, light.Tenant)
	ack(t, d)
	p.Settled(d)

	ack(t, first)
	p.Settled(first)
	second := pull(2*time.Second, heavy.Tenant)
	pull(300*time.Millisecond, "")
	ack(t, second)
}
