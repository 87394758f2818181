package textgen

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/tinygguf"
)

// openGPTOSS opens a tiny gpt-oss model, whose template speaks harmony.
func openGPTOSS(t *testing.T) *Backend {
	t.Helper()
	p := filepath.Join(t.TempDir(), tinygguf.FamilyFileName(tinygguf.FamilyGPTOSS, genq.VariantB, "tiny"))
	opts := tinygguf.OptionsFor(genq.VariantB, "tiny", 1)
	opts.Family = tinygguf.FamilyGPTOSS
	if err := tinygguf.Write(p, opts); err != nil {
		t.Fatal(err)
	}
	b, err := Open(context.Background(), Config{ModelFile: p, Slots: 2, Threads: 1, MaxNewTokens: 512, ContextSize: 2048, FlashAttention: "off"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// harmonySyntax reports whether text holds a harmony header's token text.
func harmonySyntax(text string) bool {
	for _, tok := range append(toolcall.HarmonyTokens(), toolcall.HarmonyCall, toolcall.HarmonyReturn) {
		if strings.Contains(text, tok) {
			return true
		}
	}
	return false
}

var harmonyTool = []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "get_weather",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}`)}}}

// TestHarmonyPrompts: the prompt of a harmony chat ends as the job's
// thinking and tools want it: the analysis channel opened, or closed
// empty and followed by the final channel's header, or by the assistant's
// header alone when the answer may be a call.
func TestHarmonyPrompts(t *testing.T) {
	b := openGPTOSS(t)
	r := b.reasoning()
	if r == nil || r.harmony == nil {
		t.Fatal("gpt-oss's template and vocabulary: no harmony reasoning found")
	}
	user := []genq.Message{{Role: genq.RoleUser, Content: "Why is the sky blue?"}}
	for _, c := range []struct {
		name  string
		th    *genq.Thinking
		tools []genq.Tool
		end   string
	}{
		{"thinks", nil, nil, "<|start|>user<|message|>Why is the sky blue?<|end|><|start|>assistant<|channel|>analysis<|message|>"},
		{"thinks with tools", &genq.Thinking{Enabled: true}, harmonyTool, "<|start|>assistant<|channel|>analysis<|message|>"},
		{"off", &genq.Thinking{}, nil, "<|start|>assistant<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|>"},
		{"off with tools", &genq.Thinking{}, harmonyTool, "<|start|>assistant<|channel|>analysis<|message|><|end|><|start|>assistant"},
	} {
		prompt, err := b.jobPrompt(genq.Job{TextRequest: genq.TextRequest{Messages: user, Thinking: c.th, Tools: c.tools}})
		if err != nil {
			t.Fatal(err)
		}
		if text, _ := b.testDecode(prompt); !strings.HasSuffix(text, c.end) {
			t.Errorf("%s: the prompt ends %q, want %q", c.name, text[max(0, len(text)-len(c.end)-20):], c.end)
		}
	}
	// The effort a client names reaches the template, as gpt-oss knows
	// the levels; none named leaves the template's default.
	for effort, want := range map[string]string{"": "medium", "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"} {
		prompt, err := b.jobPrompt(genq.Job{TextRequest: genq.TextRequest{Messages: user, Thinking: &genq.Thinking{Enabled: true, Effort: effort}}})
		if err != nil {
			t.Fatal(err)
		}
		if text, _ := b.testDecode(prompt); !strings.Contains(text, "\nReasoning: "+want+"\n") {
			t.Errorf("effort %q: the prompt lacks Reasoning: %s:\n%s", effort, want, text)
		}
	}
}

// TestHarmonyReasoning: a harmony chat that thinks gets the analysis
// channel as its reasoning, non-empty and within its budget, and the final
// channel as its text, streamed as they come; one that does not think gets
// none; neither holds the channels' syntax. All of it by construction,
// whatever the random model draws.
func TestHarmonyReasoning(t *testing.T) {
	b := openGPTOSS(t)
	one := 1.0
	chat := func(th *genq.Thinking, seed int64) genq.Job {
		return genq.Job{Envelope: genq.Envelope{ID: "job-1"}, TextRequest: genq.TextRequest{
			Messages: []genq.Message{{Role: genq.RoleUser, Content: "Why is the sky blue?"}}, MaxTokens: 64,
			Thinking: th, Temperature: &one, Seed: &seed}}
	}
	for seed := range int64(4) {
		for _, budget := range []int{0, 3, 20} {
			job := chat(&genq.Thinking{Enabled: true, BudgetTokens: budget}, seed)
			var mu sync.Mutex
			var reasoning, text strings.Builder
			out, err := b.generateJobStream(t.Context(), job, func(p genq.TextPiece) {
				mu.Lock()
				defer mu.Unlock()
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
			if harmonySyntax(out.Reasoning) || harmonySyntax(out.Text) {
				t.Errorf("seed %d, budget %d: harmony syntax in the reasoning %q or the text %q", seed, budget, out.Reasoning, out.Text)
			}
			if reasoning.String() != out.Reasoning || text.String() != out.Text {
				t.Errorf("streamed %q / %q, result %q / %q", reasoning.String(), text.String(), out.Reasoning, out.Text)
			}
		}
		out, err := b.generateJob(t.Context(), chat(&genq.Thinking{}, seed))
		if err != nil || out.Reasoning != "" || out.ReasonTokens != 0 || harmonySyntax(out.Text) {
			t.Fatalf("thinking off: reasoning %q, text %q (%v)", out.Reasoning, out.Text, err)
		}
	}
}

// TestHarmonyToolCalls: a call that tool_choice forces is a harmony call
// on the commentary channel, held to its tool's schema, after the
// reasoning or without it, and read back as the call; a lazy answer's
// prose keeps no header.
func TestHarmonyToolCalls(t *testing.T) {
	b := openGPTOSS(t)
	for _, th := range []*genq.Thinking{{Enabled: true, BudgetTokens: 4}, {}} {
		for seed := range int64(3) {
			job := genq.Job{Envelope: genq.Envelope{ID: "job-1"}, TextRequest: genq.TextRequest{
				Messages: []genq.Message{{Role: genq.RoleUser, Content: "Weather in Oslo?"}}, Thinking: th, Seed: &seed,
				Tools: harmonyTool, ToolChoice: &genq.ToolChoice{Mode: genq.ToolChoiceRequired}}}
			out, err := b.generateJob(t.Context(), job)
			if err != nil {
				t.Fatal(err)
			}
			if out.FinishReason != genq.FinishToolCalls || len(out.ToolCalls) != 1 || out.ToolCalls[0].Function.Name != "get_weather" {
				t.Fatalf("thinking %v, seed %d: %s, calls %+v, text %q", th.Enabled, seed, out.FinishReason, out.ToolCalls, out.Text)
			}
			var args struct {
				City *string `json:"city"`
			}
			if err := json.Unmarshal([]byte(out.ToolCalls[0].Function.Arguments), &args); err != nil || args.City == nil {
				t.Errorf("arguments %s: %v", out.ToolCalls[0].Function.Arguments, err)
			}
			if th.Enabled && (out.Reasoning == "" || out.ReasonTokens > 4 || harmonySyntax(out.Reasoning)) {
				t.Errorf("reasoning %q in %d tokens", out.Reasoning, out.ReasonTokens)
			}
			if !strings.HasPrefix(out.Text, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>") {
				t.Errorf("the call's text %q", out.Text)
			}
		}
	}
	// tool_choice auto: prose or a call, never a header in the prose.
	one := 1.0
	for seed := range int64(6) {
		job := genq.Job{Envelope: genq.Envelope{ID: "job-1"}, TextRequest: genq.TextRequest{
			Messages: []genq.Message{{Role: genq.RoleUser, Content: "Weather in Oslo?"}}, Thinking: &genq.Thinking{}, Seed: &seed,
			MaxTokens: 48, Tools: harmonyTool, Temperature: &one}}
		var mu sync.Mutex
		var text strings.Builder
		out, err := b.generateJobStream(t.Context(), job, func(p genq.TextPiece) {
			mu.Lock()
			defer mu.Unlock()
			text.WriteString(p.Text)
		})
		if err != nil {
			t.Fatal(err)
		}
		if text.String() != out.Text {
			t.Errorf("seed %d: streamed %q, result %q", seed, text.String(), out.Text)
		}
		if len(out.ToolCalls) == 0 && out.FinishReason != genq.FinishLength && strings.HasPrefix(out.Text, toolcall.HarmonyFinal) {
			t.Errorf("seed %d: the prose keeps its header: %q", seed, out.Text)
		}
	}
}

// TestCutHarmonyHeader: the text of an answer that names its own channel
// is held while it may be a header; a header without a recipient is cut,
// with its tokens' entries; a call's header, and text that is no header,
// stay.
func TestCutHarmonyHeader(t *testing.T) {
	for _, c := range []struct {
		pieces []string
		holds  []bool
		want   string
	}{
		{[]string{"<|channel|>", "final", "<|message|>", "Hi"}, []bool{true, true, false, false}, "Hi"},
		{[]string{"<|channel|>commentary<|message|>", "Let me look."}, []bool{false, false}, "Let me look."},
		{[]string{"<|channel|>", "commentary to=functions.f", " <|constrain|>json<|message|>", "{}"}, []bool{true, true, false, false},
			"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"},
		{[]string{"<|", "Hello"}, []bool{true, false}, "<|Hello"},
		{[]string{"<|channel|>", strings.Repeat("x", harmonyHeaderMax), "Hi"}, []bool{true, false, false}, "Hi"},
		{[]string{"Hello"}, []bool{false}, "Hello"},
	} {
		seq := &sequence{req: &request{cutHeader: true}}
		for i, p := range c.pieces {
			seq.logprobs = append(seq.logprobs, genq.TokenLogprob{Logprob: genq.Logprob{Token: p}, Offset: seq.text.Len()})
			seq.text.WriteString(p)
			if got := seq.cutHarmonyHeader(); got != c.holds[i] {
				t.Errorf("%q, after %q: hold %v, want %v", c.pieces, p, got, c.holds[i])
			}
		}
		if seq.text.String() != c.want {
			t.Errorf("%q: text %q, want %q", c.pieces, seq.text.String(), c.want)
		}
		for _, lp := range seq.logprobs {
			if lp.Offset < 0 || lp.Offset >= len(c.want) || !strings.HasPrefix(c.want[lp.Offset:], lp.Token) {
				t.Errorf("%q: entry %q at %d in %q", c.pieces, lp.Token, lp.Offset, c.want)
			}
		}
	}
	// An answer cut while its text was a header has no text.
	seq := &sequence{req: &request{cutHeader: true}}
	seq.text.WriteString("<|channel|>fin")
	seq.dropUnreadHeader()
	if seq.text.Len() != 0 {
		t.Errorf("a header cut short is text %q", seq.text.String())
	}
}

// TestHarmonyResponseFormat: a harmony answer held to a schema is the
// final channel's body alone, after the reasoning or without it: JSON the
// schema accepts, whose strings hold no header token though the grammar's
// bytes would allow one.
func TestHarmonyResponseFormat(t *testing.T) {
	b := openGPTOSS(t)
	one := 1.0
	for _, th := range []*genq.Thinking{{Enabled: true, BudgetTokens: 4}, {}} {
		for seed := range int64(4) {
			job := genq.Job{Envelope: genq.Envelope{ID: "job-1"}, TextRequest: genq.TextRequest{
				Messages: []genq.Message{{Role: genq.RoleUser, Content: "A name, please."}}, Thinking: th, Seed: &seed, Temperature: &one,
				ResponseFormat: &genq.ResponseFormat{Type: genq.FormatJSONSchema, JSONSchema: &genq.JSONSchema{Name: "n",
					Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","maxLength":40}},"required":["name"],"additionalProperties":false}`)}}}}
			out, err := b.generateJob(t.Context(), job)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Name *string `json:"name"`
			}
			if out.FinishReason != genq.FinishStop || json.Unmarshal([]byte(out.Text), &v) != nil || v.Name == nil || harmonySyntax(out.Text) {
				t.Errorf("thinking %v, seed %d: %s %q", th.Enabled, seed, out.FinishReason, out.Text)
			}
			if th.Enabled && (out.Reasoning == "" || harmonySyntax(out.Reasoning)) {
				t.Errorf("thinking, seed %d: reasoning %q", seed, out.Reasoning)
			}
		}
	}
}
