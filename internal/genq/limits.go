package genq

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Limits are what a worker's model can serve; a job past them fails there
// as Invalid. Zero is unknown (or not this kind's): no bound.
type Limits struct {
	// MaxNewTokens is the worker's cap on an answer (TEXT_MAX_NEW_TOKENS),
	// ContextSize its tokens of context per sequence, prompt and answer
	// together, and VocabSize the model's token ids, 0 to VocabSize-1.
	MaxNewTokens int `json:"max_new_tokens,omitempty"`
	ContextSize  int `json:"context_size,omitempty"`
	VocabSize    int `json:"vocab_size,omitempty"`
	// ImageMaxSize bounds each side of an image, and ImageMaxSteps its
	// denoising steps (IMAGE_MAX_SIZE, IMAGE_MAX_STEPS).
	ImageMaxSize  int `json:"image_max_size,omitempty"`
	ImageMaxSteps int `json:"image_max_steps,omitempty"`
}

// Tightest is the limits every one of lims allows, field by field: a
// queued job may run on any of the workers.
func Tightest(lims ...Limits) Limits {
	var out Limits
	tight := func(dst *int, v int) {
		if v > 0 && (*dst == 0 || v < *dst) {
			*dst = v
		}
	}
	for _, l := range lims {
		tight(&out.MaxNewTokens, l.MaxNewTokens)
		tight(&out.ContextSize, l.ContextSize)
		tight(&out.VocabSize, l.VocabSize)
		tight(&out.ImageMaxSize, l.ImageMaxSize)
		tight(&out.ImageMaxSteps, l.ImageMaxSteps)
	}
	return out
}

// Check refuses a job the model cannot serve, in the words the worker
// would refuse it with. A prompt given as text is measured in tokens only
// by the worker, which has the tokenizer: only a prompt of token ids is
// held to the context here.
func (l Limits) Check(j Job) error {
	if l.VocabSize > 0 {
		for _, id := range j.PromptTokenIDs {
			if int(id) >= l.VocabSize {
				return Errorf(Invalid, "prompt holds the token id %d; this model's vocabulary has tokens 0 to %d", id, l.VocabSize-1)
			}
		}
		for id := range j.LogitBias {
			if int(id) >= l.VocabSize {
				return Errorf(Invalid, "logit_bias names token %d; this model's vocabulary has tokens 0 to %d", id, l.VocabSize-1)
			}
		}
	}
	if len(j.PromptTokenIDs) > 0 {
		if _, err := l.Answer(j, len(j.PromptTokenIDs)); err != nil {
			return err
		}
	}
	if l.ImageMaxSize > 0 && j.Width != 0 {
		if err := ValidateImageSize(j.Width, j.Height, l.ImageMaxSize); err != nil {
			return err
		}
	}
	if l.ImageMaxSteps > 0 && j.Steps > l.ImageMaxSteps {
		return Errorf(Invalid, "num_inference_steps must be between 1 and %d, not %d", l.ImageMaxSteps, j.Steps)
	}
	return nil
}

// Answer is the most tokens j's answer may take after a prompt of prompt
// tokens, or the refusal of a job the context cannot hold. It is the one
// rule of an answer's length, which the api applies to prompts of token
// ids and the worker to every prompt once tokenized:
//
//   - max_tokens above the worker's cap (MaxNewTokens) is capped, whatever
//     the route: clients send their whole output budget (Claude Code
//     32,000) whatever the model, and the answer that reaches the cap ends
//     with finish_reason "length";
//   - a job that gives no max_tokens answers up to the cap, or to the end
//     of the context if that comes first, as OpenAI's API does;
//   - a max_tokens (capped) that the context cannot hold after the prompt,
//     or a prompt that leaves no room for one token of answer, is refused
//     with ContextExceeded, so that the client shortens its conversation
//     (OpenAI's routes, as OpenAI's API does);
//   - but a max_tokens that is a bound (MaxTokensBound: Anthropic's
//     clients, whose budget is their model's whole output, Claude Code's
//     128,000, whatever the context) is capped at what the context leaves
//     too, and only a prompt that leaves no room is refused.
//
// A job that scores its prompt (PromptOnly) may fill the context, and one
// that counts it (CountOnly) is never refused: a count is how a client
// learns that its conversation has outgrown the context. With no context
// known, the answer is the cap, or 0: no bound.
func (l Limits) Answer(j Job, prompt int) (int, error) {
	if j.CountOnly {
		return 0, nil
	}
	room := math.MaxInt
	if l.ContextSize > 0 {
		room = l.ContextSize - prompt
	}
	if j.PromptOnly {
		if room < 0 {
			return 0, l.exceeded(j, prompt, 0)
		}
		return 0, nil
	}
	asked := j.MaxNewTokens()
	answer := asked
	if l.MaxNewTokens > 0 && (answer == 0 || answer > l.MaxNewTokens) {
		answer = l.MaxNewTokens
	}
	switch {
	case room < 1:
		return 0, l.exceeded(j, prompt, 0)
	case asked > 0 && answer > room && !j.MaxTokensBound:
		return 0, l.exceeded(j, prompt, answer)
	case l.ContextSize > 0 && (answer == 0 || answer > room):
		answer = room
	}
	return answer, nil
}

// exceeded is the refusal of j, whose prompt of prompt tokens and answer
// of answer tokens (0: the prompt alone) the context cannot hold. It names
// the field to shorten: the answer's limit when the prompt alone fits.
func (l Limits) exceeded(j Job, prompt, answer int) error {
	ce := ContextExceeded{Prompt: prompt, Answer: answer, Context: l.ContextSize, Input: "prompt"}
	if len(j.Messages) > 0 || j.Text != "" {
		ce.Input = "messages"
	}
	field := ce.Input
	if answer > 0 && prompt < l.ContextSize {
		field = j.MaxTokensField()
	}
	return &Error{Code: Invalid, Message: ce.Error(), Err: ce, Field: field}
}

// ContextExceeded is a job whose prompt, with the room its answer asks
// for, the model's context cannot hold. Its message is OpenAI's own
// (context_length_exceeded), which agents read to shorten their
// conversation; it travels in a worker's error reply as the message of an
// invalid job, and ContextExceededOf reads it back, so that each API can
// say it in its words.
type ContextExceeded struct {
	Prompt  int // the prompt's tokens
	Answer  int // the answer's tokens asked for, max_tokens capped at the worker's cap; 0: the prompt alone is too long
	Context int // the model's context, in tokens
	// Input names the prompt as the request gave it: "messages" (a
	// chat) or "prompt" (raw text or token ids).
	Input string
}

// The message of a ContextExceeded, with an answer and without one.
const (
	contextAnswerFormat = "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the %s, %d in the completion). Please reduce the length of the %s or completion."
	contextPromptFormat = "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens. Please reduce the length of the %s."
)

func (e ContextExceeded) Error() string {
	if e.Answer > 0 {
		return fmt.Sprintf(contextAnswerFormat, e.Context, e.Prompt+e.Answer, e.Prompt, e.Input, e.Answer, e.Input)
	}
	return fmt.Sprintf(contextPromptFormat, e.Context, e.Input, e.Prompt, e.Input)
}

// ContextExceededOf finds a ContextExceeded in err: in its chain when it
// was made in this process, else in its message, as a worker's error
// reply carries it.
func ContextExceededOf(err error) (ContextExceeded, bool) {
	var ce ContextExceeded
	if errors.As(err, &ce) {
		return ce, true
	}
	if ErrorCode(err) != Invalid {
		return ce, false
	}
	return parseContextExceeded(ErrorMessage(err))
}

// parseContextExceeded reads a ContextExceeded back from its message,
// which must be exactly one Error writes.
func parseContextExceeded(msg string) (ContextExceeded, bool) {
	for _, input := range []string{"messages", "prompt"} {
		var ce ContextExceeded
		var total int
		f := strings.ReplaceAll(contextAnswerFormat, "%s", input)
		if n, _ := fmt.Sscanf(msg, f, &ce.Context, &total, &ce.Prompt, &ce.Answer); n == 4 {
			ce.Input = input
			if ce.Error() == msg {
				return ce, true
			}
		}
		ce = ContextExceeded{}
		f = strings.ReplaceAll(contextPromptFormat, "%s", input)
		if n, _ := fmt.Sscanf(msg, f, &ce.Context, &ce.Prompt); n == 2 {
			ce.Input = input
			if ce.Error() == msg {
				return ce, true
			}
		}
	}
	return ContextExceeded{}, false
}

// PromptBytesPerToken bounds the bytes of a prompt the api takes for each
// token of the context it may run in, when MAX_PROMPT_BYTES leaves the
// bound to the workers' context. Text averages 3 to 5 bytes a token in
// the vocabularies genq serves (code and JSON fewer); at 8 a prompt over
// the bound is past the context whatever it holds but for long runs of
// one character, and the worker, which has the tokenizer, judges the
// rest in tokens.
const PromptBytesPerToken = 8

// PromptBytes is the bound on a prompt's bytes that a context of
// contextSize tokens sets.
func PromptBytes(contextSize int) int { return contextSize * PromptBytesPerToken }
