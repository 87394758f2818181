// Package worker is the worker runtime: it pulls jobs of one variant from
// the queue, as many as its backend has free slots, runs them, and replies.
// It owns every rule about a job's life on the worker side: progress,
// acknowledgement after delivery, bounded retries, dead letters, deadlines,
// cancellation and draining.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/worker/supervisor"
)

// Config tunes the runtime.
type Config struct {
	WorkerID string
	Variant  genq.Variant
	// PollWait bounds one pull request. A draining worker waits at most
	// this long for its outstanding pulls to end.
	PollWait time.Duration
	// HeartbeatEvery is how often the worker announces itself.
	HeartbeatEvery time.Duration
	// DrainGrace is how long jobs in flight may run after SIGTERM before
	// they are handed back to the queue for another worker.
	DrainGrace time.Duration
	// RetryDelay is the wait before a failed job's next attempt, doubled
	// at each attempt.
	RetryDelay time.Duration
	// RouteByPrefix makes the worker take jobs routed to it (its own
	// subject, pulled first) and steal those other workers did not start
	// within StealAfter (docs/text.md, "Across workers").
	RouteByPrefix bool
	StealAfter    time.Duration
	// InteractiveSlots are slots that take interactive jobs only, so
	// that batch work in the others never makes a caller wait for a free
	// slot; at most all slots but one.
	InteractiveSlots int
	// BusyBatchSlots bounds the batch jobs that run while an interactive
	// one does (lanes.go); with none running, batch jobs may fill every
	// slot but InteractiveSlots. 0: none start beside interactive work.
	BusyBatchSlots int
	// TenantHeadroom is how long the last free slot is kept for a tenant
	// after its last job while other tenants' jobs hold the rest, so that
	// its next job starts at once (natsqueue.Puller.KeepHeadroom). 0:
	// none kept.
	TenantHeadroom time.Duration
	// Ledger, when the process is supervised, is told which jobs it holds
	// and runs, so that its supervisor can name them, and note what the
	// process died of in their run records, should it die
	// (supervisor.Attach). Nil: nothing is told.
	Ledger *supervisor.Ledger
	// Tracing makes the worker's spans (tracing.Setup); nil: none.
	Tracing trace.TracerProvider
}

// Runtime runs one backend for one variant.
type Runtime struct {
	cfg      Config
	conn     *natsqueue.Conn
	backend  genq.Backend
	info     genq.BackendInfo
	log      *slog.Logger
	tracer   trace.Tracer
	metrics  *metrics
	started  time.Time
	attempts int

	mu       sync.Mutex
	running  map[string]context.CancelCauseFunc
	draining bool
	cancels  *natsqueue.CancelWatch // set by Run before any job starts
	gate     *gate                  // jobs side by side, or a suspect alone
	lanes    *lanes                 // batch work in the room interactive work leaves
	gather   *gather                // nil: each slot pulls for itself
}

// New builds a runtime. Metrics are registered on reg. log should already
// name the worker and the variant.
func New(cfg Config, conn *natsqueue.Conn, backend genq.Backend, log *slog.Logger, reg prometheus.Registerer) *Runtime {
	if cfg.PollWait <= 0 {
		cfg.PollWait = 2 * time.Second
	}
	if cfg.HeartbeatEvery <= 0 {
		cfg.HeartbeatEvery = 3 * time.Second
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.StealAfter <= 0 {
		cfg.StealAfter = natsqueue.DefaultStealAfter
	}
	if _, ok := backend.(genq.PrefixCacheReporter); cfg.RouteByPrefix && !ok {
		// Nothing to gain from a conversation's turns coming back here.
		log.Info("ROUTE_BY_PREFIX has no effect: this backend keeps no prefix cache")
		cfg.RouteByPrefix = false
	}
	r := &Runtime{
		cfg: cfg, conn: conn, backend: backend, info: backend.Info(),
		log:     log,
		metrics: newMetrics(reg), started: time.Now(),
		attempts: conn.Settings().MaxAttempts,
		running:  map[string]context.CancelCauseFunc{},
		gate:     newGate(),
		lanes:    &lanes{busyBatch: max(cfg.BusyBatchSlots, 0)},
		tracer:   cmp.Or[trace.TracerProvider](cfg.Tracing, noop.NewTracerProvider()).Tracer(tracerName),
	}
	r.gather = newGather(r.info.Gather, max(r.info.Slots, 1))
	r.metrics.slots.Set(float64(r.info.Slots))
	if c, ok := backend.(genq.PrefixCacheReporter); ok {
		watchPrefixCache(reg, c)
	}
	if c, ok := backend.(genq.SchemaCacheReporter); ok {
		watchSchemaCache(reg, c)
	}
	return r
}

// Run serves jobs until ctx ends, then drains: it stops pulling, lets jobs in
// flight finish within the grace period, hands back the rest, and returns.
func (r *Runtime) Run(ctx context.Context) error {
	puller, err := r.newPuller(ctx)
	if err != nil {
		return err
	}
	// Jobs run under their own context, which outlives ctx by the grace period.
	jobsCtx, endJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer endJobs(nil)
	cancels, err := r.conn.WatchCancels(jobsCtx, r.cancel)
	if err != nil {
		return err
	}
	r.cancels = cancels
	beatsCtx, stopBeats := context.WithCancel(jobsCtx)
	beatsDone := make(chan struct{})
	go func() { defer close(beatsDone); r.heartbeats(beatsCtx) }()

	slots := max(r.info.Slots, 1)
	interactiveOnly := min(r.cfg.InteractiveSlots, slots-1)
	if r.cfg.TenantHeadroom > 0 && slots > 1 {
		puller.KeepHeadroom(slots, slots-interactiveOnly, r.cfg.TenantHeadroom)
	}
	r.log.Info("worker ready", "device", r.info.Device.Kind, "device_name", r.info.Device.Name, "engine", r.info.Device.Engine,
		"model", r.info.Model, "slots", slots, "startup", time.Since(r.started).Round(time.Millisecond).String())
	var wg sync.WaitGroup
	for i := range slots {
		// The first InteractiveSlots take interactive jobs only: batch
		// work fills the others, never all of them, so a caller who waits
		// does not wait for a batch job to end.
		batchToo := i >= interactiveOnly
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.slot(ctx, jobsCtx, puller, batchToo)
		}()
	}

	<-ctx.Done()
	r.mu.Lock()
	r.draining = true
	inFlight := len(r.running)
	r.mu.Unlock()
	r.log.Info("draining", "jobs_in_flight", inFlight, "grace", r.cfg.DrainGrace.String())
	r.beat(jobsCtx) // tell the api at once that this worker takes no more jobs

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(r.cfg.DrainGrace):
		r.log.Warn("grace period over; handing jobs in flight back to the queue")
		endJobs(errDrainTimedOut)
		<-done
	}
	stopBeats()
	<-beatsDone
	withdrawBeat(ctx, r.conn, r.cfg.Variant, r.cfg.WorkerID, r.log)
	r.log.Info("worker stopped")
	return nil
}

// newPuller binds the consumers the worker pulls: the shared ones, and
// with RouteByPrefix its own, stealing by the heartbeats it watches.
func (r *Runtime) newPuller(ctx context.Context) (*natsqueue.Puller, error) {
	if !r.cfg.RouteByPrefix {
		return r.conn.NewPuller(ctx, r.cfg.Variant)
	}
	workers, err := r.conn.WatchWorkers(ctx, r.cfg.Variant)
	if err != nil {
		return nil, err
	}
	return r.conn.NewRoutedPuller(ctx, r.cfg.Variant, natsqueue.RouteOptions{
		WorkerID: r.cfg.WorkerID, Workers: workers, StealAfter: r.cfg.StealAfter,
	})
}

// slot is one of the worker's parallel lanes: it keeps one pull outstanding
// while it is free, so the worker never holds more jobs than it can run.
// A slot that may take batch jobs takes them only while lanes leaves room.
func (r *Runtime) slot(ctx, jobsCtx context.Context, puller *natsqueue.Puller, batchToo bool) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		jobCtx, arrive := jobsCtx, func() {}
		if r.gather != nil {
			h, turn := r.gather.wait(ctx)
			if h != nil {
				r.runHanded(ctx, jobsCtx, h)
				continue
			}
			if !turn {
				return
			}
		}
		// No pull while a suspect waits or runs: it must run alone.
		if r.gate.waitOpen(ctx) != nil {
			if r.gather != nil {
				r.gather.endTurn()
			}
			return
		}
		d, done, err := r.pull(puller, batchToo)
		if r.gather != nil {
			jobCtx, arrive = r.gatherMore(ctx, jobsCtx, puller, d)
			r.gather.endTurn()
		}
		if err != nil {
			r.log.Warn("pull failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if d == nil {
			continue
		}
		if ctx.Err() != nil {
			// Draining: another worker should run it, now.
			if err := d.Release(); err != nil {
				r.log.Warn("could not hand a job back", "job_id", d.Job.ID, "err", err)
			}
			arrive()
			done()
			return
		}
		r.handle(jobCtx, d)
		arrive()
		done()
	}
}

// pull asks for one job as the slot's lane allows: a slot that may take
// batch jobs takes them only while lanes leaves room. done undoes the
// lane's count once the job is settled.
func (r *Runtime) pull(puller *natsqueue.Puller, batchToo bool) (d *natsqueue.Delivery, done func(), err error) {
	reserved := batchToo && r.lanes.reserveBatch()
	switch {
	case reserved:
		d, err = puller.Next(r.cfg.PollWait)
	case batchToo: // no room for batch work now: ask again soon
		d, err = puller.NextInteractive(recheckBatch)
	default:
		d, err = puller.NextInteractive(r.cfg.PollWait)
	}
	laneDone := r.lanes.took(d, reserved)
	return d, func() { laneDone(); puller.Settled(d) }, err
}

// handle judges one delivery, runs it if it is to run, and settles it.
func (r *Runtime) handle(ctx context.Context, d *natsqueue.Delivery) {
	job := d.Job
	log := r.log.With("job_id", job.ID, "attempt", job.Attempt)
	if d.Tenant != "" {
		// Whose turn it was (docs/protocol.md §11): a name, never a key.
		log = log.With("tenant", d.Tenant)
	}
	switch {
	case d.Wakeup:
		r.settle(ctx, log, "wakeup", d.Ack(ctx))
		return
	}
	r.metrics.taken.WithLabelValues(string(d.Source)).Inc()
	ctx, span := r.startRun(ctx, d)
	defer span.End()
	// Held until settled: a death meanwhile is noted in its run record.
	held := ledgerJob(d)
	r.cfg.Ledger.Held(held)
	defer r.cfg.Ledger.Done(held)
	switch {
	case d.Malformed != nil:
		log.Error("malformed job; dead-lettering", "err", d.Malformed)
		r.giveUp(ctx, log, d, malformed(d.Malformed))
		return
	}
	rec, err := d.Record(ctx)
	if err != nil {
		log.Warn("could not read the job's run record; treating it as a suspect", "err", err)
	}
	a := arrival{attempt: job.Attempt, last: d.Last, expired: job.Expired(time.Now())}
	j := judge(a, rec, r.attempts)
	if n := j.record.Crash; n != nil && n.Delivery == job.Attempt-1 {
		log.Warn("the job's previous delivery died with its worker", "crash", n.String())
	}
	switch j.fate {
	case fateFinished:
		log.Warn("job already delivered its result on an earlier delivery whose ack went unconfirmed; acking it without running it",
			"finished_on", j.record.Finished)
		r.settle(ctx, log, "already_finished", d.Ack(ctx))
		return
	case fateExhausted:
		log.Error("job exhausted its attempts without finishing; dead-lettering",
			"failures", j.record.Failures, "crashes_alone", j.record.AloneCrashes)
		r.giveUp(ctx, log, d, crashReason(j.record, fmt.Sprintf("generation failed: the job crashed or timed out on %d workers", r.attempts)))
		return
	case fateLastDelivery:
		log.Error("job reached the consumer's last delivery; dead-lettering")
		r.giveUp(ctx, log, d, crashReason(j.record, fmt.Sprintf("generation failed: the job was delivered %d times without an answer", job.Attempt-1)))
		return
	case fateExpired:
		log.Info("job expired in the queue; dropping it")
		r.settle(ctx, log, "expired", d.Fail(ctx, genq.Errorf(genq.Timeout, "the job was not started before its deadline"), r.meta()))
		return
	}
	if job.Attempt > 1 {
		r.metrics.redeliveries.Inc()
	}
	r.run(ctx, log, d, a, j)
}

// run runs a delivery judged to run, and settles it.
func (r *Runtime) run(ctx context.Context, log *slog.Logger, d *natsqueue.Delivery, a arrival, j judgement) {
	job := d.Job
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if !job.Deadline.IsZero() {
		var stop context.CancelFunc
		jobCtx, stop = context.WithDeadline(jobCtx, job.Deadline)
		defer stop()
	}
	r.track(job.ID, cancel)
	defer r.untrack(job.ID)
	// Registered first, checked second: a cancel that lands in between is
	// passed to r.cancel by the watcher; one that came before is in the
	// watch's memory, so the check costs no round trip.
	if r.cancels.IsCancelled(job.ID, d.Queued) {
		log.Info("job was cancelled before it started; dropping it")
		r.settle(ctx, log, "cancelled", d.SettleCancelled(ctx, r.meta()))
		return
	}

	// Progress runs from the start until the job is settled: storing a
	// large result, flushing its reply and acking can outlast AckWait, and
	// a job that falls silent then is handed to a second worker while its
	// first run is still finishing.
	stopProgress := r.keepAlive(d, log)
	defer stopProgress()

	rec := j.record
	if j.alone {
		// An earlier run never reported its end. Its worker died, or lost
		// NATS and is still running it: for up to an AckWait, this delivery
		// (kept alive meanwhile) watches for that run's result, so that a
		// run only cut off can finish without the job running twice. A
		// worker killed between its reply and its ack leaves no result to
		// watch for: the caller, asked first, says it had its answer.
		if d.CallerGone(ctx) {
			log.Warn("job's caller no longer waits for it (an earlier run answered it before its worker died, or the caller gave up); acking it without running it")
			r.settle(ctx, log, "caller_gone", d.Ack(ctx))
			return
		}
		if rec.HandedBack != job.Attempt-1 && r.finishedElsewhere(ctx, d, r.conn.Settings().AckWait) {
			log.Warn("job finished on an earlier delivery cut off from NATS; acking it without running it")
			r.settle(ctx, log, "already_finished", d.Ack(ctx))
			return
		}
		log.Warn("job was running when its worker died; it will run alone")
		// It shares no step: the jobs pulled with it need not wait for it.
		genq.Arrive(ctx)
	}
	var res genq.Result
	err := r.gate.enter(jobCtx, j.alone)
	start := time.Now()
	wait := start.Sub(d.Queued)
	if err == nil && j.alone {
		// The run judged dead may have been cut off from NATS rather than
		// killed, and have finished while this delivery waited to run
		// alone: judged again now, such a job is acked, not run twice.
		fresh, rerr := d.Record(ctx)
		gone, gerr := d.Gone(ctx)
		if rerr == nil && fresh.Finished > 0 || gerr == nil && gone {
			r.gate.leave(true)
			log.Warn("job finished on its earlier delivery while this one waited to run alone; acking it without running it",
				"finished_on", fresh.Finished)
			r.settle(ctx, log, "already_finished", d.Ack(ctx))
			return
		}
		if rerr == nil {
			rec = fresh
			if rec.AloneAt > 0 { // as judge counts a run alone that never ended
				rec.AloneCrashes++
				rec.AloneAt = 0
			}
		}
	}
	if err == nil {
		if j.alone {
			// Written before the run: if this worker dies now, the next
			// delivery finds the run open and charges the job for it.
			rec.AloneAt = job.Attempt
			if perr := d.PutRecord(ctx, rec); perr != nil {
				log.Warn("could not record the run alone; a crash now is not charged", "err", perr)
			}
		}
		if merr := d.MarkRunning(jobCtx); merr != nil {
			log.Warn("could not mark the job running; it reads queued until done", "err", merr)
		}
		r.metrics.queueWait.Observe(wait.Seconds())
		r.cfg.Ledger.Running(ledgerJob(d))
		log.Info("job started", "queue_wait_ms", wait.Milliseconds(), "queue_wait_us", wait.Microseconds(), "alone", j.alone, "from", string(d.Source),
			"class", d.Class.String(), "seq", d.Seq)
		r.metrics.inFlight.Inc()
		res, err = generate(jobCtx, r.backend, d, r.progress(jobCtx, d, log))
		r.metrics.inFlight.Dec()
		// Left once the job is settled: a suspect that starts while this
		// job's result is still on its way could kill it unacked, and it
		// would run again.
		defer r.gate.leave(j.alone)
		r.metrics.duration.Observe(time.Since(start).Seconds())
	}
	ran := time.Since(start)

	if err != nil {
		failSpan(ctx, err)
		r.settleFailure(ctx, log, d, afterFailure(endingOf(jobCtx, err), a, rec, r.attempts, r.cfg.RetryDelay, rand.N[time.Duration]), err, ran)
		return
	}
	r.settleSuccess(ctx, log, d, res, wait, ran)
}

// settleSuccess replies the result of a run that waited wait in the queue
// and ran for ran, and acknowledges the job.
func (r *Runtime) settleSuccess(ctx context.Context, log *slog.Logger, d *natsqueue.Delivery, res genq.Result, wait, ran time.Duration) {
	log.Info("job generated", "run_ms", ran.Milliseconds())
	settleCost(d, res)
	meta := natsqueue.ReplyMeta{Worker: r.cfg.WorkerID, QueueWait: wait, RunTime: ran}
	rctx, span := r.tracer.Start(ctx, "reply", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.Int("genq.result.bytes", len(res.Data))))
	cerr := d.Complete(rctx, res, meta)
	if cerr != nil {
		span.SetStatus(codes.Error, "the result was not delivered")
	}
	span.End()
	if errors.Is(cerr, natsqueue.ErrUnsettled) {
		log.Error("could not deliver the result; retrying the job", "err", cerr)
		r.settle(ctx, log, "reply_failed", d.Retry(r.cfg.RetryDelay))
		return
	}
	log.Info("job done", "run_ms", ran.Milliseconds(), "bytes", len(res.Data))
	r.settle(ctx, log, "ok", cerr)
}

// settleFailure settles a run that ended in err as rv says.
func (r *Runtime) settleFailure(ctx context.Context, log *slog.Logger, d *natsqueue.Delivery, rv recovery, err error, ran time.Duration) {
	switch rv.next {
	case nextCancelled:
		log.Info("job cancelled by its caller while running", "run_ms", ran.Milliseconds())
		r.settle(ctx, log, "cancelled", d.SettleCancelled(ctx, r.meta()))
	case nextHandBack:
		log.Warn("job handed back: the worker is stopping")
		if rv.write {
			if perr := d.PutRecord(ctx, rv.record); perr != nil {
				log.Warn("could not record the hand-back", "err", perr)
			}
		}
		r.settle(ctx, log, "handed_back", d.Release())
	case nextTimeout:
		log.Info("job ran past its deadline", "run_ms", ran.Milliseconds())
		r.settle(ctx, log, "timeout", d.Fail(ctx, genq.WrapError(genq.Timeout, err, "the job was not done by its deadline"), r.meta()))
	case nextRefuse:
		log.Info("job refused by the model", "err", err)
		r.settle(ctx, log, "invalid", d.Fail(ctx, err, r.meta()))
	case nextGiveUp:
		log.Error("job failed on its last attempt; dead-lettering", "err", err)
		r.giveUp(ctx, log, d, genq.WrapError(genq.Internal, err,
			fmt.Sprintf("generation failed after %d attempts: %s", rv.attempts, genq.ErrorMessage(err))))
	case nextRetry:
		if rv.write {
			if perr := d.PutRecord(ctx, rv.record); perr != nil {
				log.Warn("could not record the failure; the next delivery runs alone", "err", perr)
			}
		}
		log.Warn("job failed; it will be retried", "err", err, "retry_in", rv.delay.String())
		r.settle(ctx, log, "retried", d.Retry(rv.delay))
	}
}

// keepAlive sends progress for d every third of AckWait until the returned
// stop is called.
func (r *Runtime) keepAlive(d *natsqueue.Delivery, log *slog.Logger) (stop func()) {
	tick := time.NewTicker(r.conn.Settings().AckWait / 3)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.touch(d, log, true)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { tick.Stop(); close(done); <-exited }) }
}

// progressEvery is how often, at most, a stored job's progress is written
// for GET /v1/jobs/{id}: one KV write, off the backend's goroutine.
const progressEvery = 500 * time.Millisecond

// progress is the backend's progress callback for d: it keeps the job
// alive and, for a stored job, writes how far it has got: the latest
// figure, at most every progressEvery, one write at a time and off the
// backend's goroutine, so that a slow NATS never holds up a step.
func (r *Runtime) progress(ctx context.Context, d *natsqueue.Delivery, log *slog.Logger) func(genq.Progress) {
	var (
		mu     sync.Mutex
		latest genq.Progress
		last   time.Time // when the last write began
		armed  bool      // a write is due or under way
	)
	var arm func() // with mu held
	arm = func() {
		armed = true
		time.AfterFunc(max(0, progressEvery-time.Since(last)), func() {
			mu.Lock()
			p := latest
			last = time.Now()
			mu.Unlock()
			if ctx.Err() != nil {
				return // the run is over: its mark says no more
			}
			if err := d.MarkProgress(ctx, p); err != nil {
				log.Debug("could not write the job's progress", "err", err)
			}
			mu.Lock()
			defer mu.Unlock()
			armed = false
			if latest != p && ctx.Err() == nil {
				arm() // it moved on during the write
			}
		})
	}
	return func(p genq.Progress) {
		r.touch(d, log, false)
		if !d.Job.Store || p.Total == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		latest = p
		if !armed {
			arm()
		}
	}
}

// touch sends progress for d and logs a failure.
func (r *Runtime) touch(d *natsqueue.Delivery, log *slog.Logger, force bool) {
	if err := d.Touch(force); err != nil {
		log.Warn("could not send progress", "err", err)
	}
}

// giveUp dead-letters the job and tells its caller. A job whose dead
// letter could not be written is kept: better redelivered than lost without
// a trace.
func (r *Runtime) giveUp(ctx context.Context, log *slog.Logger, d *natsqueue.Delivery, reason error) {
	err := d.GiveUp(ctx, reason, r.meta())
	if errors.Is(err, natsqueue.ErrUnsettled) {
		log.Error("could not dead-letter the job", "err", err)
		r.settle(ctx, log, "dead_letter_failed", d.Retry(r.cfg.RetryDelay))
		return
	}
	r.settle(ctx, log, "dead_lettered", err)
}

// malformed is what the producer of an unreadable job is told: the reason,
// which is about its own message, not about genq.
func malformed(err error) error {
	if genq.ErrorCode(err) == genq.Invalid {
		return genq.WrapError(genq.Invalid, err, "the job message is malformed: "+genq.ErrorMessage(err))
	}
	return genq.WrapError(genq.Invalid, err, "the job message is malformed: "+err.Error())
}

// ledgerJob is d as the supervisor's ledger names it.
func ledgerJob(d *natsqueue.Delivery) supervisor.Job {
	return supervisor.Job{ID: d.Job.ID, Seq: d.Seq, Attempt: d.Job.Attempt}
}

// meta is what the worker says about a job it did not run to a result.
func (r *Runtime) meta() natsqueue.ReplyMeta { return natsqueue.ReplyMeta{Worker: r.cfg.WorkerID} }

// settle counts the outcome and logs a failed acknowledgement.
func (r *Runtime) settle(ctx context.Context, log *slog.Logger, outcome string, err error) {
	r.metrics.jobs.WithLabelValues(outcome).Inc()
	traceOutcome(ctx, outcome, err)
	if err != nil {
		log.Warn("could not acknowledge the job", "outcome", outcome, "err", err)
	}
}

func (r *Runtime) track(id string, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	r.running[id] = cancel
	r.mu.Unlock()
}

func (r *Runtime) untrack(id string) {
	r.mu.Lock()
	delete(r.running, id)
	r.mu.Unlock()
}

// cancel ends a running job whose caller went away.
func (r *Runtime) cancel(id string) {
	r.mu.Lock()
	c, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		c(errCancelledByCaller)
	}
}

func (r *Runtime) heartbeats(ctx context.Context) { beatEvery(ctx, r.cfg.HeartbeatEvery, r.beat) }

// beatEvery calls beat at once, then every interval, until ctx ends.
func beatEvery(ctx context.Context, every time.Duration, beat func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sendBeat publishes hb, bounded so that a slow server does not hold
// back the next beat.
func sendBeat(ctx context.Context, conn *natsqueue.Conn, hb genq.Heartbeat, log *slog.Logger) {
	bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := conn.Beat(bctx, hb); err != nil && ctx.Err() == nil {
		log.Warn("heartbeat failed", "err", err)
	}
}

// withdrawBeat removes the worker's beat of variant once it stops, so
// that the api stops counting it before the beat's TTL runs out; ctx has
// usually ended by then, so only its values are kept.
func withdrawBeat(ctx context.Context, conn *natsqueue.Conn, variant genq.Variant, workerID string, log *slog.Logger) {
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := conn.RemoveBeat(rmCtx, variant, workerID); err != nil {
		log.Warn("could not withdraw heartbeat", "err", err)
	}
}

func (r *Runtime) beat(ctx context.Context) {
	r.mu.Lock()
	free := max(r.info.Slots, 1) - len(r.running)
	draining := r.draining
	r.mu.Unlock()
	hb := genq.Heartbeat{
		WorkerID: r.cfg.WorkerID, Variant: r.cfg.Variant, Device: r.info.Device, Model: r.info.Model,
		Slots: r.info.Slots, FreeSlots: free, Draining: draining, Routed: r.cfg.RouteByPrefix, StartedAt: r.started, At: time.Now(),
	}
	if r.info.Limits != (genq.Limits{}) {
		hb.Limits = &r.info.Limits
	}
	if m, ok := r.backend.(modelStater); ok {
		// A model of a fleet: loaded, loading or not, and the limits of
		// its last load.
		hb.ModelState, hb.LoadProgress, hb.Limits = m.ModelState()
		if d := m.Device(); d.Kind != "" {
			hb.Device = d // what its last load ran on
		}
	}
	sendBeat(ctx, r.conn, hb, r.log)
}

// finishedElsewhere watches, for up to within, whether an earlier delivery
// of d's job finished it (natsqueue.Delivery.Gone).
func (r *Runtime) finishedElsewhere(ctx context.Context, d *natsqueue.Delivery, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if gone, err := d.Gone(ctx); err == nil && gone {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}
