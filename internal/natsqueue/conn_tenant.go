package natsqueue

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// tenantConsumers remembers the tenants' consumers this producer made, and
// the weight it wrote on each, so that a tenant's job costs a round trip
// more only the first time, or when its weight changed.
type tenantConsumers struct {
	mu      sync.Mutex
	weights map[string]float64 // by consumer name
}

// shareMsg makes msg, a job of class c, one of share's tenant: it goes to
// the tenant's subject, unless subject names a worker (routing by prefix),
// and it says its tenant and cost in headers. The tenant's consumer is
// made first, so the workers find the job once they list the consumers.
func (c *Conn) shareMsg(ctx context.Context, msg *nats.Msg, job genq.Job, class Class, routed bool, share genq.Share) error {
	msg.Header.Set(HeaderTenant, share.Tenant)
	msg.Header.Set(HeaderCost, strconv.FormatInt(JobCost(job, len(msg.Data), share.MaxTokens), 10))
	if routed {
		return nil
	}
	if err := c.ensureTenantConsumer(ctx, class, job.Variant, share); err != nil {
		return genq.WrapError(genq.Unavailable, err, "the queue is unavailable")
	}
	msg.Subject = TenantSubject(class, job.Variant, share.Tenant)
	return nil
}

// ensureTenantConsumer creates, or updates to the share's weight, the
// consumer of the tenant's subject: the shared consumer's settings, with
// the tenant and its weight in its metadata.
func (c *Conn) ensureTenantConsumer(ctx context.Context, class Class, v genq.Variant, share genq.Share) error {
	name := TenantConsumerName(class, v, share.Tenant)
	weight := share.Weight
	if weight <= 0 {
		weight = 1
	}
	c.tenants.mu.Lock()
	defer c.tenants.mu.Unlock()
	if w, ok := c.tenants.weights[name]; ok && w == weight {
		return nil
	}
	s := c.Settings()
	err := ensureAsset(ctx, "consumer "+name, func(ctx context.Context) error {
		return s.putConsumer(ctx, c.js, class.Stream(), jetstream.ConsumerConfig{
			Durable:       name,
			Description:   fmt.Sprintf("workers of variant %s, %s jobs of tenant %s", v, class, share.Tenant),
			FilterSubject: TenantSubject(class, v, share.Tenant),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       s.AckWait,
			MaxDeliver:    maxDeliver(s.MaxAttempts),
			MaxAckPending: -1,
			MaxWaiting:    4096,
			Metadata:      map[string]string{metaTenant: share.Tenant, metaWeight: strconv.FormatFloat(weight, 'g', -1, 64)},
		})
	})
	if err != nil {
		return err
	}
	if c.tenants.weights == nil {
		c.tenants.weights = map[string]float64{}
	}
	c.tenants.weights[name] = weight
	return nil
}
