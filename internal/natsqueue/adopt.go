package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The api owns the assets' settings (QUEUE_CAPACITY, JOB_ACK_WAIT, …): it
// creates or updates the assets with them. A Conn whose Settings Adopt
// (the workers', genqctl submit's) creates only what is missing and reads
// the rest back, so nobody gives the settings to two processes.

// put creates or updates an asset with update; with Adopt it only creates
// one that is missing with create, and leaves an existing one (create's
// error is one of exists) as it is.
func put[C, R any](ctx context.Context, adopt bool, cfg C, update, create func(context.Context, C) (R, error), exists ...error) error {
	if !adopt {
		_, err := update(ctx, cfg)
		return err
	}
	_, err := create(ctx, cfg)
	for _, e := range exists {
		if errors.Is(err, e) {
			return nil
		}
	}
	return err
}

// putStream puts a stream (put).
func (s Settings) putStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	return put(ctx, s.Adopt, cfg, js.CreateOrUpdateStream, js.CreateStream, jetstream.ErrStreamNameAlreadyInUse)
}

// putConsumer puts a durable consumer of stream: with Adopt, one the api
// made meanwhile is left as it is.
func (s Settings) putConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) error {
	on := func(f func(context.Context, string, jetstream.ConsumerConfig) (jetstream.Consumer, error)) func(context.Context, jetstream.ConsumerConfig) (jetstream.Consumer, error) {
		return func(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
			return f(ctx, stream, cfg)
		}
	}
	return put(ctx, s.Adopt, cfg, on(js.CreateOrUpdateConsumer), on(js.CreateConsumer), jetstream.ErrConsumerExists)
}

// putKeyValue puts a key-value bucket (put).
func (s Settings) putKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) error {
	return put(ctx, s.Adopt, cfg, js.CreateOrUpdateKeyValue, js.CreateKeyValue, jetstream.ErrBucketExists, jetstream.ErrStreamNameAlreadyInUse)
}

// putObjectStore puts an object store (put).
func (s Settings) putObjectStore(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) error {
	return put(ctx, s.Adopt, cfg, js.CreateOrUpdateObjectStore, js.CreateObjectStore, jetstream.ErrBucketExists, jetstream.ErrStreamNameAlreadyInUse)
}

// assetSettings are the Settings the assets hold.
type assetSettings struct {
	queueCapacity, batchQueueCapacity int64
	maxJobAge, dedupWindow            time.Duration
	resultTTL                         time.Duration
	resultMaxBytes                    int64
	heartbeatTTL                      time.Duration
	replicas                          int
	memory                            bool
}

// apply overlays the assets' settings on s; an asset without a limit (an
// operator's, say) leaves the process's own.
func (a *assetSettings) apply(s *Settings) {
	positive(&s.QueueCapacity, a.queueCapacity)
	positive(&s.BatchQueueCapacity, a.batchQueueCapacity)
	positive(&s.MaxJobAge, a.maxJobAge)
	positive(&s.DedupWindow, a.dedupWindow)
	positive(&s.ResultTTL, a.resultTTL)
	positive(&s.HeartbeatTTL, a.heartbeatTTL)
	s.ResultMaxBytes, s.Replicas, s.Memory = a.resultMaxBytes, a.replicas, a.memory
}

func positive[T int64 | time.Duration](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

// readAssetSettings reads the settings the assets were made with: the job
// streams', the results store's and the heartbeat bucket's.
func (c *Conn) readAssetSettings(ctx context.Context) error {
	config := func(stream string) (jetstream.StreamConfig, error) {
		st, err := c.js.Stream(ctx, stream)
		if err != nil {
			return jetstream.StreamConfig{}, fmt.Errorf("read the settings of stream %s: %w", stream, err)
		}
		return st.CachedInfo().Config, nil
	}
	jobs, err := config(Interactive.Stream())
	if err != nil {
		return err
	}
	batch, err := config(Batch.Stream())
	if err != nil {
		return err
	}
	// An object store and a key-value bucket are streams of these names.
	results, err := config("OBJ_" + ResultsBucket)
	if err != nil {
		return err
	}
	workers, err := config("KV_" + WorkersBucket)
	if err != nil {
		return err
	}
	a := &assetSettings{
		queueCapacity: jobs.MaxMsgsPerSubject, batchQueueCapacity: batch.MaxMsgsPerSubject,
		maxJobAge: jobs.MaxAge, dedupWindow: jobs.Duplicates,
		resultTTL: results.MaxAge, resultMaxBytes: max(results.MaxBytes, 0),
		heartbeatTTL: workers.MaxAge,
		replicas:     max(jobs.Replicas, 1), memory: jobs.Storage == jetstream.MemoryStorage,
	}
	c.limits.assets.Store(a)
	return nil
}
