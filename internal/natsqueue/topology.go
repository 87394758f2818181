package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// Settings are the limits of the JetStream assets. The api owns them: it
// creates or updates the assets with its settings at start-up. The workers
// and genqctl submit adopt the assets as they find them (Adopt), so that
// one process's flags decide.
type Settings struct {
	// QueueCapacity bounds the jobs of one variant in the stream, queued or
	// running. A publish beyond it is refused: the api answers 429.
	QueueCapacity int64
	// BatchQueueCapacity is the same bound for batch jobs, which have their
	// own stream: a full batch queue leaves QueueCapacity to the
	// interactive callers.
	BatchQueueCapacity int64
	// MaxJobAge drops jobs nobody pulled for this long. It should be at least
	// the longest deadline a producer uses.
	MaxJobAge time.Duration
	// DedupWindow is how long a job id is remembered to drop a second publish.
	DedupWindow time.Duration
	// AckWait is how long a worker may go silent before its job is handed to
	// another worker. Workers send progress at a third of it.
	AckWait time.Duration
	// MaxAttempts is how many times a job is run before it is dead-lettered.
	MaxAttempts int
	// ResultTTL is how long stored results can be fetched by job id.
	ResultTTL time.Duration
	// ResultMaxBytes bounds the results store; 0 means no bound.
	ResultMaxBytes int64
	// HeartbeatTTL is how long a worker counts as live after its last heartbeat.
	HeartbeatTTL time.Duration
	// Replicas of every asset: 1 for a single server, 3 in a cluster.
	Replicas int
	// TenantIdle is how long a tenant's consumer stays after no worker
	// has pulled from it (JetStream's InactiveThreshold); 0 keeps it for
	// ever. Its jobs stay in the stream, and the api makes the consumer
	// again for them (KeepTenantConsumers).
	TenantIdle time.Duration
	// Memory keeps assets in memory instead of on disk (tests only).
	Memory bool
	// Adopt leaves every existing stream, bucket and consumer as it is
	// instead of writing these settings over them, and reads the settings
	// back from them (Conn.Settings): a worker serves the assets the api
	// made (or an operator), so processes started with other settings do
	// not flip them back and forth. A missing asset is still created, with
	// these settings (a worker started before any api); the api's values
	// replace them when it starts, and FollowConsumerLimits follows.
	Adopt bool
}

// DefaultSettings are the protocol's documented defaults.
func DefaultSettings() Settings {
	return Settings{
		QueueCapacity:      1000,
		BatchQueueCapacity: 100_000,
		MaxJobAge:          time.Hour,
		DedupWindow:        2 * time.Minute,
		AckWait:            15 * time.Second,
		MaxAttempts:        3,
		ResultTTL:          time.Hour,
		ResultMaxBytes:     0,
		HeartbeatTTL:       15 * time.Second,
		Replicas:           1,
		TenantIdle:         24 * time.Hour,
	}
}

func (s Settings) validate() error {
	var errs []error
	if s.QueueCapacity < 1 || s.BatchQueueCapacity < 1 {
		errs = append(errs, errors.New("queue capacities must be at least 1"))
	}
	if s.AckWait < time.Second {
		errs = append(errs, errors.New("ack wait must be at least 1s"))
	}
	if s.MaxAttempts < 1 {
		errs = append(errs, errors.New("max attempts must be at least 1"))
	}
	if s.HeartbeatTTL < time.Second {
		errs = append(errs, errors.New("heartbeat TTL must be at least 1s"))
	}
	if s.MaxJobAge < time.Second || s.ResultTTL < time.Second || s.DedupWindow < time.Second {
		errs = append(errs, errors.New("job age, result TTL and dedup window must be at least 1s"))
	}
	if s.TenantIdle != 0 && s.TenantIdle < time.Second {
		errs = append(errs, errors.New("tenant consumer idle time must be 0 (kept for ever) or at least 1s"))
	}
	return errors.Join(errs...)
}

func (s Settings) storage() jetstream.StorageType {
	if s.Memory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

func (s Settings) replicas() int { return max(s.Replicas, 1) }

// capacity is the per-variant bound of class c's stream.
func (s Settings) capacity(c Class) int64 {
	if c == Batch {
		return s.BatchQueueCapacity
	}
	return s.QueueCapacity
}

// ensure creates or updates every asset. It is idempotent: the api calls it
// for its variant before serving, so the durable consumer exists before any
// worker does (KEDA needs it to read the lag), and workers call it too.
func ensure(ctx context.Context, js jetstream.JetStream, s Settings, variants []genq.Variant) error {
	if err := s.validate(); err != nil {
		return err
	}
	// One stream per class, each with its own per-variant capacity: a
	// stream has a single MaxMsgsPerSubject. GENQ_JOBS keeps its name and
	// subjects, so an existing deployment and its consumers stay as they
	// are; GENQ_BATCH_JOBS is added beside it.
	for _, c := range []Class{Interactive, Batch} {
		if err := ensureAsset(ctx, "stream "+c.Stream(), func(ctx context.Context) error {
			return s.putStream(ctx, js, jetstream.StreamConfig{
				Name:                 c.Stream(),
				Description:          c.streamDescription(),
				Subjects:             c.streamSubjects(),
				Retention:            jetstream.WorkQueuePolicy,
				Discard:              jetstream.DiscardNew,
				DiscardNewPerSubject: true,
				MaxMsgsPerSubject:    s.capacity(c),
				MaxAge:               s.MaxJobAge,
				Duplicates:           s.DedupWindow,
				Storage:              s.storage(),
				Replicas:             s.replicas(),
			})
		}); err != nil {
			return err
		}
	}
	err := ensureAsset(ctx, "stream "+DeadStream, func(ctx context.Context) error {
		return s.putStream(ctx, js, jetstream.StreamConfig{
			Name:        DeadStream,
			Description: "genq jobs that failed every attempt",
			Subjects:    []string{fmt.Sprintf(deadSubjectFmt, "*")},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      7 * 24 * time.Hour,
			MaxMsgs:     100_000,
			Storage:     s.storage(),
			Replicas:    s.replicas(),
		})
	})
	if err != nil {
		return err
	}
	for _, v := range variants {
		for _, c := range []Class{Interactive, Batch} {
			if err := ensureConsumer(ctx, js, s, c, v); err != nil {
				return err
			}
		}
	}
	if err := ensureWorkersBucket(ctx, js, s); err != nil {
		return err
	}
	if err := ensureAttemptsBucket(ctx, js, s); err != nil {
		return err
	}
	if err := ensureAsset(ctx, "bucket "+CancelBucket, func(ctx context.Context) error {
		return s.putKeyValue(ctx, js, jetstream.KeyValueConfig{
			Bucket: CancelBucket, Description: "genq cancelled jobs",
			TTL: s.MaxJobAge, History: 1, Storage: s.storage(), Replicas: s.replicas(),
		})
	}); err != nil {
		return err
	}
	return ensureAsset(ctx, "object store "+ResultsBucket, func(ctx context.Context) error {
		return s.putObjectStore(ctx, js, jetstream.ObjectStoreConfig{
			Bucket: ResultsBucket, Description: "genq results kept for fetch by job id",
			TTL: s.ResultTTL, MaxBytes: orUnlimited(s.ResultMaxBytes), Storage: s.storage(), Replicas: s.replicas(),
		})
	})
}

// Bounds of the creation of one asset. Identical creates of a replicated
// asset sent at once to a fresh cluster contend, and all but one go
// unanswered until the client's timeout; a short try followed by another
// after a jittered pause finds the asset made by the winner, and updates it
// to the same settings at once. Each try that times out doubles the next
// one's bound, up to assetTryMax, so a slow link's round trips still fit.
const (
	assetTry      = time.Second
	assetTryMax   = 10 * time.Second
	assetRetryFor = time.Minute
)

// ensureAsset runs create, each try bounded, until it succeeds, fails for
// a reason other than a timeout, or assetRetryFor passes.
func ensureAsset(ctx context.Context, what string, create func(ctx context.Context) error) error {
	t := tries{within: assetRetryFor, each: assetTry, eachMax: assetTryMax, permanent: func(err error) bool { return !transient(err) }}
	if err := retryTries(ctx, t, create); err != nil {
		return fmt.Errorf("ensure %s: %w", what, err)
	}
	return nil
}

// transient reports whether err may go away by itself: an answer that did
// not come, or a cluster without a leader yet.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		(errors.As(err, &apiErr) && apiErr.Code >= 500)
}

// ensureConsumer creates or updates the durable consumer of class c's
// stream for variant v.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, s Settings, c Class, v genq.Variant) error {
	if s.Adopt {
		if _, err := js.Consumer(ctx, c.Stream(), c.Consumer(v)); err == nil {
			return nil
		}
	}
	return ensureAsset(ctx, "consumer "+c.Consumer(v), func(ctx context.Context) error {
		return s.putConsumer(ctx, js, c.Stream(),
			s.jobConsumer(c.Consumer(v), fmt.Sprintf("workers of variant %s, %s jobs", v, c), c.Subject(v)))
	})
}

// jobConsumer is the configuration every consumer of jobs shares (the
// variant's, a routed worker's, a tenant's), so that a delivery from any
// of them is acked, retried and dead-lettered by the same rules.
func (s Settings) jobConsumer(name, description, subject string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       name,
		Description:   description,
		FilterSubject: subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.AckWait,
		// See maxDeliver: room for the attempts, the crashes that are
		// not charged, and a last delivery that only dead-letters.
		MaxDeliver:    maxDeliver(s.MaxAttempts),
		MaxAckPending: -1,
		MaxWaiting:    4096,
	}
}

// ensureRoutedConsumer creates, or with Adopt leaves as it is, the
// durable consumer of one worker's subject: the shared consumer's settings
// over the worker's subject alone, so a delivery from it is acked, retried
// and dead-lettered by the same rules.
func ensureRoutedConsumer(ctx context.Context, js jetstream.JetStream, s Settings, v genq.Variant, token string) (jetstream.Consumer, error) {
	name := routedConsumerPrefix(v) + token
	if s.Adopt {
		if c, err := js.Consumer(ctx, JobsStream, name); err == nil {
			return c, nil
		}
	}
	var cons jetstream.Consumer
	err := ensureAsset(ctx, "consumer "+name, func(ctx context.Context) error {
		c, err := js.CreateOrUpdateConsumer(ctx, JobsStream, s.jobConsumer(name,
			fmt.Sprintf("worker %s of variant %s: interactive jobs routed to it", token, v),
			JobsSubject(v)+"."+token))
		cons = c
		return err
	})
	return cons, err
}

// ensureWorkersBucket creates or updates GENQ_WORKERS. It lives in memory,
// so a standalone server loses it on restart; heartbeats call this again
// when the server says it is missing.
func ensureWorkersBucket(ctx context.Context, js jetstream.JetStream, s Settings) error {
	return ensureAsset(ctx, "bucket "+WorkersBucket, func(ctx context.Context) error {
		return s.putKeyValue(ctx, js, jetstream.KeyValueConfig{
			Bucket: WorkersBucket, Description: "genq worker heartbeats",
			TTL: s.HeartbeatTTL, History: 1, Storage: jetstream.MemoryStorage, Replicas: s.replicas(),
		})
	})
}

// ensureAttemptsBucket creates or updates GENQ_ATTEMPTS. A record is of use
// while its job can be delivered, so it lives as long as a queued job.
func ensureAttemptsBucket(ctx context.Context, js jetstream.JetStream, s Settings) error {
	return ensureAsset(ctx, "bucket "+AttemptsBucket, func(ctx context.Context) error {
		return s.putKeyValue(ctx, js, jetstream.KeyValueConfig{
			Bucket: AttemptsBucket, Description: "genq per-job run records (suspects and failures)",
			TTL: s.MaxJobAge, History: 1, Storage: s.storage(), Replicas: s.replicas(),
		})
	})
}

func orUnlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}
