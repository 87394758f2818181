package chattemplate

import (
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/tinygguf"
)

// TestHarmonyTemplates: gpt-oss's own template and genq's harmony
// template are told harmony by their source, render tools themselves, and
// take an earlier answer's reasoning; genq's renders a conversation's
// reasoning, answer, call and result on their channels, and ends with the
// assistant's header for the model to name its channel.
func TestHarmonyTemplates(t *testing.T) {
	for name, src := range map[string]string{"gpt-oss-120b": readTemplate(t, "openai-gpt-oss-120b"), "genq": tinygguf.GPTOSSChatTemplate} {
		tmpl, err := New(src, SpecialTokens{BOS: "<|startoftext|>", EOS: "<|return|>"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := tmpl.Dialect(); d.Format != toolcall.Harmony || !d.Channels() || !tmpl.RendersTools() || !tmpl.ReadsReasoning() {
			t.Errorf("%s: dialect %s, renders tools %v, reads reasoning %v", name, d, tmpl.RendersTools(), tmpl.ReadsReasoning())
		}
		call := genq.ToolCall{ID: "call_1", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city":"Oslo"}`}}
		msgs := []genq.Message{{Role: genq.RoleSystem, Content: "Be brief."}, {Role: genq.RoleUser, Content: "Weather?"},
			{Role: genq.RoleAssistant, ReasoningContent: "They want the weather.", ToolCalls: []genq.ToolCall{call}},
			{Role: genq.RoleTool, ToolCallID: "call_1", Content: "3 degrees"}}
		tools := []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "get_weather", Description: "Weather of a city",
			Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}
		out, err := tmpl.Render(msgs, tools)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, want := range []string{"Be brief.", "get_weather", "<|channel|>analysis<|message|>They want the weather.<|end|>",
			"to=functions.get_weather", "3 degrees"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the prompt lacks %q:\n%s", name, want, out)
			}
		}
		if !strings.HasSuffix(out, toolcall.HarmonyAssistant) {
			t.Errorf("%s: the prompt ends %q", name, out[max(0, len(out)-40):])
		}
		if name != "genq" {
			continue
		}
		for _, want := range []string{"<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools",
			`<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>`,
			"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>3 degrees<|end|><|start|>assistant"} {
			if !strings.Contains(out, want) {
				t.Errorf("genq: the prompt lacks %q:\n%s", want, out)
			}
		}
	}
}
