package textgen

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// openQwen3 opens a tiny Qwen3 model, whose template reasons.
func openQwen3(t *testing.T) *Backend {
	t.Helper()
	p := filepath.Join(t.TempDir(), tinygguf.FamilyFileName(tinygguf.FamilyQwen3, genq.VariantB, "tiny"))
	opts := tinygguf.OptionsFor(genq.VariantB, "tiny", 1)
	opts.Family = tinygguf.FamilyQwen3
	if err := tinygguf.Write(p, opts); err != nil {
		t.Fatal(err)
	}
	b, err := Open(context.Background(), Config{ModelFile: p, Slots: 2, Threads: 1, MaxNewTokens: 512, ContextSize: 1024, FlashAttention: "off"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestReasoning: on a model whose template reasons, a chat that thinks
// gets its reasoning apart from its text, non-empty and within its budget
// (the closer forced there), streamed as it comes, the pieces joining
// into the result; one that does not think gets an empty block in its
// prompt and no reasoning; and a call forced after the reasoning is
// still held to its grammar. All of it by construction, whatever the
// random model draws.
func TestReasoning(t *testing.T) {
	b := openQwen3(t)
	if b.reasoning() == nil {
		t.Fatal("Qwen3's template and vocabulary: no reasoning found")
	}
	one := 1.0
	chat := func(th *genq.Thinking, seed int64) genq.Job {
		return genq.Job{Envelope: genq.Envelope{ID: "job-1"}, TextRequest: genq.TextRequest{
			Messages: []genq.Message{{Role: genq.RoleUser, Content: "Why is the sky blue?"}}, MaxTokens: 64,
			Thinking: th, Temperature: &one, Seed: &seed}}
	}

	prompt, err := b.jobPrompt(chat(nil, 1))
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := b.testDecode(prompt); !strings.HasSuffix(text, "<|im_start|>assistant\n<think>\n") {
		t.Fatalf("a thinking prompt ends %q", text[max(0, len(text)-40):])
	}
	prompt, _ = b.jobPrompt(chat(&genq.Thinking{}, 1))
	if text, _ := b.testDecode(prompt); !strings.HasSuffix(text, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Fatalf("a prompt that does not think ends %q", text[max(0, len(text)-40):])
	}

	for seed := range int64(4) {
		for _, budget := range []int{0, 3, 20} {
			job := chat(&genq.Thinking{Enabled: true, BudgetTokens: budget}, seed)
			var mu sync.Mutex
			var reasoning, text strings.Builder
			out, err := b.generateJobStream(t.Context(), job, func(p genq.TextPiece) {
				mu.Lock()
				defer mu.Unlock()
				if p.Reasoning != "" && text.Len() > 0 {
					t.Errorf("reasoning %q streamed after text", p.Reasoning)
				}
				reasoning.WriteString(p.Reasoning)
				text.WriteString(p.Text)
			})
			if err != nil {
				t.Fatal(err)
			}
			want := budget
			if want == 0 {
				want = 32 // half of max_tokens
			}
			if strings.TrimSpace(out.Reasoning) == "" || out.ReasonTokens < 1 || out.ReasonTokens > want {
				t.Errorf("seed %d, budget %d: reasoning %q in %d tokens", seed, budget, out.Reasoning, out.ReasonTokens)
			}
			if strings.Contains(out.Reasoning, "</think>") {
				t.Errorf("the closer is in the reasoning %q", out.Reasoning)
			}
			if out.Tokens > 64 || out.Tokens < out.ReasonTokens+1 {
				t.Errorf("%d tokens, %d of reasoning", out.Tokens, out.ReasonTokens)
			}
			if reasoning.String() != out.Reasoning || text.String() != out.Text {
				t.Errorf("streamed %q / %q, result %q / %q", reasoning.String(), text.String(), out.Reasoning, out.Text)
			}
		}
		out, err := b.generateJob(t.Context(), chat(&genq.Thinking{}, seed))
		if err != nil || out.Reasoning != "" || out.ReasonTokens != 0 {
			t.Fatalf("thinking off: reasoning %q (%v)", out.Reasoning, err)
		}
	}

	// A required call after the reasoning: the grammar binds the text.
	job := chat(&genq.Thinking{Enabled: true, BudgetTokens: 4}, 3)
	job.MaxTokens = 0
	job.Tools = []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "get_weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}`)}}}
	job.ToolChoice = &genq.ToolChoice{Mode: genq.ToolChoiceRequired}
	no := false
	job.ParallelToolCalls = &no
	out, err := b.generateJob(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reasoning == "" || out.ReasonTokens > 4 || out.FinishReason != genq.FinishToolCalls || len(out.ToolCalls) != 1 {
		t.Fatalf("reasoning %q (%d tokens), %s, calls %+v, text %q", out.Reasoning, out.ReasonTokens, out.FinishReason, out.ToolCalls, out.Text)
	}
}

// TestReasoningCarriedBack: an earlier answer's reasoning reaches a
// template that reads reasoning_content (Qwen3's keeps it after the last
// user turn), and a template that does not never sees it.
func TestReasoningCarriedBack(t *testing.T) {
	b := openQwen3(t)
	msgs := []genq.Message{{Role: genq.RoleUser, Content: "Weather?"},
		{Role: genq.RoleAssistant, ReasoningContent: "They want the weather.", ToolCalls: []genq.ToolCall{{ID: "call_1", Type: "function",
			Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}},
		{Role: genq.RoleTool, ToolCallID: "call_1", Content: "3 degrees"}}
	text, err := b.renderChatThinking(msgs, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "<think>\nThey want the weather.\n</think>") {
		t.Fatalf("the reasoning sent back is not in the prompt:\n%s", text)
	}
	llama := openTiny(t, genq.VariantB, Config{})
	if llama.reasoning() != nil {
		t.Fatal("Llama 3's template does not reason")
	}
	prompt, err := llama.jobPrompt(genq.Job{TextRequest: genq.TextRequest{Messages: append(msgs[:1:1], genq.Message{Role: genq.RoleAssistant, Content: "Hi", ReasoningContent: "SECRET"}, genq.Message{Role: genq.RoleUser, Content: "Again"}),
		Thinking: &genq.Thinking{Enabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := llama.testDecode(prompt); strings.Contains(got, "SECRET") || strings.Contains(got, "<think>") {
		t.Fatalf("a template that does not reason got reasoning:\n%s", got)
	}
}
