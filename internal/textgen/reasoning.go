package textgen

import (
	"math"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// Reasoning models (Qwen3, QwQ, DeepSeek-R1 and its distills) answer with
// a reasoning block first, <think>…</think>, then the answer. genq runs
// the block the way budget-forcing servers do, so that what a job gets
// holds by construction whatever the model draws:
//
//   - The prompt ends with the block's opener when the job thinks (as
//     DeepSeek-R1's template writes it, and as Qwen3 writes it first when
//     its template's enable_thinking is on), and with an empty block when
//     it does not (as Qwen3's template writes for enable_thinking false).
//   - The answer's tokens up to the closer are its reasoning, kept apart
//     from its text (genq.TextResult.Reasoning, streamed as
//     genq.TextPiece.Reasoning). Inside the block the model may not end
//     its turn, nor close an empty block; when the block reaches its
//     budget of tokens, the closer is forced as its next token.
//   - After the closer the answer is the text, its leading whitespace cut,
//     and a job's grammar (response_format, tools) binds it from there.

// reasoner is how a model's template reasons: the block's opener and
// closer, and the closer's tokens. A model has one when its template
// names both tags and its vocabulary holds each as one token, or when it
// speaks harmony (harmony.go).
type reasoner struct {
	open, close string
	closeTokens []int32
	// readsThinking: the template reads enable_thinking, and writes the
	// empty block itself when it is off.
	readsThinking bool
	// harmony, for a model that reasons on harmony's channels.
	harmony *harmonyReasoner
}

// reasoning is the model's reasoner, nil for a model that does not reason.
func (b *Backend) reasoning() *reasoner {
	b.reasonOnce.Do(func() {
		if b.tmpl == nil || b.vocab == nil {
			return
		}
		if b.tmpl.Dialect().Channels() {
			b.reasoner = newHarmonyReasoner(b.vocab)
			return
		}
		if !b.tmpl.Dialect().Reasoning {
			return
		}
		open, close := toolcall.ThinkOpen, toolcall.ThinkClose
		if b.vocab.Lookup(open) < 0 || b.vocab.Lookup(close) < 0 {
			return
		}
		toks := b.vocab.Tokenize(close, false, true)
		if len(toks) != 1 {
			return
		}
		b.reasoner = &reasoner{open: open, close: close, closeTokens: toks, readsThinking: b.tmpl.ReadsThinking()}
	})
	return b.reasoner
}

// thinks reports whether job's answer opens with reasoning: a chat, on a
// model that reasons, unless the job turned thinking off. A job that says
// nothing thinks, as llama-server turns enable_thinking on for such a
// template. A job of text alone (POST /generate), whose result holds the
// text alone, does not.
func (b *Backend) thinks(job genq.Job) bool {
	if len(job.Messages) == 0 || b.reasoning() == nil {
		return false
	}
	return job.Thinking == nil || job.Thinking.Enabled
}

// shape ends a rendered prompt as the job's thinking wants it: with the
// block's opener when it thinks, with an empty block when it does not,
// unless the template wrote that already.
func (r *reasoner) shape(prompt string, thinks bool, job genq.Job) string {
	if r == nil {
		return prompt
	}
	if r.harmony != nil {
		return r.harmony.shape(prompt, thinks, job)
	}
	end := strings.TrimRight(prompt, " \n")
	switch {
	case thinks && strings.HasSuffix(end, r.open):
		return prompt
	case thinks:
		return prompt + r.open + "\n"
	case strings.HasSuffix(end, r.close):
		return prompt
	case strings.HasSuffix(end, r.open): // a template that always opens it
		return prompt + "\n" + r.close + "\n\n"
	}
	return prompt + r.open + "\n\n" + r.close + "\n\n"
}

// thinkPlan is a request's reasoning: the closer that ends it, and its
// budget of tokens.
type thinkPlan struct {
	close       string
	closeTokens []int32
	budget      int
	// bans are tokens the reasoning may not hold besides the answer's
	// ends: harmony's headers.
	bans []int32
}

// planThinking gives req its reasoning when job thinks: a budget of
// job.Thinking.BudgetTokens, scaled down with the answer's limit when the
// worker capped the job's max_tokens (a client's 1,024 of 2,048 is 256 of
// a cap of 512), or half the answer's limit when the job gives none
// (adaptive, or nothing said); at most what leaves the closer and one
// token of text within maxNew, and at least one token.
func (b *Backend) planThinking(job genq.Job, req *request, maxNew int) {
	if !b.thinks(job) || job.CountOnly || job.PromptOnly {
		return
	}
	r := b.reasoning()
	budget := 0
	if job.Thinking != nil {
		budget = job.Thinking.BudgetTokens
	}
	if asked := job.MaxNewTokens(); budget > 0 && asked > maxNew {
		budget = int(int64(budget) * int64(maxNew) / int64(asked))
	}
	if budget <= 0 {
		budget = maxNew / 2
	}
	plan := &thinkPlan{close: r.close, closeTokens: r.closeTokens}
	if r.harmony != nil {
		plan = r.harmony.plan(job)
	}
	plan.budget = max(1, min(budget, maxNew-len(plan.closeTokens)-1))
	req.think = plan
	// Banning tokens needs the row whole: a device's top-k may hold only
	// those.
	req.narrowK = 0
}

// thinking reports whether seq's next token is still its reasoning's.
func (seq *sequence) thinking() bool {
	return seq.req != nil && seq.req.think != nil && !seq.thought
}

// forcing is the token seq must take next without sampling (the closer of
// a reasoning block at its budget), if any.
func (seq *sequence) forcing() (int32, bool) {
	if len(seq.forced) == 0 {
		return 0, false
	}
	return seq.forced[0], true
}

// banInThinking sets to NaN, in a row of seq's reasoning, the logits of
// the tokens that end the answer and, while the reasoning holds nothing
// but whitespace, of the closer: a block is never empty, and never the
// answer's end.
func (seq *sequence) banInThinking(tm *textModel, row []float32) {
	nan := float32(math.NaN())
	for _, id := range tm.endTokens() {
		if int(id) < len(row) {
			row[id] = nan
		}
	}
	banTokens(row, seq.req.think.bans)
	if strings.TrimSpace(seq.reasoning.String()) == "" {
		for _, id := range seq.req.think.closeTokens[:1] {
			if int(id) < len(row) {
				row[id] = nan
			}
		}
	}
}

// endTokens are the vocabulary's end-of-generation tokens, found once.
func (tm *textModel) endTokens() []int32 {
	tm.endOnce.Do(func() {
		for id := range tm.vocab.Size() {
			if tm.vocab.IsEndOfGeneration(int32(id)) {
				tm.ends = append(tm.ends, int32(id))
			}
		}
	})
	return tm.ends
}

// acceptThinking adds a token of the reasoning to seq: its text to the
// reasoning, until the text closes the block. At the budget, the closer's
// tokens are forced next. It reports whether the answer is complete: its
// limit of tokens reached inside the block.
func (seq *sequence) acceptThinking(tm *textModel, tok int32) bool {
	plan := seq.req.think
	if len(seq.forced) > 0 && seq.forced[0] == tok {
		seq.forced = seq.forced[1:]
	} else {
		seq.reasonTokens++
	}
	if len(seq.forced) == 0 && len(plan.closeTokens) > 1 && tok == plan.closeTokens[0] {
		// The closer's first token, drawn: the rest of it follows
		// (harmony's <|end|>, then the next message's header).
		seq.forced = append([]int32(nil), plan.closeTokens[1:]...)
	}
	if p, writes := tm.piece(tok); writes {
		seq.reasoning.WriteString(seq.reasonUTF8.Write(string(p)))
	}
	text := seq.reasoning.String()
	if i := strings.Index(text, plan.close); i >= 0 {
		// The block closed: what follows the closer is the answer's.
		rest := strings.TrimLeft(text[i+len(plan.close):], " \n\t\r")
		seq.reasoning.Reset()
		seq.reasoning.WriteString(strings.TrimRight(text[:i], " \n\t\r"))
		seq.reasoning.WriteString(seq.reasonUTF8.Flush())
		seq.thought, seq.forced, seq.trimLead = true, nil, true
		seq.emitReasoning(true)
		if rest != "" && seq.req.constraint == nil {
			// A closer written in pieces, the text begun in its last:
			// the text's (a grammar's answer starts at the next token).
			seq.text.WriteString(rest)
			seq.trimLead = false
		}
		return false
	}
	if seq.reasonTokens >= plan.budget && len(seq.forced) == 0 {
		seq.forced = append([]int32(nil), plan.closeTokens...)
	}
	seq.emitReasoning(false)
	return false
}

// emitReasoning hands emit the reasoning written since the last call,
// less a tail that may still be the start of the closer or whitespace
// before it (cut when the block closes); all of it once closed.
func (seq *sequence) emitReasoning(closed bool) {
	if seq.req.emit == nil {
		return
	}
	text := seq.reasoning.String()
	safe := len(text)
	if !closed {
		safe -= stopPrefixLen(text, []string{seq.req.think.close})
		safe = len(strings.TrimRight(text[:safe], " \n\t\r"))
	}
	if safe <= seq.emittedReasoning {
		return
	}
	piece := genq.TextPiece{Reasoning: text[seq.emittedReasoning:safe]}
	if seq.emitted == 0 && seq.emittedReasoning == 0 && seq.emittedLP == 0 {
		piece.PromptTokens, piece.CachedTokens = len(seq.req.prompt), seq.cached
	}
	seq.req.emit(piece)
	seq.emittedReasoning = safe
}
