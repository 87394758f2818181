package openai

import (
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// ResponseEvents builds the events of one streamed response as its text
// comes: the response opened, then its output items, a message whose text
// grows by deltas or, for a job that offers tools, the calls it makes
// (read with toolcall.CallStream), whose arguments grow by deltas; at
// the end each item done and the whole response.
type ResponseEvents struct {
	s      ResponseStream
	calls  *toolcall.CallStream // nil: the answer is a message
	opened bool
	items  []*streamedItem
}

// streamedItem is an output item as it is streamed: the message, or a
// call.
type streamedItem struct {
	call      bool
	reasoning bool // the reasoning item, before the others
	done      bool // the reasoning item's done events are out
	name      string
	text      strings.Builder // the message's text, or the call's arguments
}

// NewResponseEvents starts the events of job's response.
func NewResponseEvents(s ResponseStream, job genq.Job) *ResponseEvents {
	e := &ResponseEvents{s: s}
	if mode := job.ToolMode(); mode != "" {
		e.calls = toolcall.NewCallStream(mode == genq.ToolChoiceAuto)
	}
	return e
}

// Piece are the events of a piece of the answer's text; none while the
// piece says nothing yet (the head of a call whose name is still coming).
func (e *ResponseEvents) Piece(text string) []ResponseEvent {
	out := e.open(nil)
	if e.calls == nil {
		return e.content(out, text)
	}
	for _, ev := range e.calls.Write(text) {
		out = e.event(out, ev)
	}
	return out
}

// Reasoning are the events of a piece of the answer's reasoning: a
// reasoning item, opened with the first, whose reasoning_text grows by
// deltas. Reasoning comes before any text.
func (e *ResponseEvents) Reasoning(text string) []ResponseEvent {
	out := e.open(nil)
	if text == "" {
		return out
	}
	if len(e.items) == 0 {
		e.items = append(e.items, &streamedItem{reasoning: true})
		item := e.s.reasoning("in_progress", "")
		item.Content = []reasoningPart{}
		out = append(out,
			ResponseEvent{"type": "response.output_item.added", "output_index": 0, "item": item},
			ResponseEvent{"type": "response.content_part.added", "item_id": item.ID, "output_index": 0, "content_index": 0,
				"part": reasoningPart{Type: "reasoning_text", Text: ""}})
	}
	it := e.items[len(e.items)-1]
	if !it.reasoning {
		return out // after the text: cannot happen
	}
	it.text.WriteString(text)
	return append(out, ResponseEvent{"type": "response.reasoning_text.delta", "item_id": "rs_" + e.s.JobID, "output_index": len(e.items) - 1,
		"content_index": 0, "delta": text})
}

// End are the events that close the stream: what was held back of a
// call, each item done, then the whole response, "response.completed" or,
// at the token limit, "response.incomplete".
func (e *ResponseEvents) End(r genq.TextResult) []ResponseEvent {
	out := e.open(nil)
	if e.calls != nil {
		for _, ev := range e.calls.Close() {
			out = e.event(out, ev)
		}
	}
	if len(e.items) == 0 || len(e.items) == 1 && e.items[0].reasoning && len(r.ToolCalls) == 0 {
		out = e.openMessage(out)
	}
	resp := e.s.Done(r)
	status := "completed"
	if resp.Status == "incomplete" {
		status = "incomplete"
	}
	resp.Output = resp.Output[:0]
	out = e.endReasoning(out, status)
	for i, it := range e.items {
		if it.reasoning {
			resp.Output = append(resp.Output, e.s.reasoning(status, it.text.String()))
			continue
		}
		if it.call {
			item := functionCall(e.s.JobID, e.callIndex(i), it.name, it.text.String(), status)
			out = append(out,
				ResponseEvent{"type": "response.function_call_arguments.done", "item_id": item.ID, "output_index": i, "arguments": item.Arguments},
				ResponseEvent{"type": "response.output_item.done", "output_index": i, "item": item})
			resp.Output = append(resp.Output, item)
			continue
		}
		msg := e.s.message(status, it.text.String())
		out = append(out,
			ResponseEvent{"type": "response.output_text.done", "item_id": msg.ID, "output_index": i, "content_index": 0,
				"text": it.text.String(), "logprobs": []any{}},
			ResponseEvent{"type": "response.content_part.done", "item_id": msg.ID, "output_index": i, "content_index": 0, "part": msg.Content[0]},
			ResponseEvent{"type": "response.output_item.done", "output_index": i, "item": msg})
		resp.Output = append(resp.Output, msg)
	}
	last := "response.completed"
	if resp.Status == "incomplete" {
		last = "response.incomplete"
	}
	return append(out, ResponseEvent{"type": last, "response": resp})
}

// endReasoning adds the events that close the reasoning item, once:
// before the next item opens, or at the end.
func (e *ResponseEvents) endReasoning(out []ResponseEvent, status string) []ResponseEvent {
	if len(e.items) == 0 || !e.items[0].reasoning || e.items[0].done {
		return out
	}
	it := e.items[0]
	it.done = true
	item := e.s.reasoning(status, it.text.String())
	return append(out,
		ResponseEvent{"type": "response.reasoning_text.done", "item_id": item.ID, "output_index": 0, "content_index": 0, "text": it.text.String()},
		ResponseEvent{"type": "response.content_part.done", "item_id": item.ID, "output_index": 0, "content_index": 0, "part": item.Content[0]},
		ResponseEvent{"type": "response.output_item.done", "output_index": 0, "item": item})
}

// open adds the events that open the response, once.
func (e *ResponseEvents) open(out []ResponseEvent) []ResponseEvent {
	if e.opened {
		return out
	}
	e.opened = true
	resp := e.s.object("in_progress")
	return append(out,
		ResponseEvent{"type": "response.created", "response": resp},
		ResponseEvent{"type": "response.in_progress", "response": resp})
}

// openMessage adds the message item, once it has text to carry.
func (e *ResponseEvents) openMessage(out []ResponseEvent) []ResponseEvent {
	if n := len(e.items); n > 0 && !e.items[n-1].call && !e.items[n-1].reasoning {
		return out
	}
	out = e.endReasoning(out, "completed")
	index := len(e.items)
	e.items = append(e.items, &streamedItem{})
	msg := e.s.message("in_progress", "")
	msg.Content = []responsePart{}
	return append(out,
		ResponseEvent{"type": "response.output_item.added", "output_index": index, "item": msg},
		ResponseEvent{"type": "response.content_part.added", "item_id": msg.ID, "output_index": index, "content_index": 0,
			"part": responsePart{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}})
}

func (e *ResponseEvents) content(out []ResponseEvent, text string) []ResponseEvent {
	if text == "" {
		return out
	}
	out = e.openMessage(out)
	index := len(e.items) - 1
	e.items[index].text.WriteString(text)
	return append(out, ResponseEvent{"type": "response.output_text.delta", "item_id": "msg_" + e.s.JobID, "output_index": index,
		"content_index": 0, "delta": text, "logprobs": []any{}})
}

// event adds the events of what a CallStream read; a reasoning block before
// the calls makes none, as the final response's output holds only the calls.
func (e *ResponseEvents) event(out []ResponseEvent, ev toolcall.CallEvent) []ResponseEvent {
	out = e.content(out, ev.Content)
	if ev.Start {
		out = e.endReasoning(out, "completed")
		e.items = append(e.items, &streamedItem{call: true, name: ev.Name})
		item := functionCall(e.s.JobID, ev.Index, ev.Name, "", "in_progress")
		out = append(out, ResponseEvent{"type": "response.output_item.added", "output_index": len(e.items) - 1, "item": item})
	}
	if ev.Arguments != "" {
		index := len(e.items) - 1
		e.items[index].text.WriteString(ev.Arguments)
		out = append(out, ResponseEvent{"type": "response.function_call_arguments.delta",
			"item_id": functionCall(e.s.JobID, ev.Index, "", "", "").ID, "output_index": index, "delta": ev.Arguments})
	}
	return out
}

// callIndex is the index among the calls of output item i.
func (e *ResponseEvents) callIndex(i int) int {
	n := 0
	for _, it := range e.items[:i] {
		if it.call {
			n++
		}
	}
	return n
}
