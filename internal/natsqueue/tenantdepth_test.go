package natsqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// TestTenantQueues: each tenant's consumer says its jobs waiting and, once
// a worker has taken one and not yet finished it, running, per class.
func TestTenantQueues(t *testing.T) {
	s := newTestServer(t)
	api := s.dial()
	publishAs(t, api, Interactive, genq.Share{Tenant: "a"}, 3, 10, 10)
	publishAs(t, api, Batch, genq.Share{Tenant: "b", Weight: 2}, 2, 10, 10)
	worker, err := s.dial().NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	d, err := worker.Next(2 * time.Second)
	if err != nil || d == nil || d.Tenant != "a" {
		t.Fatalf("pull: %+v, %v; want one of tenant a's jobs", d, err)
	}
	got, err := api.TenantQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y genq.TenantQueue) int { return strings.Compare(x.Tenant, y.Tenant) })
	want := []genq.TenantQueue{
		{Tenant: "a", Queue: genq.VariantB, Class: "interactive", Waiting: 2, Running: 1},
		{Tenant: "b", Queue: genq.VariantB, Class: "batch", Waiting: 2, Running: 0},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tenants' queues %+v, want %+v", got, want)
	}
	ack(t, d)
	got, err = api.TenantQueues(t.Context())
	if err != nil || len(got) != 2 || got[0].Tenant != "a" && got[1].Tenant != "a" {
		t.Fatalf("%+v, %v", got, err)
	}
	for _, q := range got {
		if q.Tenant == "a" && (q.Waiting != 2 || q.Running != 0) {
			t.Fatalf("tenant a after its job was done: %+v, want 2 waiting and none running", q)
		}
	}
}

// BenchmarkTenantQueues reads 200 tenants' consumers, one job waiting on
// each: what one GET /queue costs (KEDA polls it every 5 s per
// ScaledObject), and the queue view each second.
func BenchmarkTenantQueues(b *testing.B) {
	api := tenantConn(b)
	for i := range 200 {
		ctx := genq.WithShare(b.Context(), genq.Share{Tenant: fmt.Sprintf("t%03d", i)})
		if _, err := api.Publish(ctx, tenantJob(10, 10)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		qs, err := api.TenantQueues(b.Context())
		if err != nil || len(qs) != 200 {
			b.Fatalf("%d lines, %v", len(qs), err)
		}
	}
}

// TestDeliverySaysItsShare: a tenant's job reaches the worker with its
// tenant and weight, which the text backend shares its steps by.
func TestDeliverySaysItsShare(t *testing.T) {
	s := newTestServer(t)
	publishAs(t, s.dial(), Interactive, genq.Share{Tenant: "w", Weight: 2.5}, 1, 10, 10)
	worker, err := s.dial().NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	d, err := worker.Next(2 * time.Second)
	if err != nil || d == nil {
		t.Fatalf("pull: %+v, %v; want tenant w's job", d, err)
	}
	ack(t, d)
	if d.Tenant != "w" || d.Weight != 2.5 {
		t.Fatalf("the job says tenant %q of weight %v, want w of 2.5", d.Tenant, d.Weight)
	}
}
