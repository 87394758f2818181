package natsqueue

import (
	"fmt"
	"time"

	"github.com/genq/genq/internal/envflag"
)

// RegisterFlags binds the connection settings, shared by every component.
func (o *ConnectOptions) RegisterFlags(fs *envflag.Set, defaultURL string) {
	fs.String(&o.URL, "nats-url", "NATS_URL", defaultURL, "NATS server URL(s), comma-separated")
	fs.String(&o.User, "nats-user", "NATS_USER", "", "NATS user name")
	fs.Secret(&o.Password, "nats-password", "NATS_PASSWORD", "NATS password")
	fs.Secret(&o.Token, "nats-token", "NATS_TOKEN", "NATS authentication token")
	fs.String(&o.CredsFile, "nats-creds", "NATS_CREDS", "", "NATS credentials file (JWT and nkey seed)")
	fs.String(&o.TLSCA, "nats-tls-ca", "NATS_TLS_CA", "", "CA certificate file to verify the NATS server")
	fs.String(&o.TLSCert, "nats-tls-cert", "NATS_TLS_CERT", "", "client certificate file for NATS mutual TLS")
	fs.String(&o.TLSKey, "nats-tls-key", "NATS_TLS_KEY", "", "client key file for NATS mutual TLS")
	fs.String(&o.InboxPrefix, "nats-inbox-prefix", "NATS_INBOX_PREFIX", "", "prefix of this client's inboxes in place of _INBOX (the one its NATS user may subscribe to)")
	fs.String(&o.ReplyPrefixes, "nats-reply-prefixes", "NATS_REPLY_PREFIXES", "", "worker: comma-separated subject prefixes a job's reply_to must start with (empty: any)")

}

// RegisterFlags binds the limits of the JetStream assets.
func (s *Settings) RegisterFlags(fs *envflag.Set) {
	d := DefaultSettings()
	fs.Int64(&s.QueueCapacity, "queue-capacity", "QUEUE_CAPACITY", d.QueueCapacity, "jobs per variant queued or running before new ones get 429")
	fs.Int64(&s.BatchQueueCapacity, "batch-queue-capacity", "BATCH_QUEUE_CAPACITY", d.BatchQueueCapacity, "batch jobs per variant queued or running before new ones are refused (their own capacity, apart from QUEUE_CAPACITY)")
	fs.Duration(&s.MaxJobAge, "job-max-age", "JOB_MAX_AGE", d.MaxJobAge, "jobs not pulled within this are dropped from the queue")
	fs.Duration(&s.DedupWindow, "dedup-window", "DEDUP_WINDOW", d.DedupWindow, "a job id published twice within this runs once")
	fs.Duration(&s.AckWait, "ack-wait", "JOB_ACK_WAIT", d.AckWait, "a silent worker's job goes to another worker after this")
	fs.Int(&s.MaxAttempts, "max-attempts", "JOB_MAX_ATTEMPTS", d.MaxAttempts, "runs of a failing job before it is dead-lettered")
	fs.Duration(&s.ResultTTL, "result-ttl", "RESULT_TTL", d.ResultTTL, "how long stored results can be fetched by job id")
	fs.Int64(&s.ResultMaxBytes, "result-max-bytes", "RESULT_MAX_BYTES", d.ResultMaxBytes, "size bound of the results store (0: none)")
	fs.Duration(&s.HeartbeatTTL, "heartbeat-ttl", "HEARTBEAT_TTL", d.HeartbeatTTL, "a worker counts as live this long after its last heartbeat")
	fs.Duration(&s.TenantIdle, "tenant-consumer-idle", "TENANT_CONSUMER_IDLE", d.TenantIdle, "api: a tenant's consumer is removed after no worker pulled from it for this long, and made again for its next job (0: kept for ever)")
	fs.Int(&s.Replicas, "nats-replicas", "NATS_REPLICAS", d.Replicas, "replicas of each JetStream asset (3 in a NATS cluster)")
}

// RegisterFlags binds the api's late looks; MaxGap keeps its default.
func (l *LateLooks) RegisterFlags(fs *envflag.Set) {
	d := DefaultLateLooks()
	*l = d
	fs.Duration(&l.After, "result-look-after", "RESULT_LOOK_AFTER", d.After,
		"api: a job with no reply after this is looked for in the results store, then again at doubling gaps up to 30s, the last just before its deadline: a reply lost on its way is found there (0: looked for only after a reconnect)")
	fs.Float64(&l.PerSecond, "result-looks-per-second", "RESULT_LOOKS_PER_SECOND", d.PerSecond,
		"api: the most of those looks per second, over all the jobs it waits on (a look is one NATS request)")
	fs.Float64(&l.PollsPerSecond, "result-polls-per-second", "RESULT_POLLS_PER_SECOND", d.PollsPerSecond,
		"api: the most looks per second in the results store of the jobs that poll it, over all of them: after a reconnect every waiting job looks once, in turn, then at doubling gaps from 0.5s up to 30s (higher than RESULT_LOOKS_PER_SECOND: results stored during an outage wait for these looks)")
}

// Validate refuses looks that could not be paced: a rate of 0 or less
// would leave them unbounded, so the looks are turned off by their After.
func (l LateLooks) Validate() error {
	switch {
	case l.After < 0:
		return fmt.Errorf("RESULT_LOOK_AFTER %s: want 0 (off) or more", l.After)
	case l.After > 0 && !(l.PerSecond > 0):
		return fmt.Errorf("RESULT_LOOKS_PER_SECOND %v: want more than 0 (RESULT_LOOK_AFTER=0 turns the looks off)", l.PerSecond)
	case !(l.PollsPerSecond > 0):
		return fmt.Errorf("RESULT_POLLS_PER_SECOND %v: want more than 0 (the polls after a reconnect cannot be turned off)", l.PollsPerSecond)
	}
	return nil
}

// Routing by prefix (docs/text.md, "Across workers"): the api sends a
// conversation's turns to the worker that served it, which pulls its own
// subject first; idle workers steal what waited past DefaultStealAfter.
const (
	DefaultRouteByPrefix = true
	DefaultStealAfter    = 500 * time.Millisecond
)

// RegisterRouteFlag binds ROUTE_BY_PREFIX, a worker's: producers route
// only to the workers whose heartbeats say they take routed jobs.
func RegisterRouteFlag(fs *envflag.Set, on *bool) {
	fs.Bool(on, "route-by-prefix", "ROUTE_BY_PREFIX", DefaultRouteByPrefix,
		"take the jobs of the conversations this worker's prefix cache holds, routed to it by the api, before the shared queue's")
}
