package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured"
)

// harmonySyntax reports whether text holds a harmony special token's text.
func harmonySyntax(text string) bool {
	for _, tok := range append(structured.HarmonyTokens(), structured.HarmonyCall, structured.HarmonyReturn) {
		if strings.Contains(text, tok) {
			return true
		}
	}
	return false
}

// testForcedCallShape: a chat whose tool_choice forces a call answers
// with the call, its arguments held to the tool's schema, the same whole
// and streamed (greedy, on a stack without a prefix cache), and no
// content.
func testForcedCallShape(t *testing.T, s *stack, user string) {
	t.Helper()
	body := `{` + user + `,"max_tokens":256,"temperature":0,"tool_choice":"required","parallel_tool_calls":false,
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
		"properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}}}]`
	r := s.postKey("/v1/chat/completions", "", body+`}`)
	if r.status != http.StatusOK {
		t.Fatalf("a forced call: %d %s", r.status, r.body)
	}
	whole := decodeAs[reasoningChat](t, r).Choices[0]
	if whole.FinishReason != genq.FinishToolCalls || len(whole.Message.ToolCalls) != 1 || whole.Message.ToolCalls[0].Function.Name != "get_weather" ||
		whole.Message.Content != nil {
		t.Fatalf("a forced call: %s", r.body)
	}
	var args struct {
		City *string `json:"city"`
	}
	if err := json.Unmarshal([]byte(whole.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args.City == nil {
		t.Fatalf("the call's arguments %q: %v", whole.Message.ToolCalls[0].Function.Arguments, err)
	}

	_, events := s.stream(t.Context(), "/v1/chat/completions", body+`,"stream":true}`, nil)
	var name, arguments, content, finish string
	for _, e := range events {
		if e.data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int `json:"index"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", e.data, err)
		}
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index != 0 {
					t.Fatalf("a second call streamed: %s", e.data)
				}
				name += tc.Function.Name
				arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if content != "" || name != "get_weather" || arguments != whole.Message.ToolCalls[0].Function.Arguments || finish != genq.FinishToolCalls {
		t.Fatalf("streamed content %q, call %s(%s), finish %q; whole %+v", content, name, arguments, finish, whole)
	}
}
