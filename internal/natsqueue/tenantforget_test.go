package natsqueue

import (
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestKeepTenantConsumersForgetsOneClass: a look at one class's stream
// forgets only that class's consumers that are gone. Forgetting the other
// class's, which that stream never lists, cost each of their tenants'
// next jobs a consumer put on the publish path after every look.
func TestKeepTenantConsumersForgetsOneClass(t *testing.T) {
	s := newTestServer(t)
	api := s.dial()
	share := genq.Share{Tenant: "both", Weight: 2}
	for _, class := range []Class{Interactive, Batch} {
		if err := api.ensureTenantConsumer(t.Context(), class, genq.VariantB, share); err != nil {
			t.Fatalf("%s consumer: %v", class, err)
		}
	}
	tests := []struct {
		look, other Class
	}{
		{look: Interactive, other: Batch},
		{look: Batch, other: Interactive},
	}
	for _, tt := range tests {
		if err := api.keepTenantConsumers(t.Context(), tt.look); err != nil {
			t.Fatalf("look at %s: %v", tt.look, err)
		}
		api.tenants.mu.Lock()
		_, kept := api.tenants.weights[TenantConsumerName(tt.other, genq.VariantB, share.Tenant)]
		_, own := api.tenants.weights[TenantConsumerName(tt.look, genq.VariantB, share.Tenant)]
		api.tenants.mu.Unlock()
		if !kept || !own {
			t.Errorf("after a look at %s: %s consumer remembered %v, %s consumer remembered %v; want both (both exist)", tt.look, tt.other, kept, tt.look, own)
		}
	}
}
