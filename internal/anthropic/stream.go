package anthropic

import (
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// Event is one server-sent event of a streamed message: its type names the
// event and is its "type" field.
type Event map[string]any

// Type is the event's type.
func (e Event) Type() string { s, _ := e["type"].(string); return s }

// Events builds the events of one streamed message as its text comes:
// message_start and a ping, then content blocks (first, for a model that
// reasons, a thinking block whose thinking grows by thinking_delta and
// that ends with its signature_delta; then a text block whose text
// grows by text_delta, or for a job that offers tools the calls it makes,
// read with toolcall.CallStream, each a tool_use block whose input grows
// by input_json_delta), each closed by content_block_stop; at the end
// message_delta with the stop reason and the counts, and message_stop.
type Events struct {
	a      Answer
	calls  *toolcall.CallStream // nil: the answer is text
	prompt *genq.Usage          // the prompt's counts, once known
	opened bool
	index  int  // the open block's index; -1 before the first
	isCall bool // the open block is a tool_use
	// thinking is the reasoning streamed, while its block is open
	// (inThinking); answered says a text or tool_use block opened.
	thinking   strings.Builder
	inThinking bool
	answered   bool
}

// NewEvents starts the events of job's message.
func NewEvents(a Answer, job genq.Job) *Events {
	e := &Events{a: a, index: -1}
	if mode := job.ToolMode(); mode != "" {
		e.calls = toolcall.NewCallStream(mode == genq.ToolChoiceAuto)
	}
	return e
}

// Prompt tells the events the prompt's token counts, and those of them
// the prefix cache held, which message_start's usage then carries, as
// the API's does. Told after message_start, they change nothing.
func (e *Events) Prompt(tokens, cached int) {
	e.prompt = &genq.Usage{PromptTokens: tokens, CachedTokens: cached}
}

// Thinking are the events of a piece of the answer's reasoning, which
// comes before its text: the thinking block opened with the first, and a
// thinking_delta.
func (e *Events) Thinking(text string) []Event {
	out := e.open(nil)
	if text == "" || e.answered {
		return out
	}
	if !e.inThinking {
		e.index++
		e.inThinking = true
		empty, sig := "", ""
		out = append(out, Event{"type": "content_block_start", "index": e.index,
			"content_block": ContentBlock{Type: "thinking", Thinking: &empty, Signature: &sig}})
	}
	e.thinking.WriteString(text)
	return append(out, Event{"type": "content_block_delta", "index": e.index, "delta": map[string]string{"type": "thinking_delta", "thinking": text}})
}

// endThinking closes an open thinking block with its signature.
func (e *Events) endThinking(out []Event) []Event {
	if !e.inThinking {
		return out
	}
	e.inThinking = false
	return append(out,
		Event{"type": "content_block_delta", "index": e.index, "delta": map[string]string{"type": "signature_delta", "signature": Signature(e.thinking.String())}},
		Event{"type": "content_block_stop", "index": e.index})
}

// Piece are the events of a piece of the answer's text; none while the
// piece says nothing yet (the head of a call whose name is still coming).
func (e *Events) Piece(text string) []Event {
	out := e.open(nil)
	if text == "" {
		return out
	}
	out = e.endThinking(out)
	if e.calls == nil {
		return e.text(out, text)
	}
	for _, ev := range e.calls.Write(text) {
		out = e.event(out, ev)
	}
	return out
}

// End are the events that close the message.
func (e *Events) End(r genq.TextResult) []Event {
	out := e.open(nil)
	out = e.endThinking(out)
	if e.calls != nil {
		for _, ev := range e.calls.Close() {
			out = e.event(out, ev)
		}
	}
	if !e.answered { // an empty answer is still one text block
		out = e.startText(out)
	}
	out = append(out, Event{"type": "content_block_stop", "index": e.index})
	reason, seq := stopReason(r)
	u := usage(r.Usage)
	return append(out,
		Event{"type": "message_delta", "delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
			"usage": map[string]int{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "cache_read_input_tokens": u.CacheReadInputTokens, "cache_creation_input_tokens": 0}},
		Event{"type": "message_stop"})
}

// ErrorEvent is the event that ends a stream that failed after it began.
func ErrorEvent(err error) Event {
	return Event{"type": "error", "error": ErrorOf(err)}
}

func (e *Events) open(out []Event) []Event {
	if e.opened {
		return out
	}
	e.opened = true
	msg := Message{ID: MessageID(e.a.JobID), Type: "message", Role: genq.RoleAssistant, Model: e.a.Model, Content: []ContentBlock{},
		Usage: usage(e.prompt)}
	return append(out, Event{"type": "message_start", "message": msg}, Event{"type": "ping"})
}

// startText opens a text block, closing the block before it.
func (e *Events) startText(out []Event) []Event {
	if e.answered {
		out = append(out, Event{"type": "content_block_stop", "index": e.index})
	}
	e.index++
	e.isCall, e.answered = false, true
	empty := ""
	return append(out, Event{"type": "content_block_start", "index": e.index, "content_block": ContentBlock{Type: "text", Text: &empty}})
}

func (e *Events) text(out []Event, text string) []Event {
	if text == "" {
		return out
	}
	if !e.answered || e.isCall {
		out = e.startText(out)
	}
	return append(out, Event{"type": "content_block_delta", "index": e.index, "delta": map[string]string{"type": "text_delta", "text": text}})
}

// event adds the events of what a CallStream read: content as text, a
// call's start as a tool_use block, its arguments as input deltas. A
// reasoning block before the calls makes none, as the message holds only
// the calls.
func (e *Events) event(out []Event, ev toolcall.CallEvent) []Event {
	out = e.text(out, ev.Content)
	if ev.Start {
		if e.answered {
			out = append(out, Event{"type": "content_block_stop", "index": e.index})
		}
		e.index++
		e.isCall, e.answered = true, true
		block := ContentBlock{Type: "tool_use", ID: genq.ToolCallID(e.a.JobID, ev.Index), Name: ev.Name, Input: []byte("{}")}
		out = append(out, Event{"type": "content_block_start", "index": e.index, "content_block": block})
	}
	if ev.Arguments != "" {
		out = append(out, Event{"type": "content_block_delta", "index": e.index, "delta": map[string]string{"type": "input_json_delta", "partial_json": ev.Arguments}})
	}
	return out
}
