package openai

import (
	"encoding/json"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// The api does not know which model answers: a streamed answer's calls, in
// any format genq knows and after a reasoning block or not, go out as
// deltas that join into the calls of the final result, which the worker
// parses knowing the model's dialect. Cut into pieces of a few bytes, as
// tokens come.
func TestStreamedCallsEveryFormat(t *testing.T) {
	tools := []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "get_weather"}}, {Type: "function", Function: genq.ToolFunction{Name: "ping"}}}
	calls := []genq.ToolCall{
		{ID: "a1B2c3D4e", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo \"}\" {", "days": [1, {"a": []}]}`}},
		{ID: "f5G6h7I8j", Function: genq.ToolCallFunction{Name: "ping", Arguments: `{}`}},
	}
	for _, f := range toolcall.ToolFormats() {
		for _, reasoning := range []bool{false, true} {
			d := toolcall.Dialect{Format: f, Reasoning: reasoning}
			text := f.Write(calls)
			if reasoning {
				text = "<think>\nThe user wants two things.\n</think>\n\n" + text
			}
			t.Run(d.String(), func(t *testing.T) {
				job := genq.Job{Envelope: genq.Envelope{ID: "0f-1e"}, TextRequest: genq.TextRequest{Tools: tools}}
				parsed, ok := d.Parse(text)
				if !ok {
					t.Fatalf("the worker does not parse %q", text)
				}
				result := TextResult{TextResult: genq.TextResult{GeneratedText: text, FinishReason: genq.FinishToolCalls}, JobID: job.ID}
				for i, p := range parsed {
					result.ToolCalls = append(result.ToolCalls, genq.ToolCall{ID: genq.ToolCallID(job.ID, i), Type: "function", Function: p})
				}
				final, _ := json.Marshal(RenderChat(result).Choices[0].Message.ToolCalls)

				chunks := NewChatChunks(Stream{JobID: job.ID}, []genq.Job{job})
				var streamed []genq.ToolCall
				content := ""
				add := func(c any) {
					if c == nil {
						return
					}
					for _, d := range c.(ChatCompletionChunk).Choices[0].Delta.ToolCalls {
						if d.Index == len(streamed) {
							streamed = append(streamed, genq.ToolCall{ID: d.ID, Type: d.Type, Function: genq.ToolCallFunction{Name: d.Function.Name}})
						}
						streamed[d.Index].Function.Arguments += d.Function.Arguments
					}
					content += c.(ChatCompletionChunk).Choices[0].Delta.Content
				}
				for i := 0; i < len(text); i += 3 {
					add(chunks.Piece(0, "", genq.TextPiece{Text: text[i:min(i+3, len(text))]}, i == 0))
				}
				add(chunks.Finish(0, genq.FinishToolCalls, false))
				got, _ := json.Marshal(streamed)
				if string(got) != string(final) || content != "" {
					t.Errorf("the deltas join into %s (content %q); the result has %s", got, content, final)
				}

				events := NewResponseEvents(ResponseStream{JobID: job.ID}, job)
				args := map[string]string{}
				var all []ResponseEvent
				for i := 0; i < len(text); i += 3 {
					all = append(all, events.Piece(text[i:min(i+3, len(text))])...)
				}
				all = append(all, events.End(result.TextResult)...)
				for _, e := range all {
					if e.Type() == "response.function_call_arguments.delta" {
						args[e["item_id"].(string)] += e["delta"].(string)
					}
					if e.Type() == "response.output_text.delta" {
						t.Errorf("a response of calls streams text %q", e["delta"])
					}
				}
				for i, c := range result.ToolCalls {
					item := functionCall(job.ID, i, c.Function.Name, "", "")
					if args[item.ID] != c.Function.Arguments {
						t.Errorf("call %d: the response's deltas join into %q, want %q", i, args[item.ID], c.Function.Arguments)
					}
				}
			})
		}
	}
}
