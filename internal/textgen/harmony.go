package textgen

import (
	"math"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/llamacpp"
	"github.com/genq/genq/internal/structured/toolcall"
)

// gpt-oss speaks harmony (structured/harmony.go): after the prompt's
// <|start|>assistant the model names a channel, and its reasoning is the
// analysis channel's message. genq reads the channels as llama-server's
// gpt-oss parser does, and runs the reasoning as it runs a <think> block
// (reasoning.go):
//
//   - A job that thinks gets <|channel|>analysis<|message|> at the end of
//     its prompt; one that does not gets that message empty and closed, so
//     the model goes on to its answer.
//   - The reasoning ends at <|end|>: drawn, or forced at the budget. The
//     next message's header is then forced: <|start|>assistant, and for a
//     job that makes no calls <|channel|>final<|message|>, so its text is
//     the final channel's message alone.
//   - A job that may call tools writes the header itself: a call is the
//     Harmony tool format (commentary to=functions.NAME), held to its
//     grammar; a lazy job's prose comes after a header that is cut from
//     its text (cutHarmonyHeader).
//   - Inside the reasoning and the text, the headers' tokens are banned:
//     the channels' syntax never reaches either. The answer ends at
//     <|return|> or <|call|>, the vocabulary's end-of-generation tokens.

// harmonyReasoner holds the harmony tokens a model's reasoning needs.
type harmonyReasoner struct {
	// assistant ends the reasoning: <|end|><|start|>assistant; final adds
	// the final channel's header.
	assistant, final []int32
	// headers are the header tokens but <|end|>, banned in the reasoning;
	// body adds <|end|>, banned in the final message.
	headers, body []int32
}

// newHarmonyReasoner finds the harmony tokens in vocab; it returns nil
// when the vocabulary lacks one, and the model is then run without
// reasoning.
func newHarmonyReasoner(vocab *llamacpp.Vocab) *reasoner {
	h := &harmonyReasoner{}
	end := int32(-1)
	for _, t := range toolcall.HarmonyTokens() {
		id := vocab.Lookup(t)
		if id < 0 {
			return nil
		}
		h.body = append(h.body, id)
		if t == toolcall.HarmonyEnd {
			end = id
		} else {
			h.headers = append(h.headers, id)
		}
	}
	h.assistant = vocab.Tokenize(toolcall.HarmonyEnd+toolcall.HarmonyAssistant, false, true)
	h.final = vocab.Tokenize(toolcall.HarmonyEnd+toolcall.HarmonyAssistant+toolcall.HarmonyFinal, false, true)
	if len(h.assistant) < 2 || h.assistant[0] != end {
		// The closer's first token, drawn, brings the rest of it
		// (acceptThinking): it must be <|end|> alone.
		return nil
	}
	close := toolcall.HarmonyEnd + toolcall.HarmonyAssistant
	return &reasoner{open: toolcall.HarmonyAnalysis, close: close, closeTokens: h.assistant, harmony: h}
}

// effort is the reasoning effort a harmony template writes for job
// ("Reasoning: low|medium|high"): the level the client named, minimal as
// low and xhigh as high, the levels gpt-oss knows; empty, the template's
// default, when it named none or the model does not speak harmony.
func (r *reasoner) effort(job genq.Job) string {
	if r == nil || r.harmony == nil || job.Thinking == nil {
		return ""
	}
	switch job.Thinking.Effort {
	case "minimal", "low":
		return "low"
	case "medium":
		return "medium"
	case "high", "xhigh":
		return "high"
	}
	return ""
}

// calls reports whether job's answer may be a call: it has tools, and its
// tool_choice is not none.
func calls(job genq.Job) bool { return job.ToolMode() != "" }

// shape ends a rendered prompt, which ends with <|start|>assistant, with
// the analysis channel's header when the job thinks; else with that
// message empty, then the next one's header: the final channel's, unless
// the job may call tools, whose answer names its channel.
func (h *harmonyReasoner) shape(prompt string, thinks bool, job genq.Job) string {
	// A template that opens the analysis channel itself gets it once.
	prompt = strings.TrimSuffix(prompt, toolcall.HarmonyAnalysis) + toolcall.HarmonyAnalysis
	if thinks {
		return prompt
	}
	prompt += toolcall.HarmonyEnd + toolcall.HarmonyAssistant
	if !calls(job) {
		prompt += toolcall.HarmonyFinal
	}
	return prompt
}

// plan is a thinking job's closer: the end of the analysis message and
// the next one's header, the final channel's for a job that makes no
// calls.
func (h *harmonyReasoner) plan(job genq.Job) *thinkPlan {
	p := &thinkPlan{close: toolcall.HarmonyEnd + toolcall.HarmonyAssistant, closeTokens: h.assistant, bans: h.headers}
	if !calls(job) {
		p.close += toolcall.HarmonyFinal
		p.closeTokens = h.final
	}
	return p
}

// planHarmony sets how req's text is read on a harmony model: the
// header tokens banned from its free text, and, for a job whose answer
// names its own channel (it may call tools), the header to cut from its
// prose.
func (b *Backend) planHarmony(job genq.Job, req *request) {
	r := b.reasoning()
	if r == nil || r.harmony == nil || len(job.Messages) == 0 || job.PromptOnly || job.CountOnly {
		return
	}
	req.textBans = r.harmony.body
	req.cutHeader = calls(job)
	// Banning tokens needs the row whole.
	req.narrowK = 0
}

// banTokens sets the logits of ids in row to NaN, which the sampler never
// picks.
func banTokens(row []float32, ids []int32) {
	nan := float32(math.NaN())
	for _, id := range ids {
		if int(id) < len(row) {
			row[id] = nan
		}
	}
}

// harmonyHeaderMax bounds the header a harmony answer's text may open
// with before genq stops waiting for its <|message|>: a channel's name
// and a recipient are short.
const harmonyHeaderMax = 128

// cutHarmonyHeader reads the header a harmony answer's text opens with,
// when it must (request.cutHeader), and reports whether the text must be
// held back: it may still be a header. A header that names no recipient
// (<|channel|>final<|message|>, the prose of a job that may call tools) is
// cut from the text; one that does (a call, which its grammar reads) stays.
// Text that opens with no header is the text.
func (seq *sequence) cutHarmonyHeader() (hold bool) {
	if seq.req == nil || !seq.req.cutHeader || seq.headerRead {
		return false
	}
	text := seq.text.String()
	if !strings.HasPrefix(text, toolcall.HarmonyChannel) {
		if strings.HasPrefix(toolcall.HarmonyChannel, text) {
			return true
		}
		seq.headerRead = true
		return false
	}
	i := strings.Index(text, toolcall.HarmonyMessage)
	if i < 0 && len(text) < harmonyHeaderMax {
		return true
	}
	seq.headerRead = true
	if c := seq.req.constraint; c != nil {
		c.bans = seq.req.textBans // the body holds no header
	}
	// A header past harmonyHeaderMax with no <|message|> is no header a
	// model trained on harmony writes: it is cut whole, as a header.
	header := text
	if i >= 0 {
		header = text[:i+len(toolcall.HarmonyMessage)]
	}
	if i >= 0 && strings.Contains(header, "to=") {
		return false
	}
	seq.text.Reset()
	seq.text.WriteString(text[len(header):])
	// The header's tokens are no entries of the text's.
	kept := seq.logprobs[:0]
	for _, lp := range seq.logprobs {
		if lp.Offset >= len(header) {
			lp.Offset -= len(header)
			kept = append(kept, lp)
		}
	}
	seq.logprobs = kept
	return false
}

// bansText reports whether seq's next row is free text whose harmony
// header tokens are banned: past its reasoning and its header, and not
// held to a grammar.
func (seq *sequence) bansText() bool {
	return len(seq.req.textBans) > 0 && !seq.thinking() && (!seq.req.cutHeader || seq.headerRead) &&
		!seq.req.constraint.masks()
}

// dropUnreadHeader drops, from an answer that ended while its text could
// still be a harmony header (its token limit reached there), that text,
// held back until then: a header is no text, and a call's header cut
// before its <|message|> names no call the api's stream would read.
func (seq *sequence) dropUnreadHeader() {
	if !seq.req.cutHeader || seq.headerRead {
		return
	}
	seq.text.Reset()
	seq.logprobs = seq.logprobs[:0]
}
