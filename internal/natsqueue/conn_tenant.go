package natsqueue

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// tenantConsumers remembers the tenants' consumers this producer made, and
// the weight it wrote on each, so that a tenant's job costs a round trip
// more only the first time, or when its weight changed.
type tenantConsumers struct {
	mu      sync.Mutex
	weights map[string]float64 // by consumer name
	// putting holds, for a consumer being put, a channel closed once done.
	putting map[string]chan struct{}
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
	// Bounded as a publish is: NATS away is the caller's 503 then, not a
	// wait to its deadline.
	ctx, cancel := context.WithTimeout(ctx, publishGiveUp)
	defer cancel()
	if err := c.ensureTenantConsumer(ctx, class, job.Variant, share); err != nil {
		return genq.WrapError(genq.Unavailable, err, "the queue is unavailable")
	}
	msg.Subject = TenantSubject(class, job.Variant, share.Tenant)
	return nil
}

// ensureTenantConsumer creates, or updates to the share's weight, the
// consumer of the tenant's subject: the shared consumer's settings, with
// the tenant and its weight in its metadata. One put at a time per
// consumer: a tenant's first burst of jobs waits for it rather than
// sending as many puts, and other tenants' jobs do not wait at all.
func (c *Conn) ensureTenantConsumer(ctx context.Context, class Class, v genq.Variant, share genq.Share) error {
	name := TenantConsumerName(class, v, share.Tenant)
	weight := share.Weight
	if weight <= 0 {
		weight = 1
	}
	for {
		c.tenants.mu.Lock()
		if w, ok := c.tenants.weights[name]; ok && w == weight {
			c.tenants.mu.Unlock()
			return nil
		}
		if putting, ok := c.tenants.putting[name]; ok {
			c.tenants.mu.Unlock()
			select {
			case <-putting:
				continue
			case <-ctx.Done():
				return fmt.Errorf("wait for consumer %s: %w", name, ctx.Err())
			}
		}
		if c.tenants.weights == nil {
			c.tenants.weights, c.tenants.putting = map[string]float64{}, map[string]chan struct{}{}
		}
		putting := make(chan struct{})
		c.tenants.putting[name] = putting
		c.tenants.mu.Unlock()

		err := c.putTenantConsumer(ctx, class, v, share.Tenant, weight)
		c.tenants.mu.Lock()
		delete(c.tenants.putting, name)
		close(putting)
		if err == nil {
			c.tenants.weights[name] = weight
		}
		c.tenants.mu.Unlock()
		return err
	}
}

func (c *Conn) putTenantConsumer(ctx context.Context, class Class, v genq.Variant, tenant string, weight float64) error {
	name := TenantConsumerName(class, v, tenant)
	s := c.Settings()
	return ensureAsset(ctx, "consumer "+name, func(ctx context.Context) error {
		cfg := s.jobConsumer(name, fmt.Sprintf("workers of variant %s, %s jobs of tenant %s", v, class, tenant), TenantSubject(class, v, tenant))
		cfg.Metadata = map[string]string{metaTenant: tenant, metaWeight: strconv.FormatFloat(weight, 'g', -1, 64)}
		return s.putConsumer(ctx, c.js, class.Stream(), cfg)
	})
}
