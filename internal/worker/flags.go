package worker

import (
	"time"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/natsqueue"
)

// RegisterFlags binds the runtime's settings under the Worker section and
// the routing by prefix's under a section of their own. The process fills
// WorkerID, Variant and Ledger.
func (c *Config) RegisterFlags(fs *envflag.Set) {
	fs.Section("Worker")
	fs.Duration(&c.DrainGrace, "drain-grace", "DRAIN_GRACE", 2*time.Minute, "how long jobs in flight may finish after SIGTERM")
	fs.Duration(&c.PollWait, "poll-wait", "POLL_WAIT", 2*time.Second, "longest wait of one pull request")
	fs.Int(&c.InteractiveSlots, "interactive-slots", "INTERACTIVE_SLOTS", 1, "slots kept for interactive jobs, never filled by batch jobs (0: batch work may fill every slot; at most SLOTS-1)")
	fs.Int(&c.BusyBatchSlots, "busy-batch-slots", "BUSY_BATCH_SLOTS", 1, "batch jobs that run at most while an interactive job runs on this worker; with none running, batch jobs fill every slot but INTERACTIVE_SLOTS (0: none start beside interactive work)")
	fs.Duration(&c.TenantHeadroom, "tenant-headroom", "TENANT_HEADROOM", natsqueue.DefaultHeadroomFor, "how long a worker keeps its last free slot for a tenant after that tenant's last job, while other tenants' jobs hold the others, so that its next job starts at once (0: none kept; docs/protocol.md §11)")
	fs.Duration(&c.HeartbeatEvery, "heartbeat-interval", "HEARTBEAT_INTERVAL", 3*time.Second, "time between heartbeats")
	fs.Duration(&c.RetryDelay, "retry-delay", "RETRY_DELAY", time.Second, "wait before a failed job's second attempt, doubled after")

	fs.Section("Routing by prefix")
	natsqueue.RegisterRouteFlag(fs, &c.RouteByPrefix)
	fs.Adopted("ROUTE_BY_PREFIX", "the api routes a conversation's turns only to the workers whose heartbeats say they take routed jobs")
	fs.Duration(&c.StealAfter, "route-steal-after", "ROUTE_STEAL_AFTER", natsqueue.DefaultStealAfter, "with ROUTE_BY_PREFIX: how long a job routed to a busy or stopped worker waits before an idle worker takes it")
}
