package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// Client publishes jobs and waits for their replies on one inbox shared by
// all of its jobs. The api uses one; so does genqctl submit.
type Client struct {
	conn  *Conn
	inbox string
	sub   *nats.Subscription
	// waitingSub answers workers that ask whether a job's reply is still
	// awaited (WaitingSubject).
	waitingSub *nats.Subscription
	class      Class // of every job it queues; see NewBatchClient
	// router, when set, sends interactive jobs to the worker that likely
	// holds their prefix (RouteBy).
	router *Router

	// looks and pacer look in the results store for jobs whose reply is
	// late (LookLate); polls paces the jobs that poll it.
	looks LateLooks
	pacer *lookPacer
	polls *lookPacer
	// lookIn makes one look (lookInStore; a test may make the store slow).
	lookIn func(context.Context, genq.Job) (*genq.ReceivedResult, bool, error)

	mu      sync.Mutex
	pending map[string]*waiter
	// swept is the count of reconnects whose sweep was made (sweep).
	swept atomic.Uint64
}

// waiter is a job that waits for its reply.
type waiter struct {
	reply chan *nats.Msg // buffered: holds the job's one reply
	// slot gets the time of the job's first look after a reconnect.
	slot chan time.Time
	// since is the client's count of reconnects when the job began to
	// wait: a reply can only have been lost in a later one.
	since uint64
}

// NewClient subscribes the client's inbox.
func NewClient(c *Conn) (*Client, error) {
	cl := &Client{conn: c, inbox: c.nc.NewRespInbox(), pending: make(map[string]*waiter)}
	cl.lookIn = cl.lookInStore
	cl.LookLate(DefaultLateLooks())
	cl.swept.Store(c.nc.Stats().Reconnects)
	sub, err := c.nc.Subscribe(cl.inbox+".*", cl.route)
	if err != nil {
		return nil, fmt.Errorf("subscribe inbox: %w", err)
	}
	// A reply can be large and many may arrive at once; never drop one for
	// want of buffer.
	if err := sub.SetPendingLimits(-1, 512<<20); err != nil {
		return nil, fmt.Errorf("inbox limits: %w", err)
	}
	cl.sub = sub
	if cl.waitingSub, err = c.nc.Subscribe(WaitingSubject(cl.inbox+".*"), cl.answerWaiting); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe inbox: %w", err)
	}
	return cl, nil
}

// answerWaiting tells a worker whether this client still waits for the
// reply to a job (WaitingSubject).
func (cl *Client) answerWaiting(m *nats.Msg) {
	id := strings.TrimSuffix(strings.TrimPrefix(m.Subject, cl.inbox+"."), ".waiting")
	cl.mu.Lock()
	_, waiting := cl.pending[id]
	cl.mu.Unlock()
	answer := "no"
	if waiting {
		answer = "yes"
	}
	_ = m.Respond([]byte(answer))
}

// NewBatchClient is NewClient for a producer whose jobs are all batch jobs
// (genqctl submit): its Run queues them as AsBatch does.
func NewBatchClient(c *Conn) (*Client, error) {
	cl, err := NewClient(c)
	if err != nil {
		return nil, err
	}
	cl.class = Batch
	return cl, nil
}

// Close unsubscribes the inbox.
func (cl *Client) Close() error {
	return errors.Join(cl.sub.Unsubscribe(), cl.waitingSub.Unsubscribe())
}

// route hands a reply to the caller waiting for its job. A second reply for
// the same job (a redelivery after a worker died between replying and
// acking) finds nobody waiting and is dropped: each caller gets one answer.
// A reply sent as a request (HeaderReceipt) is answered: taken when a
// caller had it, so the worker need not store it; gone when none waits.
func (cl *Client) route(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	cl.mu.Lock()
	w, ok := cl.pending[id]
	delete(cl.pending, id)
	cl.mu.Unlock()
	if ok {
		w.reply <- m
	}
	if m.Reply != "" {
		answer := "gone"
		if ok {
			answer = ReceiptTaken
		}
		_ = m.Respond([]byte(answer))
	}
}

// ReplySubject is where the client listens for the reply to job id.
func (cl *Client) ReplySubject(id string) string { return cl.inbox + "." + id }

// Run queues job, waits for its reply, and returns it. When ctx ends first
// the job is cancelled: a worker that has not started it drops it, and one
// running it stops. The error is a *genq.Error: Overloaded when the queue is
// full, Timeout at ctx's deadline, Canceled when ctx is cancelled, or the
// worker's own error.
func (cl *Client) Run(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error) {
	job.ReplyTo = cl.ReplySubject(job.ID)
	w := &waiter{reply: make(chan *nats.Msg, 1), slot: make(chan time.Time, 1), since: cl.conn.nc.Stats().Reconnects}
	cl.mu.Lock()
	cl.pending[job.ID] = w
	cl.mu.Unlock()
	forget := func() {
		cl.mu.Lock()
		delete(cl.pending, job.ID)
		cl.mu.Unlock()
	}

	subject, routed := cl.subjectOf(ctx, job)
	defer routed()
	dup, err := cl.conn.publish(ctx, job, cl.class, subject, pubAckWait, publishGiveUp, true)
	if err != nil {
		forget()
		// The server may have queued the job before the PubAck was lost, and
		// a worker may even be running it: without the mark it would run for
		// nobody. A frozen server may even store it after the caller has
		// been told the queue is unavailable, so the mark is one that counts
		// whenever the job is queued. Every way out of Run without an
		// answer puts a mark.
		cl.conn.Abandon(job.ID)
		if ctx.Err() != nil {
			return nil, ctxError(ctx)
		}
		return nil, err
	}
	return cl.await(ctx, job, w, dup, forget)
}

// await waits for the reply to job on ch, or finds its result in the store.
//
// The reply is a core NATS message: if this client was disconnected when
// it came, it is gone, and the stored result is the way to get it. A
// duplicate was queued by an earlier run of the same producer, whose inbox
// is gone too. In both cases, poll the results store. A reply can also be
// lost while this client stays connected (its worker died between storing
// and sending it again): a job waiting long without one is looked for in
// the store now and then (LateLooks), paced over all of the client's jobs.
// The polls are paced too, by a pacer of their own: after a reconnect,
// every waiting job looks once (sweep) before any looks twice.
func (cl *Client) await(ctx context.Context, job genq.Job, w *waiter, polling bool, forget func()) (*genq.ReceivedResult, error) {
	check := time.NewTicker(reconnectCheck)
	defer check.Stop()
	var late *lateLook
	if polling {
		late = newPollLook(ctx, cl.looks.polls(), cl.polls, time.Time{})
	} else {
		late = newLateLook(ctx, cl.looks, cl.pacer)
	}
	defer func() { late.stop() }()
	// A look runs apart from this wait, so a store slow to answer (its
	// leader gone) holds back no reply that comes meanwhile.
	var look *storeLook
	defer func() { look.abandon() }()
	poll := func(slot time.Time) {
		if !polling || !slot.IsZero() {
			// A look of the old schedule gives way: come back, it would
			// rearm the new one, whose first look then went unpaced.
			late.stop()
			look.abandon()
			look = nil
			late = newPollLook(ctx, cl.looks.polls(), cl.polls, slot)
		}
		polling = true
	}
	for {
		select {
		case m := <-w.reply:
			r, err := cl.conn.decodeReply(ctx, m, !job.Store)
			if genq.ErrorCode(err) == genq.Unavailable && ctx.Err() == nil {
				// The reply names a stored result the store would not give
				// now: the job is done, so fetch it again rather than fail.
				cl.conn.log.Warn("could not read a stored result; polling for it", "job_id", job.ID, "err", err)
				poll(time.Time{})
				continue
			}
			// A reply sent as a request was confirmed by route, and the
			// worker stored nothing to delete.
			if err == nil && !job.Store && r.Body != nil && m.Header.Get(HeaderObject) == "" && m.Reply == "" {
				cl.conn.dropLater(job.ID)
			}
			return r, err
		case <-check.C:
			cl.sweep(time.Now())
		case slot := <-w.slot:
			poll(slot)
		case now := <-late.C():
			if look != nil || !late.fired(now) {
				continue // a look is on its way, or this one's slot comes later
			}
			look = cl.startLook(ctx, job)
		case o := <-look.outcome():
			look = nil
			if o.found {
				forget()
				if !polling {
					cl.conn.log.Info("no reply came; took the result from the results store", "job_id", job.ID, "err", o.err)
				}
				return o.r, o.err
			}
			late.again(time.Now())
		case <-ctx.Done():
			forget()
			cl.conn.Cancel(job.ID)
			return nil, ctxError(ctx)
		}
	}
}

// reconnectCheck is how often a waiting job checks whether the client
// reconnected.
const reconnectCheck = 500 * time.Millisecond

// sweep gives every job waiting when the client reconnected a slot for
// its first look in the store, all in one pass: the pacer hands out slots
// in turn, so each job looks once before any looks twice. A job whose
// earlier slot has not come keeps it.
func (cl *Client) sweep(now time.Time) {
	n := cl.conn.nc.Stats().Reconnects
	if n <= cl.swept.Load() {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if n <= cl.swept.Load() {
		return // another job's check swept
	}
	cl.swept.Store(n)
	for _, w := range cl.pending {
		// A job that began to wait after the reconnect (swept late, as
		// none waited then) lost no reply to it.
		if w.since < n && len(w.slot) == 0 {
			w.slot <- cl.polls.reserve(now)
		}
	}
}

// storeLook is one look in the results store for a job's result, made
// beside the wait for its reply.
type storeLook struct {
	done   chan lookOutcome
	cancel context.CancelFunc
}

// lookOutcome is what a look found (lookInStore).
type lookOutcome struct {
	r     *genq.ReceivedResult
	found bool
	err   error
}

// startLook looks in the store for job's result in a goroutine of its own.
func (cl *Client) startLook(ctx context.Context, job genq.Job) *storeLook {
	ctx, cancel := context.WithCancel(ctx)
	l := &storeLook{done: make(chan lookOutcome, 1), cancel: cancel}
	go func() {
		r, found, err := cl.lookIn(ctx, job)
		l.done <- lookOutcome{r, found, err}
	}()
	return l
}

// outcome delivers the look's outcome; nil (never) when no look is made.
func (l *storeLook) outcome() <-chan lookOutcome {
	if l == nil {
		return nil
	}
	return l.done
}

// abandon stops a look whose outcome nobody wants, and closes what it
// found: a result not read whole is not deleted, and its TTL removes it.
func (l *storeLook) abandon() {
	if l == nil {
		return
	}
	l.cancel()
	go func() {
		if o := <-l.done; o.r != nil && o.r.Body != nil {
			o.r.Body.Close()
		}
	}()
}

// lookInStore polls the results store for job's result: found is false
// when there is none yet, or the store did not answer and may at the next
// look, or the look failed as ctx ended. A result found is delivered as its reply would be (an error
// result as the error); read whole and closed, one of a job without
// store is deleted, as nobody will fetch it again.
func (cl *Client) lookInStore(ctx context.Context, job genq.Job) (*genq.ReceivedResult, bool, error) {
	r, err := cl.conn.pollResult(ctx, job.ID, !job.Store)
	switch code := genq.ErrorCode(err); {
	case code == genq.NotFound:
		return nil, false, nil
	case code == genq.Unavailable && ctx.Err() == nil:
		// A store that fails now (NATS restarting, JetStream not yet
		// ready) may answer at the next poll; giving up would leave the
		// job running for nobody, and the caller's retry would run it
		// twice.
		cl.conn.log.Debug("results store unavailable; polling again", "job_id", job.ID, "err", err)
		return nil, false, nil
	case code == genq.Unavailable:
		// The caller's ctx ended during the look, which is why it failed:
		// await's own case for it answers a timeout and cancels the job.
		return nil, false, nil
	}
	return r, true, err
}

// ctxError is the genq error for a job whose caller's ctx has ended.
func ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return genq.WrapError(genq.Timeout, ctx.Err(), "the job was not done by its deadline")
	}
	return genq.WrapError(genq.Canceled, ctx.Err(), "the request was cancelled")
}

// LookLate sets when the client looks in the results store for a job whose
// reply has not come (LateLooks). Set it before the first Run.
func (cl *Client) LookLate(l LateLooks) {
	if !(l.PollsPerSecond > 0) {
		// The polls cannot be turned off, and unpaced they are what
		// the pacer is for: a burst of a look per waiting job.
		l.PollsPerSecond = DefaultLateLooks().PollsPerSecond
	}
	cl.looks, cl.pacer, cl.polls = l, newLookPacer(l.PerSecond), newLookPacer(l.PollsPerSecond)
}

// RouteBy makes the client publish each interactive job with an affinity
// key to the worker r picks, and the others as before.
func (cl *Client) RouteBy(r *Router) { cl.router = r }

// subjectOf is the subject of job: a worker's, or "" for its class's (the
// shared one, or its tenant's). A tenant's job is not routed: a worker
// pulls its own subject before any other, so routed jobs would skip the
// tenants' turns, and a tenant sending most of the load would get most
// of the routed slots (docs/protocol.md §11).
func (cl *Client) subjectOf(ctx context.Context, job genq.Job) (string, func()) {
	if _, tenanted := genq.ShareOf(ctx); tenanted || cl.router == nil || cl.class != Interactive {
		return "", func() {}
	}
	return cl.router.route(job)
}

// chunkBuffer is how many chunks of one job may wait for their producer;
// beyond it a chunk is dropped, and the gap ends the stream cleanly rather
// than blocking the connection's delivery.
const chunkBuffer = 4096

// RunStream is Run for a job whose text is wanted as it is generated: emit
// gets each new piece, in order, and the pieces join into the answer's
// text and log-probabilities, which RunStream returns as Run does. When
// the stream cannot be continued consistently (a worker died after some
// text was forwarded, a chunk was lost) it returns an Unavailable error
// and cancels the job. An error from emit (its client went away) cancels
// the job too.
func (cl *Client) RunStream(ctx context.Context, job genq.Job, emit func(genq.TextPiece) error) (*genq.ReceivedResult, error) {
	var f follower
	return cl.runChunked(ctx, job, func(m *nats.Msg) error {
		piece, err := f.chunk(m)
		if err == nil && (piece.Text != "" || piece.Reasoning != "" || len(piece.Logprobs) > 0) {
			err = emit(piece)
		}
		return err
	}, func(a *genq.ReceivedResult) error {
		// Chunks still on their way are made up from the answer.
		rest, err := f.final(a)
		if err == nil && (rest.Text != "" || rest.Reasoning != "" || len(rest.Logprobs) > 0) {
			err = emit(rest)
		}
		return err
	})
}

// RunImageStream is Run for an image job whose previews are wanted as they
// are made: emit gets each, in the order of their indexes. A preview lost
// on its way, or one a later run of the job makes again, is skipped: the
// final image is the answer. An error from emit (its client went away)
// cancels the job.
func (cl *Client) RunImageStream(ctx context.Context, job genq.Job, emit func(genq.ImagePiece) error) (*genq.ReceivedResult, error) {
	next := 0 // the lowest index not yet forwarded
	return cl.runChunked(ctx, job, func(m *nats.Msg) error {
		index, err := strconv.Atoi(m.Header.Get(HeaderPartial))
		if err != nil || index < next {
			return nil
		}
		next = index + 1
		return emit(genq.ImagePiece{Index: index, ContentType: m.Header.Get(HeaderContentType), Data: m.Data})
	}, func(*genq.ReceivedResult) error { return nil })
}

// runChunked runs job as Run does, with its worker publishing chunks:
// forward gets each chunk as it comes, and final the answer once every
// chunk that came before it was forwarded. An error from either cancels
// the job and is returned.
func (cl *Client) runChunked(ctx context.Context, job genq.Job, forward func(*nats.Msg) error, final func(*genq.ReceivedResult) error) (*genq.ReceivedResult, error) {
	job.Stream = true
	chunks := make(chan *nats.Msg, chunkBuffer)
	// Subscribed before the job is published, on the same connection: the
	// server knows of the interest before any worker can send a chunk.
	sub, err := cl.conn.nc.ChanSubscribe(ChunkSubject(cl.ReplySubject(job.ID)), chunks)
	if err != nil {
		return nil, genq.WrapError(genq.Unavailable, err, "the queue is unavailable")
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, 64<<20)

	// Run waits for the reply and cancels the job when runCtx ends.
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	type outcome struct {
		a   *genq.ReceivedResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		a, err := cl.Run(runCtx, job)
		done <- outcome{a, err}
	}()
	for {
		select {
		case m := <-chunks:
			if err := forward(m); err != nil {
				stop(err)
				if o := <-done; o.err == nil {
					o.a.Body.Close()
				}
				return nil, err
			}
		case o := <-done:
			if o.err != nil {
				return nil, o.err
			}
			// Chunks that came before the reply go first.
			for drained := false; !drained; {
				select {
				case m := <-chunks:
					if err := forward(m); err != nil {
						o.a.Body.Close()
						return nil, err
					}
				default:
					drained = true
				}
			}
			if err := final(o.a); err != nil {
				return nil, err
			}
			return o.a, nil
		}
	}
}
