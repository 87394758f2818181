package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// JobRecordsBucket holds what a producer that queues a job without waiting
// for it (the api's POST /v1/jobs) needs to answer for it later: a small
// record per job id, as long as its result is kept. The outcome itself is
// the stored result in GENQ_RESULTS, the same for every producer.
const JobRecordsBucket = "GENQ_JOB_RECORDS"

// runningSuffix names the key a worker writes beside a stored job's
// record, "<id>.running", when it starts the job. A job id never holds a
// dot, so the key is never another job's record.
const runningSuffix = ".running"

// JobStore is a Client that also queues jobs without waiting for them and
// answers for them later by id.
type JobStore struct {
	*Client
	records jobRecords
}

// NewJobStore wraps cl.
func NewJobStore(cl *Client) *JobStore { return &JobStore{Client: cl} }

// jobRecords binds GENQ_JOB_RECORDS on first use, creating it: only the
// api's asynchronous routes need it.
type jobRecords struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

func (r *jobRecords) bind(ctx context.Context, c *Conn) (jetstream.KeyValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	s := c.settings
	kv, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: JobRecordsBucket, Description: "genq records of jobs queued over HTTP without waiting",
		TTL: s.ResultTTL, History: 1, Storage: s.storage(), Replicas: s.replicas(),
	})
	if err != nil {
		return nil, genq.WrapError(genq.Unavailable, fmt.Errorf("ensure bucket %s: %w", JobRecordsBucket, err), "the job store is unavailable")
	}
	r.kv = kv
	return kv, nil
}

// Submit queues job without waiting for it: nobody listens for a reply,
// and the worker keeps the result in the results store for its whole TTL.
// Nobody waits on a connection either, so it is a batch job: interactive
// requests run first.
func (cl *JobStore) Submit(ctx context.Context, job genq.Job) error {
	// The records bucket first, so the worker's running mark lands: a
	// cancelled batch waits for the requests that marks say are running.
	if _, err := cl.records.bind(ctx, cl.conn); err != nil {
		return err
	}
	job.ReplyTo, job.Store = "", true
	_, err := cl.conn.Publish(ctx, job, AsBatch())
	if err != nil {
		// As in Run: the job may have been queued before the PubAck was
		// lost, or be stored later by a server that froze.
		cl.conn.Abandon(job.ID)
	}
	return err
}

// Outcome is the stored result of job id: an answer, the job's error, or a
// *genq.Error with code NotFound while there is none (yet).
func (cl *JobStore) Outcome(ctx context.Context, id string) (*genq.ReceivedResult, error) {
	return cl.conn.FetchResult(ctx, id)
}

// Running reports whether a worker has started job id (its running mark
// is there; see MarkRunning), and how far it has got when the worker said
// (MarkProgress).
func (cl *JobStore) Running(ctx context.Context, id string) (bool, genq.Progress, error) {
	var p genq.Progress
	raw, err := cl.JobRecord(ctx, id+runningSuffix)
	if genq.ErrorCode(err) == genq.NotFound {
		return false, p, nil
	}
	if err != nil {
		return false, p, err
	}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &p) // a mark from an older worker is empty; one unread is no progress
	}
	return true, p, nil
}

// CancelJob puts the cancel mark of job id: a worker that has not started
// it drops it, and one running it stops; either stores the outcome
// canceled.
func (cl *JobStore) CancelJob(id string) { cl.conn.Cancel(id) }

// PutJobRecord stores a job's record under its id.
func (cl *JobStore) PutJobRecord(ctx context.Context, id string, record []byte) error {
	kv, err := cl.records.bind(ctx, cl.conn)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, id, record); err != nil {
		return genq.WrapError(genq.Unavailable, err, "the job store is unavailable")
	}
	return nil
}

// UpdateJobRecord replaces job id's record by what update makes of it, if
// no other write came between: genq.ErrChanged when one did, so that of
// several apis one alone makes a change (an answered job's metering).
func (cl *JobStore) UpdateJobRecord(ctx context.Context, id string, update func(record []byte) ([]byte, error)) error {
	kv, err := cl.records.bind(ctx, cl.conn)
	if err != nil {
		return err
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return genq.Errorf(genq.NotFound, "no job %s", id)
	}
	if err != nil {
		return genq.WrapError(genq.Unavailable, err, "the job store is unavailable")
	}
	next, err := update(e.Value())
	if err != nil {
		return fmt.Errorf("job %s: update its record: %w", id, err)
	}
	_, err = kv.Update(ctx, id, next, e.Revision())
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return genq.ErrChanged
	}
	if err != nil {
		return genq.WrapError(genq.Unavailable, err, "the job store is unavailable")
	}
	return nil
}

// JobRecord reads a job's record; a *genq.Error with code NotFound when
// there is none.
func (cl *JobStore) JobRecord(ctx context.Context, id string) ([]byte, error) {
	kv, err := cl.records.bind(ctx, cl.conn)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, genq.Errorf(genq.NotFound, "no job %s", id)
	}
	if err != nil {
		return nil, genq.WrapError(genq.Unavailable, err, "the job store is unavailable")
	}
	return e.Value(), nil
}

// JobIDs lists the jobs that have a record: those queued over HTTP
// without waiting, within RESULT_TTL.
func (cl *JobStore) JobIDs(ctx context.Context) ([]string, error) {
	kv, err := cl.records.bind(ctx, cl.conn)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, genq.WrapError(genq.Unavailable, err, "the job store is unavailable")
	}
	var out []string
	for k := range keys.Keys() {
		if !strings.HasSuffix(k, runningSuffix) {
			out = append(out, k)
		}
	}
	return out, nil
}

// outcomeWatchRetry is how long WatchOutcomes waits before it watches
// again after its watch failed (NATS away, the store not there yet).
const outcomeWatchRetry = 2 * time.Second

// WatchOutcomes calls stored with the id of each job whose outcome is in
// the results store: those there when it starts, then each as a worker
// stores it, until ctx ends. It is how an api learns that a job queued
// without waiting is done, whether or not anyone reads its outcome.
func (cl *JobStore) WatchOutcomes(ctx context.Context, stored func(ctx context.Context, id string)) {
	for ctx.Err() == nil {
		if err := cl.watchOutcomes(ctx, stored); err != nil && ctx.Err() == nil {
			cl.conn.log.Debug("could not watch the stored outcomes; watching again", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(outcomeWatchRetry):
		}
	}
}

func (cl *JobStore) watchOutcomes(ctx context.Context, stored func(ctx context.Context, id string)) error {
	w, err := cl.conn.results.Watch(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("watch %s: %w", ResultsBucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case info, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("watch %s: it ended", ResultsBucket)
			}
			// nil marks the end of the objects already there.
			if info != nil && genq.ValidateJobID(info.Name) == nil {
				stored(ctx, info.Name)
			}
		}
	}
}
