package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// tenantConsumers remembers the tenants' consumers this producer made, and
// the weight it wrote on each, so that a tenant's job costs a round trip
// more only the first time, or when its weight changed.
type tenantConsumers struct {
	mu      sync.Mutex
	weights map[string]madeConsumer // by consumer name
	// putting holds, for a consumer being put, a channel closed once done.
	putting map[string]chan struct{}
}

// madeConsumer is a tenant's consumer this producer made: its class, so
// that a look at one class's stream forgets only that class's, and the
// weight it wrote.
type madeConsumer struct {
	class  Class
	weight float64
}

// shareMsg makes msg, a job of class c, one of share's tenant: it goes to
// the tenant's subject, unless subject names a worker (routing by prefix),
// and it says its tenant and cost in headers. The tenant's consumer is
// made first, so the workers find the job once they list the consumers.
func (c *Conn) shareMsg(ctx context.Context, msg *nats.Msg, job genq.Job, class Class, routed bool, share genq.Share) error {
	msg.Header.Set(HeaderTenant, share.Tenant)
	msg.Header.Set(HeaderCost, strconv.FormatInt(JobCost(job, len(msg.Data), share.MaxTokens), 10))
	msg.Header.Set(HeaderWeight, strconv.FormatFloat(share.WeightOrOne(), 'g', -1, 64))
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
	weight := share.WeightOrOne()
	for {
		c.tenants.mu.Lock()
		if m, ok := c.tenants.weights[name]; ok && m.weight == weight {
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
			c.tenants.weights, c.tenants.putting = map[string]madeConsumer{}, map[string]chan struct{}{}
		}
		putting := make(chan struct{})
		c.tenants.putting[name] = putting
		c.tenants.mu.Unlock()

		err := c.putTenantConsumer(ctx, class, v, share.Tenant, weight)
		c.tenants.mu.Lock()
		delete(c.tenants.putting, name)
		close(putting)
		if err == nil {
			c.tenants.weights[name] = madeConsumer{class: class, weight: weight}
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
		cfg.InactiveThreshold = s.TenantIdle
		return s.putConsumer(ctx, c.js, class.Stream(), cfg)
	})
}

// weightOr1 is a share's weight, 1 when unset.
func weightOr1(w float64) float64 { return genq.Share{Weight: w}.WeightOrOne() }

// KeepTenantConsumers looks, until ctx ends, at every tenant's subject
// with jobs in the streams and makes again the consumer of any that has
// none: the server removes a consumer no worker pulled from for
// TenantIdle even while jobs wait on it (no worker up, or a job queued as
// its consumer expired, which this producer still believed there). It
// also forgets the consumers it made that are gone, so that a tenant's
// next job makes its consumer before it is queued. Every api runs it; a
// job is never lost meanwhile (the stream keeps it), only late by at most
// one look. With TenantIdle 0 consumers are never removed and it returns.
func (c *Conn) KeepTenantConsumers(ctx context.Context) {
	idle := c.Settings().TenantIdle
	if idle <= 0 {
		return
	}
	every := min(tenantKeepEvery, max(idle/4, 100*time.Millisecond))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		for _, class := range []Class{Interactive, Batch} {
			lctx, cancel := context.WithTimeout(ctx, tenantLook)
			if err := c.keepTenantConsumers(lctx, class); err != nil && ctx.Err() == nil {
				c.log.Debug("could not look at the tenants' consumers", "class", class, "err", err)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// tenantKeepEvery bounds how long a tenant's job may wait on a subject
// whose consumer the server removed.
const tenantKeepEvery = 30 * time.Second

// keepTenantConsumers is one look at class's tenants' subjects and
// consumers, of every variant.
func (c *Conn) keepTenantConsumers(ctx context.Context, class Class) error {
	stream, err := c.js.Stream(ctx, class.Stream())
	if err != nil {
		return fmt.Errorf("bind stream %s: %w", class.Stream(), err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(tenantSubjects(class, "*")))
	if err != nil {
		return fmt.Errorf("read the tenants' subjects of %s: %w", class.Stream(), err)
	}
	names := map[string]bool{}
	lister := stream.ConsumerNames(ctx)
	for name := range lister.Name() {
		names[name] = true
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", class.Stream(), err)
	}
	c.forgetTenantConsumers(class, names)
	for subject, n := range info.State.Subjects {
		if n == 0 {
			continue
		}
		if err := c.remakeTenantConsumer(ctx, stream, class, subject, names); err != nil {
			return err
		}
	}
	return nil
}

// forgetTenantConsumers forgets the consumers of class this producer made
// that are no longer among names, its stream's. The other class's are on
// another stream, not listed there.
func (c *Conn) forgetTenantConsumers(class Class, names map[string]bool) {
	c.tenants.mu.Lock()
	defer c.tenants.mu.Unlock()
	for name, m := range c.tenants.weights {
		if m.class == class && !names[name] {
			delete(c.tenants.weights, name)
		}
	}
}

// remakeTenantConsumer makes the consumer of a tenant's subject that has
// jobs, if it is not among names, with the tenant and weight its latest
// job's headers say.
func (c *Conn) remakeTenantConsumer(ctx context.Context, stream jetstream.Stream, class Class, subject string, names map[string]bool) error {
	v, token, ok := parseTenantSubject(subject)
	if !ok || names[tenantConsumerPrefix(class, v)+token] {
		return nil
	}
	msg, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // taken meanwhile
	}
	if err != nil {
		return fmt.Errorf("read the latest job of %s: %w", subject, err)
	}
	share := genq.Share{Tenant: msg.Header.Get(HeaderTenant)}
	share.Weight, _ = strconv.ParseFloat(msg.Header.Get(HeaderWeight), 64)
	if share.Tenant == "" || TenantSubject(class, v, share.Tenant) != subject {
		return nil // not a tenant's job as genq queues them
	}
	if err := c.ensureTenantConsumer(ctx, class, v, share); err != nil {
		return err
	}
	c.log.Info("made again the consumer of a tenant whose jobs were waiting without one", "tenant", share.Tenant, "class", class, "variant", v)
	return nil
}
