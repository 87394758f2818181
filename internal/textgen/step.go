package textgen

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen/sample"
)

// step is one decoding step: a batch for the engine, and what to do with
// the logits it leaves.
type step struct {
	// samples maps a sequence to the batch index of the token whose row it
	// samples.
	samples map[*sequence]int
	// scores are the rows that score prompt tokens of the sequences that
	// echo their prompt with logprobs: each row scores the token after the
	// one it is computed at.
	scores map[*sequence][]scoreRow
	seqs   []*sequence
	draws  []draw
	tokens int
	// pads are the tokens put in idle slots between busy ones (padGaps),
	// whose cells are forgotten once the step is computed.
	pads []pad

	// decodeOnly is set when the step carries no prompt token: one token
	// per sequence, the steady state benchmarks measure.
	decodeOnly bool
	took       stepDurations
	err        error
}

// scoreRow is a row of a step's logits (its token's batch index) and the
// prompt token it scores.
type scoreRow struct {
	row    int
	target int32
}

// plan fills the model's batch with the next step, or returns nil when no
// sequence has a token to feed.
//
// What goes in is chosen first: one token for every decoding sequence, then
// prompt chunks, oldest request first, up to the step's budget. It is then
// laid out in the batch by slot, each sequence's tokens together. With a
// stream of cells per slot, llama.cpp computes a batch in parts (ubatches)
// of sequences whose ids follow one another in the batch's order, so this
// order makes one part of a step whose slots follow one another.
func (s *scheduler) plan() (*step, error) {
	tm := s.model
	st := &step{samples: map[*sequence]int{}}

	// While a failed step is bisected, only its current group runs.
	group := s.isolating()
	now := time.Now()
	sitOut := s.shares.sitOut(s.working(group), now)
	parts, prompts := s.choose(group, sitOut)
	if len(parts) == 0 && sitOut != nil {
		// The tenants that step had nothing to feed this time (a sequence
		// between tokens): the others go on rather than wait.
		sitOut = nil
		parts, prompts = s.choose(group, nil)
	}
	if len(parts) == 0 {
		return nil, nil
	}
	if s.shares != nil {
		for _, p := range parts {
			s.shares.use(p.seq.req.tenant, len(p.tokens), now)
		}
		if sitOut != nil {
			s.satOut++
		}
	}
	slices.SortStableFunc(parts, func(a, b part) int { return a.seq.slot - b.seq.slot })

	// The cells the step's longest sequence will hold: a pad may not make
	// the pass attend over more (padGaps).
	longest := 0
	for _, p := range parts {
		longest = max(longest, int(p.seq.pos)+len(p.tokens))
	}
	b := tm.batch
	b.Clear()
	for i, p := range parts {
		seq := p.seq
		st.seqs = append(st.seqs, seq)
		if i > 0 {
			if err := s.padGaps(st, parts[i-1].seq.slot, seq.slot, longest); err != nil {
				return nil, err
			}
		}
		if p.decode {
			i, err := b.Add(p.tokens[0], int(seq.pos), seq.slot, true)
			if err != nil {
				return nil, err
			}
			seq.pos++
			st.samples[seq] = i
			continue
		}
		last := len(seq.pending) == len(p.tokens)
		scored := seq.req.scorePrompt()
		prompt := seq.req.prompt
		at := len(prompt) - len(seq.pending)
		for t, tok := range p.tokens {
			// Each token's row scores the prompt token after it; the last
			// prompt token's row is the one sampled.
			end := last && t == len(p.tokens)-1
			score := scored && !end
			i, err := b.Add(tok, int(seq.pos), seq.slot, end || score)
			if err != nil {
				return nil, err
			}
			seq.pos++
			if score {
				if st.scores == nil {
					st.scores = map[*sequence][]scoreRow{}
				}
				st.scores[seq] = append(st.scores[seq], scoreRow{row: i, target: prompt[at+t+1]})
			}
			if end {
				st.samples[seq] = i
			}
		}
		seq.pending = seq.pending[len(p.tokens):]
	}
	st.tokens = b.Len()
	st.decodeOnly = prompts == 0
	s.stats.steps.Add(1)
	if n := int64(len(st.seqs)); n > s.stats.maxSequences.Load() {
		s.stats.maxSequences.Store(n)
	}
	return st, nil
}

// part is what one sequence puts in a step: its next token, or a chunk of
// its prompt.
type part struct {
	seq    *sequence
	tokens []int32
	decode bool
}

// choose picks what goes in a step of group: one token for every decoding
// sequence, then prompt chunks, oldest first, up to the step's budget,
// leaving out the tenants in sitOut; prompts is the prompt tokens chosen.
// A step that prefills rideAfter prompt tokens or more takes sat-out
// tenants' decoding tokens too, up to one for every rideShare of its
// tokens: beside a long prompt's chunk they cost it little, and their
// streams do not stall through the steps of a long prompt of the tenant
// under its share. A short prompt's step is one, and is left its own.
func (s *scheduler) choose(group int, sitOut map[string]bool) (parts []part, prompts int) {
	budget := s.model.batchSize
	// decodes adds up to most decoding tokens, of the tenants sitting out
	// or of the others.
	decodes := func(most int, satOut bool) {
		for _, seq := range s.active {
			if budget <= 0 || most <= 0 {
				return
			}
			if seq.finished || len(seq.pending) > 0 || seq.redo || seq.isolate != group || !seq.hasNext || sitOut[seq.req.tenant] != satOut {
				continue
			}
			seq.hasNext = false
			parts = append(parts, part{seq: seq, tokens: []int32{seq.next}, decode: true})
			budget--
			most--
		}
	}
	decodes(len(s.active), false)
	decoding := len(parts)
	// Then prompt chunks, oldest first, up to the step's budget: long
	// prompts within sharedPrompts, and short ones beside them.
	long := false
	for _, seq := range s.active {
		if budget <= 0 {
			break
		}
		if seq.finished || len(seq.pending) == 0 || seq.redo || seq.isolate != group || sitOut[seq.req.tenant] {
			continue
		}
		if len(seq.pending) > shortPrompt {
			if long && prompts+len(seq.pending) > sharedPrompts {
				continue
			}
			long = true
		}
		n := min(budget, len(seq.pending))
		parts = append(parts, part{seq: seq, tokens: seq.pending[:n]})
		budget -= n
		prompts += n
	}
	if sitOut != nil && prompts >= rideAfter {
		decodes((decoding+prompts)/rideShare, true)
	}
	return parts, prompts
}

// rideShare is how many of a prompt step's tokens carry one decoding
// token of a tenant that sits out (choose): at most an eighth more rows;
// rideAfter is the fewest prompt tokens a step needs to carry any.
const (
	rideShare = 8
	rideAfter = sharedPrompts
)

// working is the weight of each tenant with a sequence in group that has
// a token to step, those stepShare may have sit out; nil when stepShare
// is off or they are of one tenant (every step without keys: no map is
// made for it).
func (s *scheduler) working(group int) map[string]float64 {
	if s.shares == nil {
		return nil
	}
	var first *request
	var out map[string]float64
	for _, seq := range s.active {
		if seq.finished || seq.redo || seq.isolate != group || !seq.hasNext && len(seq.pending) == 0 {
			continue
		}
		switch {
		case first == nil:
			first = seq.req
		case out != nil:
			out[seq.req.tenant] = seq.req.weight
		case seq.req.tenant != first.tenant:
			out = map[string]float64{first.tenant: first.weight, seq.req.tenant: seq.req.weight}
		}
	}
	return out
}

// shortPrompt and sharedPrompts decide which prompts that wait share a
// step. A prompt of up to shortPrompt tokens left (a burst of new chats)
// rides beside any other; longer ones share a step while their tokens add
// up to sharedPrompts at most, oldest first, and wait for the next step
// otherwise. Four next turns of 180 to 225 tokens that arrive together (four
// conversations) then get their first tokens after one, two, three and
// four prompts' work, rather than all four after all of it: the same work,
// the first answers sooner (time to first token at turn 8 against
// llama-server 0.48–0.67× before this rule, 0.34–0.44× with it). New
// chats of about 100 tokens go two or three a step: one at a time, eight
// of them took 536 ms to all have a first token, and decoding them ran at
// 0.94× llama-server's tokens per second; shared, 330–366 ms and 1.02×,
// as each step also computes the decoding rows in a pass of their own.
const (
	shortPrompt   = 64
	sharedPrompts = 256
)

// kvPadding is llama.cpp's: the cells a pass attends over are rounded up
// to a multiple of it (llama_kv_cache::get_n_kv).
const kvPadding = 256

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// pad is a token in an idle slot at the position after its cells.
type pad struct{ slot, pos int }

// padGaps puts a token in every idle slot between lo and hi, the slots of
// two of the step's sequences next to each other in its order, when each
// slot has a stream of its own. llama.cpp computes such a batch in parts
// (split_equal, sequential): it walks the batch in order and takes a
// sequence into the part only when its id is one more than the last one
// taken, so a step of slots 0, 3 and 5 would run as three forward passes,
// each reading every weight. One token in slots 1, 2 and 4, each placed
// in the batch between its neighbours, makes it one pass of six rows,
// which on a CPU or a GPU costs about what a pass of three does (decoding
// reads weights; it barely computes). A pad's cell is written after what
// the slot holds, cached cells included, and forgotten once the step is
// computed; its row is never read.
//
// A pass attends over as many cells in every stream as the longest of them
// holds, so a pad goes only into a slot that holds no more cells than the
// step's own sequences will (longest): one of a long cached conversation
// would make every row of the pass attend over its length.
func (s *scheduler) padGaps(st *step, lo, hi int, longest int) error {
	tm := s.model
	if tm.unified {
		return nil
	}
	for slot := lo + 1; slot < hi; slot++ {
		pos := tm.ctx.LastPosition(slot) + 1
		if roundUp(pos+1, kvPadding) > roundUp(longest, kvPadding) {
			continue // the step runs in parts here
		}
		if _, err := tm.batch.Add(0, pos, slot, false); err != nil {
			return err
		}
		st.pads = append(st.pads, pad{slot: slot, pos: pos})
	}
	return nil
}

// compute runs st's batch through the engine, and forgets its pads' cells.
func (s *scheduler) compute(st *step) {
	t := time.Now()
	st.err = s.model.ctx.Decode(s.model.batch)
	for _, p := range st.pads {
		if err := s.model.ctx.RemoveCells(p.slot, p.pos, -1); err != nil && st.err == nil {
			st.err = fmt.Errorf("forget a pad's cell: %w", err)
		}
	}
	st.took.compute = time.Since(t)
}

// finish samples the computed step and hands each sequence its token.
func (s *scheduler) finish(st *step) {
	if st.err == nil && s.fault != nil {
		st.err = s.fault(st)
	}
	if st.err != nil {
		s.failStep(st.seqs, fmt.Errorf("compute step: %w", st.err))
		return
	}
	if err := s.scorePrompts(st); err != nil {
		s.failStep(st.seqs, err)
		return
	}
	draws := st.draws[:0]
	for seq, row := range st.samples {
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
		seq.next, seq.hasNext = d.tok, true
	}
}

// row is the logits of a step's token at batch index i.
func (s *scheduler) row(i int) ([]float32, error) { return s.model.ctx.Logits(i) }

// scorePrompts scores the prompt tokens st's rows were asked for, before
// sampling changes any row. Large rows are scored on goroutines of their
// own, as sampled rows with logprobs are.
func (s *scheduler) scorePrompts(st *step) error {
	if len(st.scores) == 0 {
		return nil
	}
	vocab := s.model.vocab.Size()
	var wg sync.WaitGroup
	for seq, rows := range st.scores {
		if seq.finished {
			continue
		}
		scores := make([]*rowLogprob, len(rows))
		for i, r := range rows {
			row, err := s.row(r.row)
			if err != nil {
				return err
			}
			score := func() {
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
	return nil
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

// sample draws each row's token. The rows are the engine's own buffer,
// which the sampler may change in place: nothing reads them after.
func (s *scheduler) sample(st *step, draws []draw) {
	vocab := s.model.vocab.Size()
	one := func(d *draw) {
		if tok, ok := d.seq.forcing(); ok { // a reasoning block's closer, at its budget
			d.tok = tok
			return
		}
		if s.model.ctx.DeviceTopK(d.seq.slot) > 0 {
			ids, logits, err := s.model.ctx.Candidates(d.row)
			if err != nil {
				d.err = err
				return
			}
			d.tok, d.err = d.seq.req.sampler.SampleTop(ids, logits)
			return
		}
		row, err := s.row(d.row)
		if err != nil {
			d.err = err
			return
		}
		// An answer that must make calls may think first, but not end there.
		var ban func([]float32)
		if c := d.seq.req.constraint; c.bansEnd() {
			ban = c.banEnd
		}
		// Inside a reasoning block the grammar waits for the answer, and
		// the block may neither end the answer nor close empty.
		thinking := d.seq.thinking()
		switch {
		case thinking:
			ban = func(row []float32) { d.seq.banInThinking(s.model, row) }
		case d.seq.bansText():
			ban = func(row []float32) { banTokens(row, d.seq.req.textBans) }
		}
		switch {
		case !thinking && d.seq.req.constraint.masks():
			d.tok, d.logprob, d.err = sampleMasked(d.seq.req, row)
		case d.seq.req.logprobs:
			d.tok, d.logprob, d.err = sampleWithLogprob(d.seq.req.sampler, d.seq.req.topLogprobs, row, ban)
		default:
			if ban != nil {
				ban(row)
			}
			d.tok, d.err = d.seq.req.sampler.Sample(row)
		}
	}
	workers := min(len(draws), runtime.GOMAXPROCS(0))
	// A row scored for logprobs costs a pass of exp over the vocabulary
	// (docs/text.md): a large one is worth a goroutine of its own.
	scored := vocab >= parallelSampleFloats/64 && slices.ContainsFunc(draws, func(d draw) bool { return d.seq.req.logprobs })
	if len(draws)*vocab < parallelSampleFloats && !scored || workers < 2 {
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
