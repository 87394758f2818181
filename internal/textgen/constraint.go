package textgen

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/textgen/sample"
)

// constraints is the backend's side of structured output and tools: the
// job's grammar, compiled once per distinct schema (structured.Cache), and
// the model's vocabulary analysed for masking, built once, on the first
// constrained job: most workers never see one, and Open stays as fast as
// before (docs/text.md).
type constraints struct {
	tm      *textModel
	dialect toolcall.Dialect // how the model writes calls (its chat template's)
	cache   *structured.Cache

	once sync.Once
	// masks is set once by vocabulary; stats reads it without building it.
	masks atomic.Pointer[maskVocab]

	// prepareBudget bounds a job's compile and the masks it works out
	// before its first token (Config.SchemaPrepareBudget); the rest go to background, a
	// queue of grammars whose remaining masks one goroutine works out.
	prepareBudget time.Duration
	// maskBytes bounds the vocabulary's masks (grammar.Vocab's store).
	maskBytes  int64
	background chan *grammar.Grammar
	queued     sync.Map // grammars in background, not queued twice
	stop       context.CancelFunc
}

// backgroundQueue bounds the grammars waiting for their masks: past it, a
// grammar's masks are worked out on first use.
const backgroundQueue = 8

// maskVocab is the vocabulary as masks see it.
type maskVocab struct {
	vocab *grammar.Vocab
	eos   []int32 // the tokens that end an answer
}

// grammarCacheSize bounds the compiled grammars a worker keeps: a client's
// schemas and tool sets repeat with every request, and each grammar holds
// its node masks.
const grammarCacheSize = 256

// newConstraints serves a model's constraints within cacheBytes of
// grammars and masks: a quarter for grammars, the rest for masks, as
// structured's defaults split them.
func newConstraints(tm *textModel, dialect toolcall.Dialect, prepareBudget time.Duration, cacheBytes int64) *constraints {
	ctx, stop := context.WithCancel(context.Background())
	c := &constraints{tm: tm, dialect: dialect, cache: structured.NewCache(grammarCacheSize),
		prepareBudget: prepareBudget, maskBytes: cacheBytes - cacheBytes/4,
		background: make(chan *grammar.Grammar, backgroundQueue), stop: stop}
	c.cache.MaxBytes = cacheBytes / 4
	go c.prepareInBackground(ctx)
	return c
}

// Bounds of the memory structured output keeps when TEXT_SCHEMA_CACHE_MIB
// leaves it to the memory available: a thirty-second of it, no less than
// a few large grammars need and no more than structured's defaults: with
// the collector's headroom, under 512 MiB of resident memory in all
// (docs/benchmarks.md).
const (
	minSchemaCacheBytes = 64 << 20
	maxSchemaCacheBytes = grammar.DefaultMaskBytes + structured.DefaultGrammarBytes
)

// schemaCacheBytes is the memory grammars and masks may keep: mib when
// set, else a share of avail (the bytes available at start; 0 unknown).
func schemaCacheBytes(mib int, avail uint64) int64 {
	if mib > 0 {
		return int64(mib) << 20
	}
	if avail == 0 {
		return maxSchemaCacheBytes
	}
	return min(max(int64(avail/32), minSchemaCacheBytes), maxSchemaCacheBytes)
}

// stats reports what structured output keeps between jobs.
func (c *constraints) stats() genq.SchemaCacheStats {
	if c == nil {
		return genq.SchemaCacheStats{}
	}
	g := c.cache.Stats()
	s := genq.SchemaCacheStats{Grammars: int64(g.Grammars), GrammarBytes: g.Bytes, GrammarLimit: g.Limit,
		GrammarEvictions: int64(g.Evictions), MaskLimit: c.maskBytes}
	if mv := c.masks.Load(); mv != nil {
		m := mv.vocab.MaskStats()
		s.MaskBytes, s.MaskLimit, s.MaskTables, s.MaskEvictions = m.Bytes, m.Limit, int64(m.Tables), int64(m.Evictions)
	}
	return s
}

// close stops the background preparation.
func (c *constraints) close() { c.stop() }

// prepareInBackground works out the masks the jobs' budgets left, one
// grammar at a time, so that at most one core goes to it beside decoding.
// A step that reaches a node first works its mask out itself; the two
// agree (structured's masks are set once).
func (c *constraints) prepareInBackground(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case g := <-c.background:
			g.Prepare(ctx, c.vocabulary().vocab, 0) //nolint:errcheck // ends only with ctx
			c.queued.Delete(g)
		}
	}
}

// prepareLater queues g's remaining masks for the background, unless it
// is queued already or the queue is full.
func (c *constraints) prepareLater(g *grammar.Grammar) {
	if _, dup := c.queued.LoadOrStore(g, true); dup {
		return
	}
	select {
	case c.background <- g:
	default:
		c.queued.Delete(g)
	}
}

// vocabulary returns the model's vocabulary for masking, building it on
// first use.
func (c *constraints) vocabulary() *maskVocab {
	c.once.Do(func() {
		mv := newMaskVocab(c.tm)
		mv.vocab.SetMaskBytes(c.maskBytes)
		c.masks.Store(mv)
		// The formats' masks, shared by every schema with them, in the
		// background: the e-mail address's take seconds of a core.
		c.prepareLater(structured.FormatsGrammar())
	})
	return c.masks.Load()
}

// newMaskVocab gives each token the bytes it adds to the answer: what
// sequence.accept writes for it (textModel.piece). Control tokens write
// nothing and get none, so a grammar never allows them, but for those the
// model's dialect preserves (a call's opener); the end-of-generation
// tokens are allowed only where the grammar accepts.
func newMaskVocab(tm *textModel) *maskVocab {
	tokens := make([][]byte, tm.vocab.Size())
	var eos []int32
	for id := range tokens {
		if tm.vocab.IsEndOfGeneration(int32(id)) {
			eos = append(eos, int32(id))
		}
		if piece, ok := tm.piece(int32(id)); ok {
			tokens[id] = piece
		}
	}
	return maskVocabOf(tokens, eos)
}

// maskVocabOf analyses tokens (each one's bytes; none for a token never
// allowed) with eos, the tokens that end the answer.
func maskVocabOf(tokens [][]byte, eos []int32) *maskVocab {
	return &maskVocab{vocab: grammar.NewVocab(tokens, eos), eos: eos}
}

// constrain works out job's constraint and, when it has one, gives req a
// matcher of its own. Errors are the job's fault (genq.Invalid): a schema
// genq cannot enforce is refused, never retried. The grammar's node masks
// are worked out here, on the caller's goroutine, within the budget, the
// nodes an answer reaches first first; the rest in the background, so
// that no schema holds a job's first token for long.
func (b *Backend) constrain(ctx context.Context, job genq.Job, req *request) error {
	start := time.Now()
	d := b.constraints.dialect
	if len(job.Messages) > 0 && b.reasoning() != nil {
		// The prompt opened the reasoning block, which the worker runs
		// apart (reasoning.go), or closed it empty: the text after it
		// opens no other, and is bound from its first byte.
		d.Reasoning = false
	}
	c, err := b.constraints.cache.ForJobIn(job, d)
	if err != nil {
		if genq.ErrorCode(err) != genq.Invalid {
			err = genq.WrapError(genq.Invalid, err, err.Error())
		}
		return err
	}
	if c.Grammar == nil || req.promptOnly { // a scored prompt has no answer to hold
		return nil
	}
	mv := b.constraints.vocabulary()
	// The budget counts the compile (a cached grammar's is microseconds):
	// a compile that spent it leaves every mask to the background.
	budget, done := b.constraints.prepareBudget, false
	if budget > 0 {
		budget -= time.Since(start)
	}
	if budget > 0 || b.constraints.prepareBudget == 0 {
		if done, err = c.Grammar.Prepare(ctx, mv.vocab, budget); err != nil {
			return fmt.Errorf("text generation: %w", err)
		}
	}
	if !done {
		b.constraints.prepareLater(c.Grammar)
	}
	req.constraint = &seqConstraint{c: c, v: mv, mask: make([]uint64, (mv.vocab.Size()+63)/64), narrowK: req.narrowK}
	if !req.cutHeader {
		// A harmony answer's header is in its prompt: its text is a
		// message's body, which holds no header (harmony.go).
		req.constraint.bans = req.textBans
	}
	req.constraint.start(req)
	return nil
}

// start puts the constraint at the start of req's answer, for its first
// start and for a start over after a failed step.
func (c *seqConstraint) start(req *request) {
	c.m, c.matched = c.c.Grammar.NewMatcher(), false
	c.opening = c.c.NewOpening()
	c.state = bound
	if c.opening != nil {
		c.state = opening
	}
	// The mask needs the row whole: a device's top-k of the raw logits
	// may hold no allowed token.
	req.narrowK = 0
}

// bindState is where a sequence stands with its grammar.
type bindState int

const (
	bound   bindState = iota // every token is masked
	opening                  // before the calls: Opening says whether a token is masked
	free                     // lazy, and the answer is prose: no mask
)

// seqConstraint holds one sequence's answer to its grammar. It is used by
// the scheduler's loop and, while its row is sampled, by one sampling
// goroutine at a time.
type seqConstraint struct {
	c     structured.Constraint
	v     *maskVocab
	m     *grammar.Matcher
	state bindState
	// opening follows a tool-calling answer up to its first call
	// (grammar.Opening): through whitespace, a reasoning block, or
	// prose, where a lazy answer lets the grammar go.
	opening *grammar.Opening
	mask    []uint64
	// ids and logits are the candidates of a row with few tokens allowed.
	ids    []int32
	logits []float32
	// narrowK is the candidates the request's own sampler needs, which it
	// gets back when a lazy grammar lets the answer go.
	narrowK int
	// matched is set once the answer is complete under the grammar.
	matched bool
	// bans are tokens the mask never allows, whatever the grammar's bytes
	// allow: harmony's headers, once the answer's own is read (harmony.go).
	bans []int32
}

// masks reports whether the sequence's next row is masked: always once
// bound, and before the calls while nothing is decided (inside a reasoning
// block the answer is free).
func (c *seqConstraint) masks() bool {
	if c == nil {
		return false
	}
	switch c.state {
	case bound:
		return true
	case opening:
		return c.opening.Phase() == grammar.Waiting
	}
	return false
}

// bansEnd reports whether the answer may not end at its next token
// though its row is not masked: an answer that must make calls, inside
// the reasoning block it may open with.
func (c *seqConstraint) bansEnd() bool {
	return c != nil && c.state == opening && !c.c.Lazy && c.opening.Phase() == grammar.Thinking
}

// banEnd sets the logits of the tokens that end an answer to NaN, which
// the sampler never picks.
func (c *seqConstraint) banEnd(row []float32) {
	nan := float32(math.NaN())
	for _, id := range c.v.eos {
		if int(id) < len(row) {
			row[id] = nan
		}
	}
}

// maskRow sets the logits of the tokens the grammar does not allow next to
// NaN, which the sampler never picks: temperature, top-k, top-p, min-p,
// penalties, biases and the seed then apply to the allowed tokens alone,
// as they would to a whole row.
func (c *seqConstraint) maskRow(row []float32) error {
	if _, err := c.fillMask(len(row)); err != nil {
		return err
	}
	nan := float32(math.NaN())
	for i, w := range c.mask {
		for x := ^w; x != 0; x &= x - 1 {
			id := i*64 + bits.TrailingZeros64(x)
			if id >= len(row) {
				break
			}
			row[id] = nan
		}
	}
	return nil
}

// fillMask works out the tokens allowed next into c.mask and counts them,
// of a vocabulary of size tokens.
func (c *seqConstraint) fillMask(size int) (int, error) {
	if c.state == opening {
		// Before the calls: whitespace, a reasoning block's tag, the start
		// of a call the grammar allows, and (lazy) any prose.
		c.opening.Mask(c.m, c.v.vocab, c.mask)
	} else {
		c.m.Mask(c.v.vocab, c.mask)
	}
	for _, id := range c.bans {
		if int(id) < size {
			c.mask[id>>6] &^= 1 << (id & 63)
		}
	}
	if tail := size % 64; tail != 0 && len(c.mask) > size/64 {
		c.mask[size/64] &= 1<<tail - 1
	}
	allowed := 0
	for _, w := range c.mask {
		allowed += bits.OnesCount64(w)
	}
	if allowed == 0 {
		if c.m.InCheck() {
			return 0, genq.Errorf(genq.Internal, "the answer wrote a string that its format (hostname, idn-hostname "+
				"or regex, tested as a whole where the string ends) can no longer accept within the schema's bounds")
		}
		return 0, genq.Errorf(genq.Internal, "the grammar allows no token of this model's vocabulary here")
	}
	return allowed, nil
}

// allowedOnly gathers the allowed tokens' ids and logits from row into
// the constraint's buffers.
func (c *seqConstraint) allowedOnly(row []float32) ([]int32, []float32) {
	ids, logits := c.ids[:0], c.logits[:0]
	for i, w := range c.mask {
		for x := w; x != 0; x &= x - 1 {
			id := i*64 + bits.TrailingZeros64(x)
			ids, logits = append(ids, int32(id)), append(logits, row[id])
		}
	}
	c.ids, c.logits = ids, logits
	return ids, logits
}

// fewAllowed is the most allowed tokens that are sampled as candidates
// (Sampler.SampleTop, which sorts them) rather than as a whole row with
// the rest set to NaN (which scans the row): between a schema's values a
// grammar allows a handful of a vocabulary's tokens (docs/benchmarks.md).
const fewAllowed = 1024

// follow moves req's constraint over a sampled token's bytes (nil for a
// token that writes none) and reports whether the answer is complete:
// nothing but its end may follow. A grammar the matcher cannot follow (too
// ambiguous) ends the answer with its error, genq.Invalid.
func (c *seqConstraint) follow(req *request, piece []byte) (done bool, err error) {
	switch c.state {
	case free:
		return false, nil
	case opening:
		before := c.opening.Phase()
		phase, calls := c.opening.Feed(piece)
		switch phase {
		case grammar.Prose:
			// The rest of the answer is free, and its rows may be narrowed
			// on the device again.
			c.state, req.narrowK = free, c.narrowK
			return false, nil
		case grammar.Thinking:
			if before != grammar.Thinking {
				req.narrowK = c.narrowK // free text until the block closes
			}
			return false, nil
		case grammar.Waiting:
			req.narrowK = 0 // masked again (a reasoning block closed)
			return false, nil
		}
		// The calls began: the grammar takes the answer from the opener on.
		c.state, req.narrowK = bound, 0
		if !c.m.Advance(calls) {
			if c.c.Lazy && c.m.Err() == nil {
				// One token closed the reasoning block and went on into
				// text no call begins with: prose after all.
				c.state, req.narrowK = free, c.narrowK
				return false, nil
			}
			return true, c.refused(calls)
		}
		c.matched = c.m.Accepting()
		return c.m.Done(), nil
	}
	if !c.m.Advance(piece) {
		return true, c.refused(piece)
	}
	c.matched = c.m.Accepting()
	return c.m.Done(), nil
}

// refused is the error of a token the grammar refused after its mask
// allowed it: the matcher's own (an ambiguous grammar), or a bug.
func (c *seqConstraint) refused(piece []byte) error {
	if err := c.m.Err(); err != nil {
		return err
	}
	return genq.Errorf(genq.Internal, "the grammar refused the token %q its mask allowed", piece)
}

// ended notes that the answer ended on a token outside the grammar's
// bytes: an end-of-turn token, which the mask allows only where the
// grammar accepts.
func (c *seqConstraint) ended() {
	if c != nil && c.state == bound {
		c.matched = c.m.Accepting()
	}
}

// sampleMasked draws req's token from row under its constraint's mask. The
// log-probabilities, when asked for, are the model's own, measured on the
// row before the mask, as for any other row.
func sampleMasked(req *request, row []float32) (int32, *rowLogprob, error) {
	var lp *rowLogprob
	var logSumExp float64
	if req.logprobs {
		var top []sample.Logprob
		logSumExp, top = sample.RowLogprobs(row, req.topLogprobs)
		lp = &rowLogprob{top: top}
	}
	c := req.constraint
	allowed, err := c.fillMask(len(row))
	if err != nil {
		return 0, nil, err
	}
	var tok int32
	raw := row
	if allowed <= fewAllowed {
		// Sampled as candidates, drawn as from the masked row (the
		// sampler's contract); the row stays raw.
		tok, err = req.sampler.SampleTop(c.allowedOnly(row))
	} else {
		if err := c.maskRow(row); err != nil {
			return 0, nil, err
		}
		if lp != nil && req.sampler.Adjusts() {
			raw = slices.Clone(row) // the allowed tokens' logits are still raw
		}
		tok, err = req.sampler.Sample(row)
	}
	if err != nil {
		return 0, nil, err
	}
	if lp != nil {
		lp.logprob = float64(raw[tok]) - logSumExp
	}
	return tok, lp, nil
}

// settle turns a complete answer made of tool calls into them: the answer
// matched the tool grammar and ended there. A call to a tool whose schema
// was relaxed is checked against the whole schema, and one that fails it
// is listed in res.Unchecked. Ids are derived from the job's
// id and the call's place, so a redelivered job answers with the same
// ids. The text stays the calls' text as the model wrote it; a lazy
// answer in prose stays content.
func (c *seqConstraint) settle(jobID string, res *seqResult) {
	if c != nil && c.c.ToolCalls && c.state == bound && res.FinishReason == genq.FinishLength {
		settleCut(jobID, res)
		return
	}
	if c == nil || !c.c.ToolCalls || !c.matched || res.FinishReason != genq.FinishStop {
		return
	}
	calls, ok := c.c.Dialect.Parse(res.Text)
	if !ok {
		return
	}
	res.ToolCalls = make([]genq.ToolCall, len(calls))
	for i, f := range calls {
		res.ToolCalls[i] = genq.ToolCall{ID: genq.ToolCallID(jobID, i), Type: "function", Function: f}
		// A tool whose schema was relaxed held its call to part of it:
		// the finished arguments are checked against the whole.
		if r := c.c.Grammar.RelaxedTool(f.Name); r != nil {
			if err := r.Check(f.Arguments); err != nil {
				res.Unchecked = append(res.Unchecked, genq.UncheckedToolCall{Index: i, Name: f.Name, Reason: err.Error()})
			}
		}
	}
	res.FinishReason = genq.FinishToolCalls
}

// settleCut reads the calls of an answer its token limit cut inside them
// as the api's stream of it reads them (toolcall.CallStream): each call
// begun with its name, its arguments as far as they came (the text of a
// call cut before its name is whole is dropped: holdCall). So a cut call
// has one shape whole and streamed, and its format's syntax never comes
// back as text; the finish reason stays length.
func settleCut(jobID string, res *seqResult) {
	s := toolcall.NewCallStream(false)
	var calls []genq.ToolCall
	for _, ev := range append(s.Write(res.Text), s.Close()...) {
		switch {
		case ev.Start:
			calls = append(calls, genq.ToolCall{ID: genq.ToolCallID(jobID, ev.Index), Type: "function", Function: genq.ToolCallFunction{Name: ev.Name}})
		case ev.Arguments != "" && ev.Index < len(calls):
			calls[ev.Index].Function.Arguments += ev.Arguments
		}
	}
	res.ToolCalls = calls
}

// holdCall reads piece, just written to seq's text, as the api's stream
// will, and reports whether the text must be held back: the answer's
// calls began (its grammar is bound to them) and the first one's name is
// not whole yet. Such text is no content (the stream gives none for it)
// and no call yet; an answer cut there drops it (dropHeldCall).
func (seq *sequence) holdCall(piece string) bool {
	if seq.req == nil || seq.callNamed {
		return false
	}
	c := seq.req.constraint
	if c == nil || !c.c.ToolCalls || c.state != bound {
		return false
	}
	if seq.callHead == nil {
		// The whole text, as the api's stream reads it: whitespace, then
		// the calls' opener, which a lazy answer may have begun in
		// earlier tokens.
		seq.callHead = toolcall.NewCallStream(false)
		piece = seq.text.String()
	}
	for _, ev := range seq.callHead.Write(piece) {
		if ev.Start {
			seq.callNamed = true
			return false
		}
	}
	return true
}

// dropHeldCall drops from the text of an answer cut inside its first
// call's head what holdCall held back.
func (seq *sequence) dropHeldCall() {
	if seq.callHead == nil || seq.callNamed || seq.req.res.FinishReason != genq.FinishLength {
		return
	}
	text := seq.text.String()[:seq.emitted]
	seq.text.Reset()
	seq.text.WriteString(text)
	if i := slices.IndexFunc(seq.logprobs, func(l genq.TokenLogprob) bool { return l.Offset >= len(text) }); i >= 0 {
		seq.logprobs = seq.logprobs[:i]
	}
}
