package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
)

// reasoningMessage is a Messages answer as a thinking test reads it.
type reasoningMessage struct {
	Content []struct {
		Type      string  `json:"type"`
		Text      *string `json:"text"`
		Thinking  *string `json:"thinking"`
		Signature *string `json:"signature"`
		Name      string  `json:"name"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// reasoningChat is a chat completion as a reasoning test reads it.
type reasoningChat struct {
	Choices []chatChoiceOut `json:"choices"`
	Usage   struct {
		CompletionTokens        int `json:"completion_tokens"`
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// chatChoiceOut is a chat completion's choice as a reasoning test reads it.
type chatChoiceOut struct {
	Message struct {
		Content          *string         `json:"content"`
		ReasoningContent *string         `json:"reasoning_content"`
		ToolCalls        []genq.ToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// reasoningWorker serves a tiny model of family through the stack: greedy
// answers computed alike for every request (no prefix cache), at most 512
// tokens each.
func (s *stack) reasoningWorker(family tinygguf.Family) {
	s.t.Helper()
	path := filepath.Join(s.t.TempDir(), tinygguf.FamilyFileName(family, genq.VariantB, "tiny"))
	opts := tinygguf.OptionsFor(genq.VariantB, "tiny", 1)
	opts.Family = family
	if err := tinygguf.Write(path, opts); err != nil {
		s.t.Fatal(err)
	}
	b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: path, Slots: 2, Threads: 1, MaxNewTokens: 512,
		ContextSize: 4096, PrefixCache: "off"}, testLog(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { b.Close() })
	s.startWorkerBackend(b)
	s.waitLive(1)
}

// TestReasoning: a Qwen3-family model, whose template reasons, answers
// /v1/messages with a thinking block (non-empty, signed) then a text
// block, and /v1/chat/completions with reasoning_content, streamed and
// whole alike, the reasoning within its budget; a call forced after the
// reasoning is held to its schema; thinking disabled answers without it;
// and a Llama model, whose template does not reason, answers without
// thinking whatever the request asks. By construction on a random model:
// the worker opens the block in the prompt, bans the closer while it is
// empty and the end of the answer inside it, and forces the closer at
// the budget (Anthropic's 1,024 of 2,048, scaled to the worker's cap of
// 512: 256; a chat's default, half of its 512: 256), so greedy answers
// to one conversation match on both routes.
//
// gpt-oss, whose template speaks harmony, answers alike: its analysis
// channel is the reasoning, its final channel the text, and neither holds
// the channels' syntax.
func TestReasoning(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"Why is the sky blue?"}]`
	for _, family := range []tinygguf.Family{tinygguf.FamilyQwen3, tinygguf.FamilyGPTOSS} {
		t.Run(string(family), func(t *testing.T) { testReasoningFamily(t, family) })
	}

	t.Run("llama", func(t *testing.T) {
		s := newStack(t, stackOptions{})
		s.reasoningWorker(tinygguf.FamilyLlama)
		r := s.postKey("/v1/messages", "", `{"model":"m",`+user+`,"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024}}`)
		if msg := decodeAs[reasoningMessage](t, r); r.status != http.StatusOK || len(msg.Content) != 1 || msg.Content[0].Type != "text" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		_, events := s.stream(t.Context(), "/v1/messages", `{"model":"m",`+user+`,"max_tokens":16,"thinking":{"type":"adaptive"},"stream":true}`, nil)
		for _, e := range events {
			if strings.Contains(e.data, `"thinking`) || strings.Contains(e.data, "signature_delta") {
				t.Fatalf("a model that does not reason streamed %s", e.data)
			}
		}
		r = s.postKey("/v1/chat/completions", "", `{`+user+`,"max_tokens":16}`)
		if chat := decodeAs[reasoningChat](t, r); chat.Choices[0].Message.ReasoningContent != nil {
			t.Fatalf("%s", r.body)
		}
	})
}

// testReasoningFamily is TestReasoning on a model of family, whose
// template reasons.
func testReasoningFamily(t *testing.T, family tinygguf.Family) {
	const user = `"messages":[{"role":"user","content":"Why is the sky blue?"}]`
	s := newStack(t, stackOptions{})
	s.reasoningWorker(family)

	msgBody := `{"model":"m",` + user + `,"max_tokens":2048,"temperature":0,"thinking":{"type":"enabled","budget_tokens":1024}`
	r := s.postKey("/v1/messages", "", msgBody+`}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	msg := decodeAs[reasoningMessage](t, r)
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking == nil || strings.TrimSpace(*msg.Content[0].Thinking) == "" ||
		msg.Content[0].Signature == nil || *msg.Content[0].Signature == "" || msg.Content[1].Type != "text" || msg.Content[1].Text == nil ||
		msg.Usage.OutputTokens > 512 {
		t.Fatalf("message %s", r.body)
	}
	thinking, text := *msg.Content[0].Thinking, *msg.Content[1].Text

	chat := decodeAs[reasoningChat](t, s.postKey("/v1/chat/completions", "", `{`+user+`,"max_tokens":2048,"temperature":0}`))
	ch := chat.Choices[0]
	if ch.Message.ReasoningContent == nil || *ch.Message.ReasoningContent != thinking || ch.Message.Content == nil || *ch.Message.Content != text ||
		chat.Usage.CompletionTokensDetails == nil || chat.Usage.CompletionTokensDetails.ReasoningTokens < 1 ||
		chat.Usage.CompletionTokensDetails.ReasoningTokens > 256 || chat.Usage.CompletionTokens != msg.Usage.OutputTokens {
		b, _ := json.Marshal(chat)
		t.Fatalf("chat %s; the message thought %q and said %q in %d tokens", b, thinking, text, msg.Usage.OutputTokens)
	}

	// Streamed: a thinking block by thinking_delta and its signature,
	// then the text block, each joining into the whole answer's.
	_, events := s.stream(t.Context(), "/v1/messages", msgBody+`,"stream":true}`, nil)
	var blocks []string
	var sThinking, sText, signature string
	for _, e := range events {
		var ev struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
			Delta struct {
				Type      string `json:"type"`
				Text      string `json:"text"`
				Thinking  string `json:"thinking"`
				Signature string `json:"signature"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
			t.Fatalf("event %q: %v", e.data, err)
		}
		switch ev.Type {
		case "content_block_start":
			blocks = append(blocks, ev.ContentBlock.Type)
			if ev.Index != len(blocks)-1 {
				t.Errorf("block %d started at index %d", len(blocks)-1, ev.Index)
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "thinking_delta":
				sThinking += ev.Delta.Thinking
			case "signature_delta":
				signature = ev.Delta.Signature
			case "text_delta":
				sText += ev.Delta.Text
			}
		case "error":
			t.Fatalf("stream failed: %s", e.data)
		}
	}
	if strings.Join(blocks, ",") != "thinking,text" || sThinking != thinking || sText != text || signature != *msg.Content[0].Signature {
		t.Fatalf("streamed blocks %v, thinking %q, text %q, signature %q; whole %q, %q", blocks, sThinking, sText, signature, thinking, text)
	}

	// A chat streamed: reasoning_content deltas, then content.
	_, events = s.stream(t.Context(), "/v1/chat/completions", `{`+user+`,"max_tokens":2048,"temperature":0,"stream":true}`, nil)
	var cReasoning, cText string
	for _, e := range events {
		if e.data == "[DONE]" {
			continue
		}
		var c streamChunk
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", e.data, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.ReasoningContent != "" && cText != "" {
				t.Errorf("reasoning %q after content", ch.Delta.ReasoningContent)
			}
			cReasoning += ch.Delta.ReasoningContent
			cText += ch.Delta.Content
		}
	}
	if cReasoning != thinking || cText != text {
		t.Fatalf("chat streamed reasoning %q, content %q; whole %q, %q", cReasoning, cText, thinking, text)
	}

	// A response: a reasoning item before the message, whole and
	// streamed.
	r = s.postKey("/v1/responses", "", `{"input":"Why is the sky blue?","max_output_tokens":64}`)
	var resp struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil || r.status != http.StatusOK || len(resp.Output) != 2 || resp.Output[0].Type != "reasoning" ||
		len(resp.Output[0].Content) != 1 || resp.Output[0].Content[0].Type != "reasoning_text" || resp.Output[0].Content[0].Text == "" ||
		resp.Output[1].Type != "message" {
		t.Fatalf("response %d %s", r.status, r.body)
	}
	_, events = s.stream(t.Context(), "/v1/responses", `{"input":"Why is the sky blue?","max_output_tokens":64,"stream":true}`, nil)
	var rsReasoning string
	for _, e := range events {
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal([]byte(e.data), &ev) == nil && ev.Type == "response.reasoning_text.delta" {
			rsReasoning += ev.Delta
		}
	}
	if rsReasoning == "" {
		t.Fatalf("a streamed response gave no reasoning_text deltas: %d events", len(events))
	}

	// A thinking block sent back is accepted with its signature, as
	// it came, a random model's NULs included.
	back, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 16, "messages": []any{
		map[string]any{"role": "user", "content": "Why is the sky blue?"},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": thinking, "signature": *msg.Content[0].Signature},
			map[string]any{"type": "text", "text": text + "."}}},
		map[string]any{"role": "user", "content": "And at dusk?"}}})
	if r := s.postKey("/v1/messages", "", string(back)); r.status != http.StatusOK {
		t.Fatalf("thinking sent back: %d %s", r.status, r.body)
	}

	// A call required after the reasoning is held to its schema.
	// Its budget, 1,024 of 8,192 scaled to the cap, is 64 tokens: the
	// call's grammar bounds it well within the 447 left.
	r = s.postKey("/v1/messages", "", `{"model":"m",`+user+`,"max_tokens":8192,"temperature":1,"thinking":{"type":"enabled","budget_tokens":1024},
			"tool_choice":{"type":"any","disable_parallel_tool_use":true},"tools":[{"name":"get_weather","input_schema":{"type":"object",
			"properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}}]}`)
	call := decodeAs[reasoningMessage](t, r)
	if r.status != http.StatusOK || len(call.Content) != 2 || call.Content[0].Type != "thinking" || call.Content[1].Type != "tool_use" ||
		call.Content[1].Name != "get_weather" || call.StopReason != "tool_use" {
		t.Fatalf("a required call after thinking: %d %s", r.status, r.body)
	}

	// Thinking off: no thinking block, no reasoning_content.
	r = s.postKey("/v1/messages", "", `{"model":"m",`+user+`,"max_tokens":16,"thinking":{"type":"disabled"}}`)
	if off := decodeAs[reasoningMessage](t, r); len(off.Content) != 1 || off.Content[0].Type != "text" {
		t.Fatalf("thinking disabled: %s", r.body)
	}
	r = s.postKey("/v1/chat/completions", "", `{`+user+`,"max_tokens":16,"reasoning_effort":"none"}`)
	if off := decodeAs[reasoningChat](t, r); off.Choices[0].Message.ReasoningContent != nil || off.Usage.CompletionTokensDetails != nil {
		t.Fatalf("reasoning_effort none: %s", r.body)
	}
	if family == tinygguf.FamilyGPTOSS {
		if harmonySyntax(thinking) || harmonySyntax(text) {
			t.Fatalf("harmony syntax in the thinking %q or the text %q", thinking, text)
		}
		testAutoCallShape(t, s, user)
	}
	testForcedCallShape(t, s, user)
}
