package textgen

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/textgen/sample"
	"github.com/genq/genq/internal/textgen/utf8stream"
)

// request is one Generate call as the scheduler sees it.
type request struct {
	prompt    []int32
	sampler   *sample.Sampler
	submitted time.Time
	// admitted is when the loop gave it a slot; read once done is closed.
	admitted time.Time

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
	promptOnly  bool // no answer: the prompt, echoed, is all
	// emit, when set, gets the answer's text piece by piece (emit.go).
	emit func(genq.TextPiece)
	// constraint, when set, holds the answer to a grammar (constraint.go).
	constraint *seqConstraint
	// think, when set, opens the answer with its reasoning (reasoning.go).
	think *thinkPlan
	// textBans are tokens the answer's free text may not hold, and
	// cutHeader says its text opens with a harmony header to read
	// (harmony.go).
	textBans  []int32
	cutHeader bool

	// tenant and weight are whom the job's work is counted to (genq.Share),
	// for the steps' share between tenants (share.go); "" and 0 for none.
	tenant string
	weight float64

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

// scorePrompt reports whether the request's prompt tokens are scored: it
// echoes its prompt with logprobs.
func (r *request) scorePrompt() bool { return r.echo && r.logprobs }

// sequence is an admitted request: it holds a cache slot.
type sequence struct {
	req  *request
	slot int

	pending []int32 // prompt tokens not yet in a step
	pos     int32   // position of the next token put in a step

	next    int32 // the last sampled token, to feed in the next step
	hasNext bool

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

	// The answer's reasoning (reasoning.go), while thinking (and until
	// thought): its text, its tokens, the bytes of it handed to emit, and
	// the tokens forced next (the closer, at the budget). trimLead cuts
	// the whitespace that opens the text after the block.
	reasoning        strings.Builder
	reasonUTF8       utf8stream.Stream
	reasonTokens     int
	emittedReasoning int
	thought          bool
	forced           []int32
	trimLead         bool
	// headerRead: the harmony header the text opens with is read
	// (cutHarmonyHeader).
	headerRead bool
	// callHead reads the calls of a tool-calling answer as the api's
	// stream will, until the first call's name is whole (callNamed;
	// holdCall).
	callHead  *toolcall.CallStream
	callNamed bool

	// cached is how many prompt tokens it did not compute: copied from the
	// shared prefix or another slot, or found in its own (inPlace;
	// prefixcache.go). fed are the answer's tokens fed back into its
	// cells, and answered says it ended with its answer: what the cache may
	// keep of it.
	cached   int
	inPlace  bool
	fed      []int32
	answered bool
}

// startFromPrefix puts seq at the start of its prompt: after the cached
// shared prefix, copied into its slot, when the prompt begins with it. A
// request whose prompt is scored computes every token itself: copied
// cells come with no logits.
func (seq *sequence) startFromPrefix(tm *textModel) {
	prompt := seq.req.prompt
	seq.pending, seq.pos, seq.cached, seq.inPlace = prompt, 0, 0, false
	n := len(tm.prefix)
	if n == 0 || n >= len(prompt) || seq.req.scorePrompt() || !slices.Equal(prompt[:n], tm.prefix) {
		return
	}
	if err := tm.copyPrefix(tm.prefixSeq(), seq.slot, n); err == nil {
		seq.pending, seq.pos, seq.cached = prompt[n:], int32(n), n
	}
}

// accept adds a sampled token to seq's answer and reports whether the
// answer is complete: an end-of-turn token, a stop string, or the token
// limit.
func (seq *sequence) accept(tm *textModel, tok int32, logprob *rowLogprob) (done bool, err error) {
	seq.generated++
	var constraint *seqConstraint
	if seq.req != nil {
		constraint = seq.req.constraint
	}
	ends := tm.vocab.IsEndOfGeneration(tok) && !tm.ignoreEOS && (seq.req == nil || !seq.req.ignoreEOS)
	if seq.thinking() && !ends {
		seq.acceptThinking(tm, tok)
		if seq.generated >= seq.maxTokens(tm.contextSize) {
			seq.finishAs(genq.FinishLength)
			return true, nil
		}
		return false, nil
	}
	if ends {
		seq.scoreUnwritten(tm, tok, logprob)
		constraint.ended()
		seq.finishAs(genq.FinishStop)
		return true, nil
	}
	// Special tokens (headers, reserved ones) never belong in the text,
	// but for those the model's dialect preserves; nor does the
	// whitespace that opens the text after a reasoning block.
	if !seq.writes(tm, tok) {
		seq.scoreUnwritten(tm, tok, logprob)
		if constraint != nil {
			if _, err := constraint.follow(seq.req, nil); err != nil {
				return true, err
			}
		}
	} else {
		p, _ := tm.piece(tok)
		piece := string(p)
		if seq.trimLead {
			piece, seq.trimLead = strings.TrimLeft(piece, " \n\t\r"), false
		}
		before := seq.text.Len()
		text, start := seq.utf8.WriteAt(piece)
		if logprob != nil {
			seq.logprobs = append(seq.logprobs, tm.tokenLogprob(piece, before+start, logprob))
		}
		seq.text.WriteString(text)
		if seq.req != nil && seq.cutAtStop(before) {
			seq.finishAs(genq.FinishStop)
			return true, nil
		}
		if constraint != nil {
			// The grammar's answer ends where nothing more may follow.
			done, err := constraint.follow(seq.req, []byte(piece))
			if err != nil {
				return true, err
			}
			if done {
				seq.finishAs(genq.FinishStop)
				return true, nil
			}
		}
		// A call's text goes out once its name is whole, and a harmony
		// header once read: an answer cut before either has none.
		if !seq.holdCall(piece) && !seq.cutHarmonyHeader() {
			seq.emitSafe()
		}
	}
	if seq.generated >= seq.maxTokens(tm.contextSize) {
		seq.finishAs(genq.FinishLength)
		return true, nil
	}
	return false, nil
}

// writes reports whether tok adds to seq's text: a token that writes,
// unless it is whitespace alone where the text after a reasoning block
// begins.
func (seq *sequence) writes(tm *textModel, tok int32) bool {
	p, writes := tm.piece(tok)
	return writes && (!seq.trimLead || strings.TrimLeft(string(p), " \n\t\r") != "")
}

// scoreUnwritten gives a token that is not the answer's text (an
// end-of-turn or other special token) its entry when the request echoes
// its prompt with logprobs: a harness scoring the prompt with an answer
// token drops the last entry, which must then be that token's, as vLLM
// gives it, and not a prompt token's. Other requests keep no entry for
// it, as OpenAI's chats give none.
func (seq *sequence) scoreUnwritten(tm *textModel, tok int32, logprob *rowLogprob) {
	if logprob == nil || seq.req == nil || !seq.req.echo {
		return
	}
	seq.logprobs = append(seq.logprobs, tm.tokenLogprob(string(tm.vocab.Text(tok)), seq.text.Len(), logprob))
}

// maxTokens is seq's answer limit: its request's (genq.Limits.Answer
// bounds it by the worker's cap and the context's room), or, for a
// sequence without one, the context.
func (seq *sequence) maxTokens(context int) int {
	if seq.req != nil && seq.req.maxTokens > 0 {
		return seq.req.maxTokens
	}
	return context
}

func (seq *sequence) finishAs(reason string) {
	if seq.req != nil {
		seq.req.res.FinishReason = reason
	}
}

// cutAtStop ends seq's text before the first of its request's stop strings,
// when the text written since before completes one, and reports whether it
// did. Only the tail a new piece can complete is searched, so the cost per
// token does not grow with the answer.
func (seq *sequence) cutAtStop(before int) bool {
	text := seq.text.String()
	cut, which := -1, ""
	for _, stop := range seq.req.stop {
		from := max(0, before-len(stop)+1)
		if i := strings.Index(text[from:], stop); i >= 0 && (cut < 0 || from+i < cut) {
			cut, which = from+i, stop
		}
	}
	if cut < 0 {
		return false
	}
	seq.req.res.StopSequence = which
	seq.text.Reset()
	seq.text.WriteString(text[:cut])
	seq.utf8 = utf8stream.Stream{} // bytes held back come after the stop
	// Tokens that start at the stop string or after it are not the answer's.
	if i := slices.IndexFunc(seq.logprobs, func(l genq.TokenLogprob) bool { return l.Offset >= cut }); i >= 0 {
		seq.logprobs = seq.logprobs[:i]
	}
	return true
}

// seqResult is one sequence's answer and how it was produced: GenerateStream
// makes a genq.Result of it; tests and benchmarks read the rest.
type seqResult struct {
	Text         string
	Reasoning    string // the answer's reasoning, before Text (reasoning.go)
	FinishReason string // genq.FinishStop or genq.FinishLength
	StopSequence string // the stop string that ended the answer, if one did
	PromptTokens int
	CachedTokens int           // prompt tokens reused, not computed
	Tokens       int           // tokens generated, the stop token included
	ReasonTokens int           // of them, the reasoning's (its closer aside)
	FirstToken   time.Duration // from submission to the first sampled token
	Logprobs     []genq.TokenLogprob
	// ToolCalls are the calls a tool-calling answer made (constraint.go);
	// FinishReason is then genq.FinishToolCalls.
	ToolCalls []genq.ToolCall
	// Unchecked are the calls whose arguments, their tool's schema relaxed,
	// fail it or could not be checked (constraint.go).
	Unchecked []genq.UncheckedToolCall
	// PromptText and PromptLogprobs give the prompt back when the job
	// echoes it (echoPrompt).
	PromptText     string
	PromptLogprobs []genq.TokenLogprob
}

// complete ends seq and hands its caller the answer or err.
func (seq *sequence) complete(tm *textModel, err error) {
	seq.finished = true
	req := seq.req
	if err != nil {
		req.err = fmt.Errorf("text generation: %w", err)
	} else {
		if seq.thinking() { // the answer ended inside its reasoning
			seq.reasoning.WriteString(seq.reasonUTF8.Flush())
			text := strings.TrimRight(seq.reasoning.String(), " \n\t\r")
			seq.reasoning.Reset()
			seq.reasoning.WriteString(text)
			seq.thought = true
			seq.emitReasoning(true)
		}
		req.res.Reasoning, req.res.ReasonTokens = seq.reasoning.String(), seq.reasonTokens
		seq.text.WriteString(seq.utf8.Flush())
		seq.dropUnreadHeader()
		seq.dropHeldCall()
		seq.emitRest()
		req.res.Text = seq.text.String()
		req.res.PromptTokens = len(req.prompt)
		req.res.CachedTokens = seq.cached
		seq.answered = true
		req.res.Tokens = seq.generated
		req.res.Logprobs = seq.logprobs
		if req.echo {
			req.res.PromptText, req.res.PromptLogprobs = tm.echoPrompt(req.prompt, req.scorePrompt(), seq.promptScores)
		}
	}
	close(req.done)
}
