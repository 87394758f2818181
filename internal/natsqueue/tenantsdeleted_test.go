package natsqueue

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/tenant"
)

// TestTenantStoreDeletedRecord: a record whose last message is a KV delete
// or purge marker (an operator's nats kv del or purge) reads as zero at
// the marker's revision, so the next swap and the limiter's admission
// write over it instead of conflicting on every try.
func TestTenantStoreDeletedRecord(t *testing.T) {
	ctx := context.Background()
	store, err := tenantConn(t).TenantStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		tenant string
		remove func(jetstream.KeyValue, string) error
	}{
		{"delete", "del", func(kv jetstream.KeyValue, key string) error { return kv.Delete(ctx, key) }},
		{"purge", "purge", func(kv jetstream.KeyValue, key string) error { return kv.Purge(ctx, key) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			day := time.Now().UTC().Format(time.DateOnly)
			key := tenant.CounterKey(tt.tenant, day)
			if _, err := store.Update(ctx, key, tenant.Counters{Tokens: 5}, 0); err != nil {
				t.Fatal(err)
			}
			if err := tt.remove(store.kv, key); err != nil {
				t.Fatal(err)
			}
			c, rev, err := store.Get(ctx, key)
			if err != nil || c.Tokens != 0 || rev == 0 {
				t.Fatalf("after a %s: %+v at revision %d, %v; want zero at the marker's revision", tt.name, c, rev, err)
			}
			if _, err := store.Update(ctx, key, tenant.Counters{Tokens: 1}, rev); err != nil {
				t.Fatalf("swap at the marker's revision %d: %v", rev, err)
			}
			l := tenant.NewLimiter(store, "api-1")
			a := tenant.Tenant{Name: tt.tenant, Limits: tenant.Limits{TPD: 1 << 40}}
			if err := tt.remove(store.kv, key); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Admit(ctx, a, tenant.Cost{Tokens: 3}, time.Now().Add(time.Minute)); err != nil {
				t.Fatalf("admission after a %s: %v", tt.name, err)
			}
		})
	}
}
