package natsqueue

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// consumerLimits are the job limits the variant's durable consumer holds:
// the server redelivers after its AckWait and stops at its MaxDeliver,
// whatever this process was configured with, so a worker keeps time by
// the consumer's values, not its own flags.
type consumerLimits struct {
	ackWait     atomic.Int64 // nanoseconds; 0: not read yet
	maxAttempts atomic.Int64
	// assets are the settings read back from the streams and buckets,
	// with Settings.Adopt (adopt.go); nil: not read.
	assets atomic.Pointer[assetSettings]
}

// apply overlays the consumer's limits and the assets' settings, once
// read, on s.
func (l *consumerLimits) apply(s Settings) Settings {
	if a := l.assets.Load(); a != nil {
		a.apply(&s)
	}
	if w := l.ackWait.Load(); w > 0 {
		s.AckWait = time.Duration(w)
	}
	if a := l.maxAttempts.Load(); a > 0 {
		s.MaxAttempts = int(a)
	}
	return s
}

// maxDeliver is the consumer's delivery limit for a job of the given
// attempts. A crash beside other jobs is not charged (the job is then a
// suspect and runs alone next), and it can follow the first delivery and
// each reported failure: with every charged attempt a failure followed by
// such a crash, and one delivery that only dead-letters, a job needs
// 2 × attempts + 1 deliveries.
func maxDeliver(attempts int) int { return 2*attempts + 1 }

// attemptsOf inverts maxDeliver; 0 when the consumer has no limit.
func attemptsOf(maxDeliver int) int {
	if maxDeliver < 3 {
		return 0
	}
	return (maxDeliver - 1) / 2
}

// readConsumerLimits takes AckWait and the attempts (see maxDeliver) from
// the consumer.
func (c *Conn) readConsumerLimits(ctx context.Context, v genq.Variant) error {
	cons, err := c.js.Consumer(ctx, JobsStream, ConsumerName(v))
	if err != nil {
		return fmt.Errorf("read consumer %s: %w", ConsumerName(v), err)
	}
	c.storeLimits(cons.CachedInfo().Config)
	return nil
}

func (c *Conn) storeLimits(cfg jetstream.ConsumerConfig) {
	if cfg.AckWait > 0 {
		c.limits.ackWait.Store(int64(cfg.AckWait))
	}
	if a := attemptsOf(cfg.MaxDeliver); a > 0 {
		c.limits.maxAttempts.Store(int64(a))
	}
}

// FollowConsumerLimits rereads the variant's consumer every interval until
// ctx ends, so Settings reports the AckWait and attempts the server applies
// now, also after another component rewrote them; with Adopt, the assets'
// settings too. Errors are logged: the last values read stay in force.
func (c *Conn) FollowConsumerLimits(ctx context.Context, v genq.Variant, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := c.Settings()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.readConsumerLimits(rctx, v)
		if err == nil && c.settings.Adopt {
			err = c.readAssetSettings(rctx)
		}
		cancel()
		if err != nil {
			c.log.Debug("could not reread the consumer's limits", "err", err)
			continue
		}
		if after := c.Settings(); after != before {
			c.log.Info("the queue's settings changed", "ack_wait", after.AckWait.String(), "max_attempts", after.MaxAttempts,
				"heartbeat_ttl", after.HeartbeatTTL.String(), "job_max_age", after.MaxJobAge.String(), "queue_capacity", after.QueueCapacity)
		}
	}
}
