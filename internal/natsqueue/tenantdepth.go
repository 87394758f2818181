package natsqueue

import (
	"context"
	"fmt"

	"github.com/genq/genq/internal/genq"
)

// TenantQueues are every tenant's jobs on every queue, one line per
// tenant's consumer: its pending jobs are waiting, its jobs delivered and
// not yet acknowledged are running. It reads what the workers read to
// choose (CONSUMER.LIST), so a tenant made at runtime shows from its
// first job on.
func (c *Conn) TenantQueues(ctx context.Context) ([]genq.TenantQueue, error) {
	var out []genq.TenantQueue
	for _, class := range []Class{Interactive, Batch} {
		stream, err := c.js.Stream(ctx, class.Stream())
		if err != nil {
			return nil, genq.WrapError(genq.Unavailable, fmt.Errorf("bind stream %s: %w", class.Stream(), err), "the queue is unavailable")
		}
		lister := stream.ListConsumers(ctx)
		for info := range lister.Info() {
			tenant, ok := info.Config.Metadata[metaTenant]
			v, _, isTenants := parseTenantSubject(info.Config.FilterSubject)
			if !ok || !isTenants {
				continue
			}
			out = append(out, genq.TenantQueue{Tenant: tenant, Queue: v, Class: class.String(),
				Waiting: info.NumPending, Running: uint64(max(info.NumAckPending, 0))})
		}
		if err := lister.Err(); err != nil {
			return nil, genq.WrapError(genq.Unavailable, fmt.Errorf("list consumers of %s: %w", class.Stream(), err), "the queue is unavailable")
		}
	}
	return out, nil
}
