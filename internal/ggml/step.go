package ggml

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggml/sample"
	"github.com/genq/genq/internal/ggml/utf8stream"
)

// The scheduler runs continuous batching. One goroutine owns every sequence
// and the KV cache; Generate calls only hand it requests and wait.
//
// Each forward step carries one token for every decoding sequence and fills
// the rest of its budget (BatchSize) with prompt chunks, oldest request
// first, so a long prompt never stalls the sequences already decoding.
//
// Steps can be pipelined (Config.Pipeline): while step N computes, the
// graph of step N+1 is built. A decoding sequence's next input is the token
// step N will sample, not yet known, so step N+1 gets a placeholder that is
// filled in between sampling step N and starting step N+1. The price: a
// sequence that stops at step N still has a token in step N+1, whose result
// is thrown away, and its KV cells are freed only once no step in flight
// includes it. The overlap pays when a GPU computes and the CPU is idle; on
// a small CPU the builder competes with ggml's threads for cores and loses
// (docs/benchmarks.md), so there steps run one after the other, and the
// compute runs on the loop's own goroutine.

// request is one Generate call as the scheduler sees it.
type request struct {
	prompt    []int32
	sampler   *sample.Sampler
	submitted time.Time

	// The request's own limits: its answer's most tokens (0: the worker's),
	// its stop strings, and the candidates per row its sampler needs (0:
	// the whole row; sample.Params.Narrowed).
	maxTokens int
	stop      []string
	narrowK   int
	ignoreEOS bool // generate to maxTokens past end-of-turn tokens
	// logprobs asks for each token's log-probability, with topLogprobs of
	// the most likely at its position (logprobs.go). echo asks for the
	// prompt back, scored too when logprobs is set (scorePrompt).
	logprobs    bool
	topLogprobs int
	echo        bool
	// emit, when set, gets the answer's text piece by piece (stream.go).
	emit func(genq.TextPiece)

	// cancelled is set by Generate when its ctx ends; the scheduler reads it
	// at every step.
	cancelled atomic.Bool

	done chan struct{} // closed once result is final
	res  seqResult
	err  error
}

func newRequest(prompt []int32, s *sample.Sampler) *request {
	return &request{prompt: prompt, sampler: s, done: make(chan struct{})}
}

// sequence is an admitted request: it holds a cache slot.
type sequence struct {
	req  *request
	slot int

	pending []int32 // prompt tokens not yet in a step
	pos     int32   // position of the next token put in a step

	next     int32 // the last sampled token, when it is not in a step yet
	hasNext  bool
	awaiting bool // a step in flight ends this sequence's prompt or carries its last token: it samples
	inflight int  // steps in flight that carry tokens of this sequence

	generated int
	finished  bool // no more tokens: answered, or its caller went away
	text      strings.Builder
	utf8      utf8stream.Stream
	emitted   int                 // bytes of text handed to req.emit
	logprobs  []genq.TokenLogprob // the tokens', when the request asked for them
	emittedLP int                 // entries of logprobs handed to req.emit
	// promptScores score the prompt's tokens after the first, in order,
	// when the request echoes its prompt with logprobs.
	promptScores []*rowLogprob

	// isolate is the group a failed step's bisection put the sequence in
	// (0: none); redo says it starts over from its prompt once no step in
	// flight carries it (failStep).
	isolate int
	redo    bool
}

// step is one forward pass.
type step struct {
	ctx    ml.Context
	inputs ml.Tensor
	logits ml.Tensor
	tokens []int32

	// placeholders are the indices in tokens of decoding sequences' next
	// inputs, known only once the step before is sampled.
	placeholders map[*sequence]int
	// samples maps a sequence to its row of logits.
	samples map[*sequence]int
	// scores are the rows that score prompt tokens of the sequences that
	// echo their prompt with logprobs: each row scores the token after
	// the one it is computed at.
	scores map[*sequence][]scoreRow
	seqs   []*sequence
	draws  []draw

	// narrowed holds the device's top-k of each sampled row, when the step
	// narrows: ids [k, rows] and their logits [1, k, rows]. Only these cross
	// to the host, and the whole rows of the few sequences that need them.
	narrowed *narrowing

	// decodeOnly is set when the step carries no prompt token: one token
	// per sequence, the steady state benchmarks measure.
	decodeOnly                        bool
	planTime, computeTime, finishTime time.Duration

	floats []float32 // the logits that reached the host: k or vocab per row
	ids    []int32   // with narrowed: the candidates' token ids, k per row
	whole  []float32 // with narrowed: the whole rows, vocab each, of narrowed.wholeRow
	err    error
	done   chan struct{}
}

// scoreRow is a row of a step's logits and the prompt token it scores.
type scoreRow struct {
	row    int
	target int32
}

type narrowing struct {
	k         int
	ids, vals ml.Tensor
	// whole holds the rows, whole, of the sequences whose sampler needs
	// them (logprobs, penalties, a large top-k), and wholeRow where each
	// one's row is in it; nil when none does.
	whole    ml.Tensor
	wholeRow map[*sequence]int
}

type scheduler struct {
	engine *engine
	submit chan *request
	// exclusive runs a function on the loop while no sequence holds a
	// slot, so it may use the cache alone (GenerateUnbatched).
	exclusive chan func()
	quit      chan struct{}
	stopOnce  sync.Once
	stopped   chan struct{}

	waiting []*request
	active  []*sequence // in admission order
	window  window      // since the last throughput log line
	free    []int       // cache slots no sequence holds
	groups  int         // bisection groups made so far (failStep)
	// fault, when set (tests), fails a computed step it returns an error for.
	fault func(*step) error

	// stats are read by tests and benchmarks while the loop runs.
	stats struct {
		steps        atomic.Int64
		admitted     atomic.Int64
		maxSequences atomic.Int64 // most sequences one step carried
		mixedSteps   atomic.Int64 // narrowed steps that also brought whole rows
		tokens       atomic.Int64 // sampled
		all, decode  stepTimes    // every step; steps that carried no prompt token
	}
}

// stepTimes add up where steps spent their time. Plan and finish are the
// host's work; compute is ggml's, with the copy of the results to the host.
type stepTimes struct {
	steps        atomic.Int64
	planNanos    atomic.Int64 // building graphs: the batch, the cache's mask, the graph
	computeNanos atomic.Int64 // ggml computing them
	finishNanos  atomic.Int64 // sampling and decoding
}

func (t *stepTimes) add(st *step) {
	t.steps.Add(1)
	t.planNanos.Add(int64(st.planTime))
	t.computeNanos.Add(int64(st.computeTime))
	t.finishNanos.Add(int64(st.finishTime))
}

// StepTimes are the mean times of a kind of step: the host's work
// (planning, finishing) and ggml's compute with the copy of its results.
type StepTimes struct {
	Steps                 int64
	Plan, Compute, Finish time.Duration
}

// Host is the host's share of a step: what does not shrink with a faster
// device.
func (t StepTimes) Host() time.Duration { return t.Plan + t.Finish }

func (t *stepTimes) means() StepTimes {
	n := t.steps.Load()
	if n == 0 {
		return StepTimes{}
	}
	mean := func(a *atomic.Int64) time.Duration { return time.Duration(a.Load() / n) }
	return StepTimes{Steps: n, Plan: mean(&t.planNanos), Compute: mean(&t.computeNanos), Finish: mean(&t.finishNanos)}
}

func (s *scheduler) record(st *step) {
	s.stats.all.add(st)
	if st.decodeOnly {
		s.stats.decode.add(st)
	}
	s.stats.tokens.Add(int64(len(st.draws)))
	if now := time.Now(); now.Sub(s.window.start) >= throughputLogEvery {
		s.logThroughput(now)
	}
}

// throughputLogEvery is how often a busy scheduler logs its throughput and
// where its steps spend their time, as vLLM logs its own every 10 s.
const throughputLogEvery = 10 * time.Second

// window is what the last throughput log line saw.
type window struct {
	start         time.Time
	tokens, steps int64
	plan, compute int64
	finish        int64
}

func (s *scheduler) logThroughput(now time.Time) {
	w := window{start: now, tokens: s.stats.tokens.Load(), steps: s.stats.all.steps.Load(),
		plan: s.stats.all.planNanos.Load(), compute: s.stats.all.computeNanos.Load(), finish: s.stats.all.finishNanos.Load()}
	prev := s.window
	s.window = w
	steps := w.steps - prev.steps
	if prev.start.IsZero() || steps == 0 {
		return
	}
	ms := func(n int64) float64 { return float64(n) / float64(steps) / 1e6 }
	active := 0
	for _, seq := range s.active {
		if !seq.finished {
			active++
		}
	}
	s.engine.log.Info("text throughput",
		"tokens_per_s", float64(w.tokens-prev.tokens)/now.Sub(prev.start).Seconds(),
		"steps", steps, "active", active, "waiting", len(s.waiting),
		"plan_ms", ms(w.plan-prev.plan), "compute_ms", ms(w.compute-prev.compute), "finish_ms", ms(w.finish-prev.finish))
}

func newScheduler(e *engine) *scheduler {
	s := &scheduler{
		engine:    e,
		submit:    make(chan *request, e.slots),
		exclusive: make(chan func()),
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	for i := range e.slots {
		s.free = append(s.free, i)
	}
	return s
}

// exclusively runs fn on the loop once no sequence holds a slot, and waits
// for it. Requests that arrive meanwhile wait until fn returns.
func (s *scheduler) exclusively(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case s.exclusive <- func() { defer close(done); fn() }:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return errClosed
	}
	<-done
	return nil
}

func (s *scheduler) stop() {
	s.stopOnce.Do(func() { close(s.quit) })
	<-s.stopped
}

func (s *scheduler) loop() {
	// The loop runs ggml's compute in cgo calls on its own thread (one
	// compute thread for small models) between short stretches of Go. Kept
	// on one OS thread, it is not queued behind the process's other
	// goroutines each time a call returns: through HTTP on the 2-core
	// machine, the tiny model's c4 rose from 25.6-27.1k to 26.1-29.8k
	// generated characters per second (make run, Python client).
	runtime.LockOSThread()
	defer close(s.stopped)
	var inflight *step
	defer func() {
		if inflight != nil {
			<-inflight.done
			inflight.ctx.Close()
		}
		s.failAll(genq.WrapError(genq.Unavailable, errClosed, "the text model is shutting down"))
	}()

	end := func(st, next *step) {
		<-st.done
		t := time.Now()
		s.finish(st, next)
		st.finishTime = time.Since(t)
		st.ctx.Close()
		s.record(st)
	}
	for {
		if inflight != nil && !s.engine.pipeline {
			end(inflight, nil)
			inflight = nil
		}
		if !s.admit(inflight == nil) {
			return
		}
		t := time.Now()
		next, err := s.plan()
		if next != nil {
			next.planTime = time.Since(t)
		}
		if err != nil {
			s.fail(err)
			next = nil
		}
		if inflight != nil {
			end(inflight, next)
			inflight = nil
		}
		if next != nil {
			s.launch(next)
			inflight = next
		}
	}
}

// admit takes new requests into free slots. When idle is true and nothing
// is active, it blocks for the next request. It reports false once the
// scheduler must stop.
func (s *scheduler) admit(idle bool) bool {
	for {
		select {
		case <-s.quit:
			return false
		default:
		}
		if idle && len(s.active) == 0 && len(s.waiting) == 0 {
			// Every slot is free here: the cache holds only the shared prefix.
			select {
			case req := <-s.submit:
				s.waiting = append(s.waiting, req)
			case fn := <-s.exclusive:
				fn()
				continue
			case <-s.quit:
				return false
			}
		}
		// Take whatever else has arrived without waiting.
	drain:
		for {
			select {
			case req := <-s.submit:
				s.waiting = append(s.waiting, req)
			default:
				break drain
			}
		}
		s.release()
		for len(s.waiting) > 0 && len(s.free) > 0 {
			req := s.waiting[0]
			s.waiting = s.waiting[1:]
			if req.cancelled.Load() {
				continue
			}
			s.start(req)
		}
		if len(s.active) > 0 || !idle {
			return true
		}
		// Every waiting request was cancelled: wait again.
	}
}

// start gives req a slot, sharing the cached system prefix when its prompt
// begins with it. The lowest free slot: the decoding sequences' slots then
// stay packed, and the stream graph attends over the range they span.
func (s *scheduler) start(req *request) {
	i := slices.Index(s.free, slices.Min(s.free))
	slot := s.free[i]
	s.free = slices.Delete(s.free, i, i+1)
	seq := &sequence{req: req, slot: slot, pending: req.prompt}
	e := s.engine
	if n := e.prefixCopied(req); n > 0 {
		if err := e.graph.copyPrefix(e.prefixSeq(), slot, int32(n)); err == nil {
			seq.pending, seq.pos = req.prompt[n:], int32(n)
		}
	}
	s.active = append(s.active, seq)
	s.stats.admitted.Add(1)
}

// release frees the slots of finished sequences that no step in flight
// still writes to.
func (s *scheduler) release() {
	kept := s.active[:0]
	for _, seq := range s.active {
		if !seq.finished && seq.req.cancelled.Load() {
			seq.finished = true
		}
		if seq.redo && !seq.finished && seq.inflight == 0 {
			s.restart(seq)
		}
		if seq.finished && seq.inflight == 0 {
			if err := s.engine.graph.clear(seq.slot); err != nil {
				// Remove from 0 never shifts, so this cannot happen; if it
				// did, the slot must not be reused with stale cells.
				s.engine.log.Error("free cache slot", "slot", seq.slot, "err", err)
				continue
			}
			s.free = append(s.free, seq.slot)
			continue
		}
		kept = append(kept, seq)
	}
	clear(s.active[len(kept):])
	s.active = kept
}

// plan builds the next step's graph, or returns nil when no sequence has a
// token to feed.
func (s *scheduler) plan() (*step, error) {
	e := s.engine
	st := &step{placeholders: map[*sequence]int{}, samples: map[*sequence]int{}, done: make(chan struct{})}
	var positions []int32
	var seqIDs []int
	var outputs []int32
	add := func(seq *sequence, tok int32) {
		st.tokens = append(st.tokens, tok)
		positions = append(positions, seq.pos)
		seqIDs = append(seqIDs, seq.slot)
		seq.pos++
		if len(st.seqs) == 0 || st.seqs[len(st.seqs)-1] != seq {
			st.seqs = append(st.seqs, seq)
		}
	}
	sampleLast := func(seq *sequence) {
		st.samples[seq] = len(outputs)
		outputs = append(outputs, int32(len(st.tokens)-1))
		seq.awaiting = true
	}

	// While a failed step is bisected, only its current group runs.
	group := s.isolating()
	// Decoding sequences first: one token each.
	for _, seq := range s.active {
		if seq.finished || len(seq.pending) > 0 || seq.redo || seq.isolate != group {
			continue
		}
		switch {
		case seq.awaiting && seq.generated+1 < seq.maxTokens(e.maxNewTokens):
			// Its next token is being sampled from the step in flight.
			seq.awaiting = false
			add(seq, 0)
			st.placeholders[seq] = len(st.tokens) - 1
			sampleLast(seq)
		case seq.hasNext:
			seq.hasNext = false
			add(seq, seq.next)
			sampleLast(seq)
		}
	}
	// Then prompt chunks, oldest first, up to the step's budget.
	decoding := len(st.tokens)
	chunks := 0
	for _, seq := range s.active {
		budget := e.batchSize - len(st.tokens)
		if limit := e.graph.maxChunks(); budget <= 0 || limit > 0 && chunks == limit {
			break
		}
		if seq.finished || len(seq.pending) == 0 || seq.redo || seq.isolate != group {
			continue
		}
		n := min(budget, len(seq.pending))
		chunks++
		first := len(st.tokens)
		for _, tok := range seq.pending[:n] {
			add(seq, tok)
		}
		if seq.req.scorePrompt() {
			// Each token's row scores the prompt token after it; the last
			// prompt token's row is the one sampled.
			prompt := seq.req.prompt
			at := len(prompt) - len(seq.pending)
			for t := range n {
				if at+t+1 == len(prompt) {
					break
				}
				if st.scores == nil {
					st.scores = map[*sequence][]scoreRow{}
				}
				st.scores[seq] = append(st.scores[seq], scoreRow{row: len(outputs), target: prompt[at+t+1]})
				outputs = append(outputs, int32(first+t))
			}
		}
		seq.pending = seq.pending[n:]
		if len(seq.pending) == 0 {
			sampleLast(seq)
		}
	}
	if len(st.tokens) == 0 {
		return nil, nil
	}
	st.decodeOnly = len(st.tokens) == decoding
	for _, seq := range st.seqs {
		seq.inflight++
	}
	s.stats.steps.Add(1)
	if n := int64(len(st.seqs)); n > s.stats.maxSequences.Load() {
		s.stats.maxSequences.Store(n)
	}
	if len(outputs) == 0 {
		// A step of mid-prompt chunks samples nothing; it still asks for one
		// row, so the graph never has an empty output.
		outputs = append(outputs, int32(len(st.tokens)-1))
	}

	st.ctx = e.model.Backend().NewContext()
	st.inputs = st.ctx.Input().Empty(ml.DTypeI32, len(st.tokens))
	batch := input.Batch{
		Inputs:    st.inputs,
		Outputs:   st.ctx.Input().FromInts(outputs, len(outputs)),
		Positions: positions,
		Sequences: seqIDs,
	}
	st.ctx.SetBatchSize(len(st.tokens))
	logits, err := buildForward(e.graph, st.ctx, batch, false)
	if err != nil {
		st.ctx.Close()
		for _, seq := range st.seqs {
			seq.inflight--
		}
		return nil, err
	}
	st.logits = logits
	if k, whole := s.stepNarrowK(st); k > 0 && len(st.samples) >= e.narrowMinRows {
		st.narrowed = narrow(st.ctx, logits, k)
		if len(whole) > 0 {
			st.narrowed.keepWhole(st.ctx, logits, whole, st.samples)
			s.stats.mixedSteps.Add(1)
		}
	}
	return st, nil
}

// stepNarrowK is how many candidates per row st's graph hands the sampler:
// the most any of its narrowable rows needs, at least a few so ties go to
// the lower id as on the host, and at most the backend's narrowK, which the
// graphs were reserved for. The sequences whose sampler needs more, or the
// whole row, come back in whole: their rows cross whole beside the others'
// candidates, so one such request does not bring every row of the step to
// the host. When no row can be narrowed, k is 0.
func (s *scheduler) stepNarrowK(st *step) (k int, whole []*sequence) {
	most := s.engine.narrowK
	if most == 0 || len(st.scores) > 0 {
		return 0, nil // prompt scores need their rows whole, and so many are no few
	}
	k = min(4, most)
	narrowable := 0
	for seq := range st.samples {
		need := seq.req.narrowK
		if need == 0 || need > most {
			whole = append(whole, seq)
			continue
		}
		k = max(k, need)
		narrowable++
	}
	if narrowable == 0 {
		return 0, nil
	}
	return k, whole
}

// narrow adds the device's top-k to the step's graph: the ids of each row's
// k best logits, and those logits. Only they cross to the host, so the host
// work per step no longer grows with the vocabulary (128,256 for Llama 3:
// 33 MB of logits a step at 64 sequences).
func narrow(ctx ml.Context, logits ml.Tensor, k int) *narrowing {
	vocab, rows := logits.Dim(0), logits.Dim(1)
	ids := logits.TopK(ctx, k).Contiguous(ctx)
	vals := logits.Reshape(ctx, 1, vocab, rows).Rows(ctx, ids)
	ctx.Forward(ids, vals)
	return &narrowing{k: k, ids: ids, vals: vals}
}

// keepWhole adds to the step's graph a copy of the rows of seqs, whole.
func (n *narrowing) keepWhole(ctx ml.Context, logits ml.Tensor, seqs []*sequence, rowOf map[*sequence]int) {
	rows := make([]int32, len(seqs))
	n.wholeRow = make(map[*sequence]int, len(seqs))
	for i, seq := range seqs {
		rows[i] = int32(rowOf[seq])
		n.wholeRow[seq] = i
	}
	n.whole = logits.Rows(ctx, ctx.Input().FromInts(rows, len(rows)))
	ctx.Forward(n.whole)
}

// launch computes st, in the background when pipelining; st.done closes
// when its logits are readable.
func (s *scheduler) launch(st *step) {
	st.inputs.FromInts(st.tokens)
	if !s.engine.pipeline {
		// Nothing to overlap with: computing here saves two goroutine
		// hand-offs per step (15% of a tiny model's step in a profile).
		s.compute(st)
		return
	}
	go s.compute(st)
}

func (s *scheduler) compute(st *step) {
	defer close(st.done)
	// ggml reports a failed compute by panicking; one bad step must fail
	// its requests, not kill the worker.
	defer recoverError(&st.err)
	t := time.Now()
	if n := st.narrowed; n != nil {
		if n.whole != nil {
			st.ctx.Compute(n.ids, n.vals, n.whole)
			st.whole = n.whole.Floats()
		} else {
			st.ctx.Compute(n.ids, n.vals)
		}
		st.ids = int32s(n.ids.Bytes())
		st.floats = n.vals.Floats()
	} else {
		st.ctx.Compute(st.logits)
		st.floats = st.logits.Floats()
	}
	st.computeTime = time.Since(t)
}

// int32s reinterprets a tensor's little-endian bytes as int32s, without a
// copy (every platform ggml runs on is little-endian).
func int32s(b []byte) []int32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// finish samples the computed step and writes each token where it goes: the
// placeholder in next, or the sequence itself when next does not carry it.
func (s *scheduler) finish(st *step, next *step) {
	for _, seq := range st.seqs {
		seq.inflight--
	}
	if st.err == nil && s.fault != nil {
		st.err = s.fault(st)
	}
	if st.err != nil {
		s.failStep(st, fmt.Errorf("compute step: %w", st.err))
		return
	}
	s.scorePrompts(st)
	draws := st.draws[:0]
	for seq, row := range st.samples {
		seq.awaiting = false
		if seq.finished || seq.redo {
			continue
		}
		if seq.req.cancelled.Load() {
			seq.finished = true
			continue
		}
		draws = append(draws, draw{seq: seq, row: row})
	}
	st.draws = draws
	s.sample(st, draws)

	e := s.engine
	for _, d := range draws {
		seq := d.seq
		if d.err != nil {
			s.complete(seq, fmt.Errorf("sample: %w", d.err))
			continue
		}
		if seq.generated == 0 {
			seq.req.res.FirstToken = time.Since(seq.req.submitted)
		}
		if done, err := seq.accept(e, d.tok, d.logprob); done || err != nil {
			s.complete(seq, err)
			continue
		}
		if i, ok := next.placeholderOf(seq); ok {
			next.tokens[i] = d.tok
			seq.awaiting = true // next samples it
		} else {
			seq.next, seq.hasNext = d.tok, true
		}
	}
}

// draw is one sequence's token to sample from a step's row.
type draw struct {
	seq     *sequence
	row     int
	tok     int32
	logprob *rowLogprob // when the request asked for logprobs
	err     error
}

// parallelSampleFloats is the number of logits above which a step's rows
// are sampled on several goroutines: each sequence owns its sampler, so
// rows are independent. Below it the hand-off costs more than it saves.
const parallelSampleFloats = 1 << 20

// sample draws each row's token: from the device's candidates when the step
// narrowed, else from the whole row.
func (s *scheduler) sample(st *step, draws []draw) {
	vocab := st.logits.Dim(0)
	one := func(d *draw) {
		row := []float32(nil)
		switch n := st.narrowed; {
		case n == nil:
			row = st.floats[d.row*vocab : (d.row+1)*vocab]
		case n.wholeRow != nil:
			if r, ok := n.wholeRow[d.seq]; ok {
				row = st.whole[r*vocab : (r+1)*vocab]
			}
		}
		if row == nil {
			n := st.narrowed
			lo, hi := d.row*n.k, (d.row+1)*n.k
			d.tok, d.err = d.seq.req.sampler.SampleTop(st.ids[lo:hi], st.floats[lo:hi])
			return
		}
		if d.seq.req.logprobs {
			d.tok, d.logprob, d.err = sampleWithLogprob(d.seq.req, row)
			return
		}
		d.tok, d.err = d.seq.req.sampler.Sample(row)
	}
	workers := min(len(draws), runtime.GOMAXPROCS(0))
	// A row scored for logprobs costs a pass of exp over the vocabulary
	// (about 1 ms at 128,256 on the 2-core machine): a large one is worth
	// a goroutine of its own.
	scored := vocab >= parallelSampleFloats/64 && slices.ContainsFunc(draws, func(d draw) bool { return d.seq.req.logprobs })
	if len(st.floats)+len(st.whole) < parallelSampleFloats && !scored || workers < 2 {
		for i := range draws {
			one(&draws[i])
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(draws); i = int(next.Add(1)) - 1 {
				one(&draws[i])
			}
		})
	}
	wg.Wait()
}

func (st *step) placeholderOf(seq *sequence) (int, bool) {
	if st == nil {
		return 0, false
	}
	i, ok := st.placeholders[seq]
	return i, ok
}

// complete ends seq and hands its caller the answer or err.
func (s *scheduler) complete(seq *sequence, err error) {
	seq.finished = true
	req := seq.req
	if err != nil {
		req.err = fmt.Errorf("text generation: %w", err)
	} else {
		seq.text.WriteString(seq.utf8.Flush())
		seq.emitRest()
		req.res.Text = seq.text.String()
		req.res.PromptTokens = len(req.prompt)
		req.res.Tokens = seq.generated
		req.res.Logprobs = seq.logprobs
		if req.echo {
			req.res.PromptText, req.res.PromptLogprobs = s.engine.echoPrompt(req, seq.promptScores)
		}
	}
	close(req.done)
}

// failStep handles a step that failed to compute. Its graph writes only
// the cells of its own tokens, which belong to its sequences, so the other
// sequences go on untouched. Its sequences may hold anything in their
// cells: each starts over from its prompt (restart), its answer so far
// dropped (nothing of it has reached its caller yet). They are bisected:
// two halves that never share a step with anything else until every one
// of the half has finished, the halves one after the other. A sequence
// that fails every step it is in is thus cornered alone and gets err, and
// the others finish; when the failure came from the step as a whole (too
// large, say), the halves simply succeed.
func (s *scheduler) failStep(st *step, err error) {
	var seqs []*sequence
	for _, seq := range st.seqs {
		if !seq.finished && !seq.redo {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) == 0 {
		return // a step planned before the failure: its sequences start over already
	}
	s.engine.log.Error("text step failed", "err", err, "sequences", len(seqs))
	if len(seqs) == 1 {
		s.complete(seqs[0], err)
		return
	}
	half := (len(seqs) + 1) / 2
	for i, seq := range seqs {
		if i%half == 0 {
			s.groups++
		}
		seq.isolate, seq.redo = s.groups, true
	}
}

// isolating is the bisection group whose sequences alone may run now: the
// oldest with a sequence left, or 0 (everyone) when there is none.
func (s *scheduler) isolating() int {
	group := 0
	for _, seq := range s.active {
		if !seq.finished && seq.isolate > 0 && (group == 0 || seq.isolate < group) {
			group = seq.isolate
		}
	}
	return group
}

// restart puts seq back at the start of its prompt, with no cells and no
// answer, as start left it.
func (s *scheduler) restart(seq *sequence) {
	if seq.emitted > 0 {
		// Its caller already has part of the answer, which a new start
		// need not repeat: fail it (retryable), and let the stream's
		// receiver end with an error rather than contradicting text.
		s.complete(seq, errStreamRestarted)
		return
	}
	e := s.engine
	if err := e.graph.clear(seq.slot); err != nil {
		s.complete(seq, fmt.Errorf("restart after a failed step: %w", err))
		return
	}
	prompt := seq.req.prompt
	seq.pending, seq.pos = prompt, 0
	if n := e.prefixCopied(seq.req); n > 0 {
		if err := e.graph.copyPrefix(e.prefixSeq(), seq.slot, int32(n)); err == nil {
			seq.pending, seq.pos = prompt[n:], int32(n)
		}
	}
	seq.next, seq.hasNext, seq.awaiting = 0, false, false
	seq.generated, seq.redo = 0, false
	seq.logprobs, seq.emittedLP, seq.promptScores = nil, 0, nil
	seq.req.sampler.Restart()
	seq.text.Reset()
	seq.utf8 = utf8stream.Stream{}
}

// fail ends every active sequence with err: a step whose graph could not
// be built (plan) may have taken cache cells for any of them, so all start
// over elsewhere (the error is retryable). A step that failed to compute is
// bisected instead (failStep).
func (s *scheduler) fail(err error) {
	s.engine.log.Error("text step failed", "err", err)
	for _, seq := range s.active {
		if !seq.finished {
			s.complete(seq, err)
		}
	}
}

func (s *scheduler) failAll(err error) {
	for _, seq := range s.active {
		if !seq.finished {
			seq.finished = true
			seq.req.err = err
			close(seq.req.done)
		}
	}
	for _, req := range s.waiting {
		req.err = err
		close(req.done)
	}
	s.waiting = nil
drain:
	for {
		select {
		case req := <-s.submit:
			req.err = err
			close(req.done)
		default:
			break drain
		}
	}
}
