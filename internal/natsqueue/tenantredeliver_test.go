package natsqueue

import (
	"context"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/test/localstack"
)

// TestTenantJobServedAgain: a tenant's job delivered and not acked is not
// counted as pending by NATS once it is due again, yet a worker must serve
// it: after its worker died unacked (past the ack wait), or at once after
// a nak.
func TestTenantJobServedAgain(t *testing.T) {
	tests := []struct {
		name   string
		within time.Duration // after the first delivery
		drop   func(t *testing.T, w *Conn, d *Delivery)
	}{
		{"worker dies unacked", 5 * time.Second, func(t *testing.T, w *Conn, _ *Delivery) { w.Close() }},
		{"nak'ed", time.Second, func(t *testing.T, _ *Conn, d *Delivery) {
			if err := d.Release(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t)
			api := s.dial()
			publishAs(t, api, Interactive, genq.Share{Tenant: "again"}, 1, 10, 10)
			first := s.dial()
			d := nextFrom(t, first, 5*time.Second)
			tt.drop(t, first, d)
			start := time.Now()
			again := nextFrom(t, s.dial(), tt.within)
			if again.Job.ID != d.Job.ID || again.Tenant != "again" || again.Job.Attempt != 2 {
				t.Fatalf("got job %s of %q attempt %d; want %s of \"again\" attempt 2", again.Job.ID, again.Tenant, again.Job.Attempt, d.Job.ID)
			}
			t.Logf("served again %s after it was dropped", time.Since(start).Round(10*time.Millisecond))
			ack(t, again)
		})
	}
}

// nextFrom pulls one job with a new puller of w within wait.
func nextFrom(t *testing.T, w *Conn, wait time.Duration) *Delivery {
	t.Helper()
	p, err := w.NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Next(wait)
	if err != nil || d == nil {
		t.Fatalf("pull within %s: %v, %v; want a job", wait, d, err)
	}
	return d
}

// TestTenantJobsOverSlowLink: a worker behind a link of 500 ms each way
// (a listing's round trips take seconds) still sees the tenants waiting
// and serves their jobs.
func TestTenantJobsOverSlowLink(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 20 s of round trips")
	}
	s := newTestServer(t)
	api := s.dial()
	tenants := []string{"slow-a", "slow-b", "slow-c"}
	for _, tenant := range tenants {
		publishAs(t, api, Interactive, genq.Share{Tenant: tenant}, 1, 10, 10)
	}
	_, p := slowLinkPuller(t, s)
	served := map[string]bool{}
	for range tenants {
		d, err := p.Next(20 * time.Second)
		if err != nil || d == nil {
			t.Fatalf("pull over the slow link: %v, %v; served %v of %v", d, err, served, tenants)
		}
		served[d.Tenant] = true
		ack(t, d)
	}
	if len(served) != len(tenants) {
		t.Fatalf("served %v; want each of %v", served, tenants)
	}
}

// TestWaitingOverSlowLink: the jobs waiting behind one, taken together for
// a gathering backend, are heard over a link of 500 ms each way, where a
// no-wait fetch's answer comes after the client stopped listening and its
// jobs would wait out their ack wait.
func TestWaitingOverSlowLink(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 40 s of round trips")
	}
	s := newTestServer(t)
	api := s.dial()
	const jobs = 3
	for range jobs {
		if _, err := api.Publish(t.Context(), testJob()); err != nil {
			t.Fatal(err)
		}
	}
	w, p := slowLinkPuller(t, s)
	d, err := p.Next(20 * time.Second)
	if err != nil || d == nil || d.Source != FromShared {
		t.Fatalf("pull over the slow link: %v, %v; want a job of the shared consumer", d, err)
	}
	if !w.slowLink() {
		t.Fatalf("round trip %s not measured as slow", time.Duration(w.roundTrip.Load()))
	}
	more, err := p.Waiting(d, jobs-1)
	if err != nil || len(more) != jobs-1 {
		t.Fatalf("jobs taken behind one over the slow link: %d, %v; want %d", len(more), err, jobs-1)
	}
	for _, m := range append(more, d) {
		ack(t, m)
	}
}

// slowLinkPuller is a variant B worker's connection to s, through a proxy
// that delays each way by 500 ms, and its puller, with an ack wait of 30 s
// so that no job comes back while the link is slow.
func slowLinkPuller(t *testing.T, s *testServer) (*Conn, *Puller) {
	t.Helper()
	proxy, err := localstack.NewProxy(s.ns.Addr().String(), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	st := DefaultSettings()
	st.AckWait = 30 * time.Second
	start := time.Now()
	w, err := Dial(ctx, ConnectOptions{URL: proxy.URL()}, st, testLog(t), genq.VariantB)
	t.Logf("dialled in %s", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	p, err := w.NewPuller(ctx, genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	return w, p
}
