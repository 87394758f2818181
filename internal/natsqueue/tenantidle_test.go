package natsqueue

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// idleSettings remove a tenant's consumer after a second without pulls.
func idleSettings() Settings {
	st := DefaultSettings()
	st.AckWait = 2 * time.Second
	st.TenantIdle = time.Second
	return st
}

// waitConsumerGone waits until the server has removed consumer name.
func waitConsumerGone(t *testing.T, c *Conn, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.js.Consumer(t.Context(), JobsStream, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s still there 10 s after a threshold of 1 s (%v)", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pullTenantJob pulls one job within 5 s, as a worker does (a Next of
// its poll wait after another), and checks that it is id, of tenant, from
// the tenant's consumer. A consumer the keeper makes again during one
// Next is seen at the next: each looks at the tenants' consumers first.
func pullTenantJob(t *testing.T, p *Puller, id, tenant string) {
	t.Helper()
	var d *Delivery
	var err error
	for deadline := time.Now().Add(5 * time.Second); d == nil && err == nil && time.Now().Before(deadline); {
		d, err = p.Next(500 * time.Millisecond)
	}
	if err != nil || d == nil {
		t.Fatalf("pull: %v, %v; want job %s", d, err, id)
	}
	ack(t, d)
	if d.Job.ID != id || d.Tenant != tenant || d.Source != FromTenant {
		t.Fatalf("pulled %s of %q from %s; want %s of %q from a tenant's consumer", d.Job.ID, d.Tenant, d.Source, id, tenant)
	}
}

// TestTenantConsumerIdle: the server removes a tenant's consumer no worker
// pulled from for TENANT_CONSUMER_IDLE, even while a job waits on it (no
// worker up); the job stays in the stream, and the api's keeper makes the
// consumer again, with the tenant's weight, so a worker gets it. An idle
// consumer goes, and the tenant's next job brings it back.
func TestTenantConsumerIdle(t *testing.T) {
	s := newTestServer(t)
	api := s.dialWith(idleSettings(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	share := genq.Share{Tenant: "idle", Weight: 3}
	name := TenantConsumerName(Interactive, genq.VariantB, share.Tenant)
	weight := func() string {
		cons, err := api.js.Consumer(t.Context(), JobsStream, name)
		if err != nil {
			t.Fatalf("consumer %s: %v", name, err)
		}
		return cons.CachedInfo().Config.Metadata[metaWeight]
	}

	// No worker: the job waits, and its consumer goes all the same.
	job := tenantJob(10, 10)
	if _, err := api.Publish(genq.WithShare(t.Context(), share), job); err != nil {
		t.Fatal(err)
	}
	waitConsumerGone(t, api, name)
	if n, _, err := api.Depths(t.Context(), genq.VariantB); err != nil || n != 1 {
		t.Fatalf("depth %d, %v after the consumer went: want the job kept", n, err)
	}
	go api.KeepTenantConsumers(t.Context())
	worker, err := s.dial().NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	pullTenantJob(t, worker, job.ID, share.Tenant)
	if w := weight(); w != "3" {
		t.Fatalf("the consumer made again weighs %q, want the tenant's 3", w)
	}

	// Idle: it goes; the next job brings it back, whether the keeper has
	// seen it go yet or not.
	waitConsumerGone(t, api, name)
	next := tenantJob(10, 10)
	if _, err := api.Publish(genq.WithShare(t.Context(), share), next); err != nil {
		t.Fatal(err)
	}
	pullTenantJob(t, worker, next.ID, share.Tenant)
}
