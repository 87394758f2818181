package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// harmonySyntax reports whether text holds a harmony special token's text.
func harmonySyntax(text string) bool {
	for _, tok := range append(toolcall.HarmonyTokens(), toolcall.HarmonyCall, toolcall.HarmonyReturn) {
		if strings.Contains(text, tok) {
			return true
		}
	}
	return false
}

// testForcedCallShape: a chat whose tool_choice forces a call answers
// with the call, its arguments held to the tool's schema, the same whole
// and streamed (greedy, on a stack without a prefix cache), and no
// content; cut by max_tokens anywhere in it, whole and streamed still
// agree, and its format's syntax is never content.
func testForcedCallShape(t *testing.T, s *stack, user string) {
	t.Helper()
	body := func(maxTokens int) string {
		return `{` + user + `,"max_tokens":` + strconv.Itoa(maxTokens) + `,"temperature":0,"tool_choice":"required","parallel_tool_calls":false,
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
		"properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}}}]`
	}
	whole, streamed := forcedCall(t, s, body(256))
	if whole.FinishReason != genq.FinishToolCalls || len(whole.Message.ToolCalls) != 1 || whole.Message.ToolCalls[0].Function.Name != "get_weather" ||
		whole.Message.Content != nil {
		t.Fatalf("a forced call: %+v", whole)
	}
	var args struct {
		City *string `json:"city"`
	}
	if err := json.Unmarshal([]byte(whole.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args.City == nil {
		t.Fatalf("the call's arguments %q: %v", whole.Message.ToolCalls[0].Function.Arguments, err)
	}
	checkSameCall(t, whole, streamed)
	for _, n := range []int{1, 3, 8, 16, 24, 32} {
		whole, streamed := forcedCall(t, s, body(n))
		if whole.FinishReason == genq.FinishLength {
			if whole.Message.Content != nil && (harmonySyntax(*whole.Message.Content) || strings.Contains(*whole.Message.Content, "<tool_call>")) {
				t.Errorf("max_tokens %d: a cut call's syntax is content: %q", n, *whole.Message.Content)
			}
		}
		checkSameCall(t, whole, streamed)
	}
}

// testAutoCallShape: a harmony chat that may call a tool (tool_choice
// auto) answers in prose or with a call, the same whole and streamed, and
// its prose never holds the channels' syntax, its header cut.
func testAutoCallShape(t *testing.T, s *stack, user string) {
	t.Helper()
	for seed := range 4 {
		body := `{` + user + `,"max_tokens":48,"temperature":1,"seed":` + strconv.Itoa(seed) + `,"reasoning_effort":"none",
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
		"properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}}}]`
		whole, streamed := forcedCall(t, s, body)
		if whole.Message.Content != nil && harmonySyntax(*whole.Message.Content) {
			t.Errorf("seed %d: harmony syntax in the content %q", seed, *whole.Message.Content)
		}
		checkSameCall(t, whole, streamed)
	}
}

// streamedChoice is what a streamed chat's chunks join into.
type streamedChoice struct {
	name, arguments, content, finish string
}

// forcedCall posts body, a chat with tools, whole and streamed.
func forcedCall(t *testing.T, s *stack, body string) (chatChoiceOut, streamedChoice) {
	t.Helper()
	r := s.postKey("/v1/chat/completions", "", body+`}`)
	if r.status != http.StatusOK {
		t.Fatalf("a forced call: %d %s", r.status, r.body)
	}
	whole := decodeAs[reasoningChat](t, r).Choices[0]
	_, events := s.stream(t.Context(), "/v1/chat/completions", body+`,"stream":true}`, nil)
	var out streamedChoice
	for _, e := range events {
		if e.data == "[DONE]" {
			continue
		}
		var c streamChunk
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", e.data, err)
		}
		for _, ch := range c.Choices {
			out.content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index != 0 {
					t.Fatalf("a second call streamed: %s", e.data)
				}
				out.name += tc.Function.Name
				out.arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				out.finish = *ch.FinishReason
			}
		}
	}
	return whole, out
}

// checkSameCall fails unless a choice streamed says what it says whole:
// its content, its one call or none, its finish reason.
func checkSameCall(t *testing.T, whole chatChoiceOut, streamed streamedChoice) {
	t.Helper()
	content := ""
	if whole.Message.Content != nil {
		content = *whole.Message.Content
	}
	name, arguments := "", ""
	if len(whole.Message.ToolCalls) > 0 {
		name, arguments = whole.Message.ToolCalls[0].Function.Name, whole.Message.ToolCalls[0].Function.Arguments
	}
	if len(whole.Message.ToolCalls) > 1 || streamed.content != content || streamed.name != name || streamed.arguments != arguments ||
		streamed.finish != whole.FinishReason {
		t.Errorf("streamed %+v; whole %+v", streamed, whole)
	}
}
