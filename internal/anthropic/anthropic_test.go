package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestStopReason(t *testing.T) {
	for _, tt := range []struct {
		r      genq.TextResult
		reason string
		seq    string
	}{
		{genq.TextResult{FinishReason: genq.FinishStop}, "end_turn", ""},
		{genq.TextResult{FinishReason: genq.FinishStop, StopSequence: "\n\n"}, "stop_sequence", "\n\n"},
		{genq.TextResult{FinishReason: genq.FinishLength}, "max_tokens", ""},
		{genq.TextResult{FinishReason: genq.FinishToolCalls, ToolCalls: []genq.ToolCall{{ID: "c"}}}, "tool_use", ""},
	} {
		m := Answer{JobID: "j", Model: "m"}.Render(tt.r)
		if *m.StopReason != tt.reason || (m.StopSequence == nil) != (tt.seq == "") || m.StopSequence != nil && *m.StopSequence != tt.seq {
			t.Errorf("%+v: %s %v; want %s %q", tt.r, *m.StopReason, m.StopSequence, tt.reason, tt.seq)
		}
	}
}

func TestDecodeTurnsBlocksIntoAChat(t *testing.T) {
	body := `{"model":"m","max_tokens":10,"system":"sys","stop_sequences":["END"],"top_k":5,
		"messages":[{"role":"user","content":"weather?"},
		{"role":"assistant","content":[{"type":"text","text":"let me look"},{"type":"tool_use","id":"t1","name":"w","input":{"city":"Oslo"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"sunny"},{"type":"text","text":"and tomorrow?"}]}],
		"tools":[{"name":"w","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"w","disable_parallel_tool_use":true}}`
	var job genq.Job
	if _, err := Decode([]byte(body), 1<<20, &job); err != nil {
		t.Fatal(err)
	}
	roles := make([]string, len(job.Messages))
	for i, m := range job.Messages {
		roles[i] = m.Role
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,user" || job.Messages[2].ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` ||
		job.Messages[3].ToolCallID != "t1" || job.Messages[3].Content != "sunny" || job.MaxTokens != 10 || *job.TopK != 5 ||
		job.Stop[0] != "END" || job.ToolChoice.Function != "w" || *job.ParallelToolCalls || job.Tools[0].Function.Name != "w" {
		b, _ := json.Marshal(job)
		t.Fatalf("job %s", b)
	}
}

func TestEventsOfCalls(t *testing.T) {
	job := genq.Job{TextRequest: genq.TextRequest{Tools: []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "w"}}}, ToolChoice: &genq.ToolChoice{Mode: genq.ToolChoiceRequired}}}
	e := NewEvents(Answer{JobID: "j", Model: "m"}, job)
	var types []string
	var input string
	for _, ev := range append(e.Piece(`{"name": "w", "parameters": {"city": "Oslo"}}`), e.End(genq.TextResult{FinishReason: genq.FinishToolCalls,
		ToolCalls: []genq.ToolCall{{ID: genq.ToolCallID("j", 0)}}})...) {
		types = append(types, ev.Type())
		if d, ok := ev["delta"].(map[string]string); ok && d["type"] == "input_json_delta" {
			input += d["partial_json"]
		}
		if b, ok := ev["content_block"].(ContentBlock); ok && (b.Type != "tool_use" || b.Name != "w" || b.ID != genq.ToolCallID("j", 0)) {
			t.Errorf("block %+v", b)
		}
	}
	got := strings.Join(types, ",")
	if !strings.HasPrefix(got, "message_start,ping,content_block_start,content_block_delta") || !strings.HasSuffix(got, "content_block_stop,message_delta,message_stop") ||
		!json.Valid([]byte(input)) || !strings.Contains(input, "Oslo") {
		t.Fatalf("events %s, input %q", got, input)
	}
}

// TestThinking: a result's reasoning is a signed thinking block before its
// text, whole and streamed (thinking_delta, then signature_delta, each
// block at its own index), and before calls too; a thinking block sent
// back becomes the assistant turn's reasoning, and a redacted one is
// dropped.
func TestThinking(t *testing.T) {
	r := genq.TextResult{GeneratedText: "Blue.", Reasoning: "Light scatters.", FinishReason: genq.FinishStop}
	m := Answer{JobID: "j", Model: "m"}.Render(r)
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || *m.Content[0].Thinking != "Light scatters." ||
		!Signed("Light scatters.", *m.Content[0].Signature) || m.Content[1].Type != "text" || *m.Content[1].Text != "Blue." {
		b, _ := json.Marshal(m)
		t.Fatalf("message %s", b)
	}
	if Signed("Light scatters!", *m.Content[0].Signature) || Signed("Light scatters.", "sig") {
		t.Fatal("a signature signs another text")
	}

	for _, calls := range []bool{false, true} {
		job := genq.Job{}
		if calls {
			job.Tools = []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "w"}}}
			job.ToolChoice = &genq.ToolChoice{Mode: genq.ToolChoiceRequired}
		}
		e := NewEvents(Answer{JobID: "j", Model: "m"}, job)
		evs := append(e.Thinking("Light "), e.Thinking("scatters.")...)
		text := "Blue."
		if calls {
			text = `{"name": "w", "parameters": {"city": "Oslo"}}`
			r = genq.TextResult{GeneratedText: text, Reasoning: "Light scatters.", FinishReason: genq.FinishToolCalls, ToolCalls: []genq.ToolCall{{ID: genq.ToolCallID("j", 0)}}}
		}
		evs = append(evs, e.Piece(text)...)
		evs = append(evs, e.End(r)...)
		var got []string
		for _, ev := range evs {
			s := ev.Type()
			if i, ok := ev["index"].(int); ok {
				s += fmt.Sprint(i)
			}
			if d, ok := ev["delta"].(map[string]string); ok {
				s += ":" + d["type"]
				if d["type"] == "signature_delta" && !Signed("Light scatters.", d["signature"]) {
					t.Errorf("signature %q", d["signature"])
				}
			}
			if b, ok := ev["content_block"].(ContentBlock); ok {
				s += ":" + b.Type
			}
			got = append(got, s)
		}
		second := "content_block_start1:text,content_block_delta1:text_delta"
		if calls {
			second = "content_block_start1:tool_use,content_block_delta1:input_json_delta"
		}
		want := "message_start,ping,content_block_start0:thinking,content_block_delta0:thinking_delta,content_block_delta0:thinking_delta," +
			"content_block_delta0:signature_delta,content_block_stop0," + second + ",content_block_stop1,message_delta,message_stop"
		if strings.Join(got, ",") != want {
			t.Errorf("calls %v: events\n%s\nwant\n%s", calls, strings.Join(got, ","), want)
		}
	}

	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"q"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"redacted_thinking","data":"zz"},{"type":"text","text":"a"}]},
		{"role":"user","content":"q2"}]}`
	var job genq.Job
	if _, err := Decode([]byte(body), 1<<20, &job); err != nil {
		t.Fatal(err)
	}
	if a := job.Messages[1]; a.Role != genq.RoleAssistant || a.Content != "a" || a.ReasoningContent != "hmm" {
		t.Fatalf("assistant turn %+v", a)
	}
}
