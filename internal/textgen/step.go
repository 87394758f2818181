package textgen

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen/sample"
)

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
	decodeOnly bool
	took       stepDurations

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

// plan builds the next step's graph, or returns nil when no sequence has a
// token to feed.
func (s *scheduler) plan() (*step, error) {
	tm := s.model
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
		case seq.awaiting && !seq.req.promptOnly && seq.generated+1 < seq.maxTokens(tm.maxNewTokens):
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
		budget := tm.batchSize - len(st.tokens)
		if limit := tm.graph.maxChunks(); budget <= 0 || limit > 0 && chunks == limit {
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

	st.ctx = tm.model.Backend().NewContext()
	st.inputs = st.ctx.Input().Empty(ml.DTypeI32, len(st.tokens))
	batch := input.Batch{
		Inputs:    st.inputs,
		Outputs:   st.ctx.Input().FromInts(outputs, len(outputs)),
		Positions: positions,
		Sequences: seqIDs,
	}
	st.ctx.SetBatchSize(len(st.tokens))
	logits, err := buildForward(tm.graph, st.ctx, batch, false)
	if err != nil {
		st.ctx.Close()
		for _, seq := range st.seqs {
			seq.inflight--
		}
		return nil, err
	}
	st.logits = logits
	if k, whole := stepNarrowK(st, tm.narrowK); k > 0 && len(st.samples) >= tm.narrowMinRows {
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
// the lower id as on the host, and at most most (the model's narrowK, which
// the graphs were reserved for). The sequences whose sampler needs more, or
// the whole row, come back in whole: their rows cross whole beside the
// others' candidates, so one such request does not bring every row of the
// step to the host. When no row can be narrowed, k is 0.
func stepNarrowK(st *step, most int) (k int, whole []*sequence) {
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

// launch computes st, in the background when pipelining; st.done closes
// when its logits are readable.
func (s *scheduler) launch(st *step) {
	st.inputs.FromInts(st.tokens)
	if !s.model.pipeline {
		// Nothing to overlap with: computing here saves two goroutine
		// hand-offs per step, a large share of a small model's step
		// (docs/benchmarks.md).
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
	st.took.compute = time.Since(t)
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
		s.failStep(st.seqs, fmt.Errorf("compute step: %w", st.err))
		return
	}
	st.scorePrompts()
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
		if seq.req.promptOnly {
			// Its prompt is scored: nothing to sample.
			seq.finishAs(genq.FinishLength)
			seq.complete(s.model, nil)
			continue
		}
		draws = append(draws, draw{seq: seq, row: row})
	}
	st.draws = draws
	s.sample(st, draws)

	tm := s.model
	for _, d := range draws {
		seq := d.seq
		if d.err != nil {
			seq.complete(s.model, fmt.Errorf("sample: %w", d.err))
			continue
		}
		if seq.generated == 0 {
			seq.req.res.FirstToken = time.Since(seq.req.submitted)
		}
		if done, err := seq.accept(tm, d.tok, d.logprob); done || err != nil {
			seq.complete(s.model, err)
			continue
		}
		seq.fed = append(seq.fed, d.tok) // its cells will hold it
		if i, ok := next.placeholderOf(seq); ok {
			next.tokens[i] = d.tok
			seq.awaiting = true // next samples it
		} else {
			seq.next, seq.hasNext = d.tok, true
		}
	}
}

// scorePrompts scores the prompt tokens st's rows were asked for, before
// sampling changes any row. Large rows are scored on goroutines of their
// own, as sampled rows with logprobs are.
func (st *step) scorePrompts() {
	if len(st.scores) == 0 {
		return
	}
	vocab := st.logits.Dim(0)
	var wg sync.WaitGroup
	for seq, rows := range st.scores {
		if seq.finished {
			continue
		}
		scores := make([]*rowLogprob, len(rows))
		for i, r := range rows {
			score := func() {
				row := st.floats[r.row*vocab : (r.row+1)*vocab]
				logSumExp, top := sample.RowLogprobs(row, seq.req.topLogprobs)
				scores[i] = &rowLogprob{logprob: float64(row[r.target]) - logSumExp, top: top}
			}
			if vocab >= parallelSampleFloats/64 {
				wg.Go(score)
			} else {
				score()
			}
		}
		wg.Wait()
		seq.promptScores = append(seq.promptScores, scores...)
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
		if row == nil && d.seq.req.constraint.masks() {
			// Never drawn unmasked: the row of a masked request crosses whole.
			d.err = errConstrainedRowNarrowed
			return
		}
		if row == nil {
			n := st.narrowed
			lo, hi := d.row*n.k, (d.row+1)*n.k
			d.tok, d.err = d.seq.req.sampler.SampleTop(st.ids[lo:hi], st.floats[lo:hi])
			return
		}
		if d.seq.req.constraint.masks() {
			d.tok, d.logprob, d.err = sampleMasked(d.seq.req, row)
			return
		}
		if d.seq.req.logprobs {
			d.tok, d.logprob, d.err = sampleWithLogprob(d.seq.req.sampler, d.seq.req.topLogprobs, row)
			return
		}
		d.tok, d.err = d.seq.req.sampler.Sample(row)
	}
	workers := min(len(draws), runtime.GOMAXPROCS(0))
	// A row scored for logprobs costs a pass of exp over the vocabulary
	// (docs/text.md): a large one is worth a goroutine of its own.
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
