package textgen

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestRenderMessages(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, SystemPrompt: "sys"})
	h := func(role, content string) string {
		return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + content + "<|eot_id|>"
	}
	gen := "<|start_header_id|>assistant<|end_header_id|>\n\n"
	tests := []struct {
		name string
		msgs []genq.Message
		want string
	}{
		{"the worker's system prompt goes first", []genq.Message{{Role: "user", Content: "hi"}},
			h("system", "sys") + h("user", "hi") + gen},
		{"the chat's own system message replaces it", []genq.Message{{Role: "system", Content: " brief "}, {Role: "user", Content: "hi"}},
			h("system", "brief") + h("user", "hi") + gen},
		{"multi-turn", []genq.Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}, {Role: "user", Content: "c"}},
			h("system", "sys") + h("user", "a") + h("assistant", "b") + h("user", "c") + gen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.renderChat(tt.msgs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("rendered\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestStopStrings: the answer ends before the first stop string, even one
// split over tokens, and never holds it.
func TestStopStrings(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, MaxNewTokens: 20})
	tests := []struct {
		name   string
		stop   []string
		pieces string // one token per character
		want   string
		doneAt int
	}{
		{"one token", []string{"c"}, "abcde", "ab", 2},
		{"over tokens", []string{"cd"}, "abcdef", "ab", 3},
		{"the first of several", []string{"e", "bc"}, "abcdef", "a", 2},
		{"none", []string{"z"}, "abc", "abc", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(nil, nil)
			req.stop = tt.stop
			seq := &sequence{req: req}
			doneAt := -1
			for i, c := range tt.pieces {
				id := b.vocab.Lookup(string(c))
				done, err := seq.accept(b.textModel, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				if done {
					doneAt = i
					break
				}
			}
			if got := seq.text.String() + seq.utf8.Flush(); got != tt.want || doneAt != tt.doneAt {
				t.Fatalf("text %q done at %d, want %q at %d", got, doneAt, tt.want, tt.doneAt)
			}
			if tt.doneAt >= 0 && req.res.FinishReason != genq.FinishStop {
				t.Fatalf("finish reason %q", req.res.FinishReason)
			}
		})
	}
}

// TestJobParameters runs jobs with their own parameters through the
// scheduler: limits, finish reasons, token counts, raw prompts, seeds, and
// greedy and sampled rows in one batch with device narrowing.
func TestJobParameters(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 12, Temperature: 0.8, TopK: 20, IgnoreEOS: true})
	ctx := context.Background()
	chat := []genq.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}, {Role: "user", Content: "more"}}
	zero, seed := 0.0, int64(7)

	t.Run("max tokens over the cap: the cap", func(t *testing.T) {
		got, err := b.generateJob(ctx, genq.Job{Envelope: genq.Envelope{ID: "x", Variant: "B"}, TextRequest: genq.TextRequest{Messages: chat, MaxTokens: 13}})
		if err != nil || got.Tokens != 12 || got.FinishReason != genq.FinishLength {
			t.Fatalf("answered %d tokens, finish %q (%v); want the cap's 12, length", got.Tokens, got.FinishReason, err)
		}
	})
	t.Run("invalid job", func(t *testing.T) {
		_, err := b.Generate(ctx, genq.Job{Envelope: genq.Envelope{ID: "x", Variant: "B"}, TextRequest: genq.TextRequest{Prompt: "p", Stop: genq.StopList{""}}}, func(genq.Progress) {})
		if genq.ErrorCode(err) != genq.Invalid {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("detailed result", func(t *testing.T) {
		res, err := b.Generate(ctx, genq.Job{Envelope: genq.Envelope{ID: "x", Variant: "B"}, TextRequest: genq.TextRequest{Messages: chat, MaxTokens: 5, Temperature: &zero}}, func(genq.Progress) {})
		if err != nil {
			t.Fatal(err)
		}
		var body genq.TextResult
		if err := json.Unmarshal(res.Data, &body); err != nil {
			t.Fatal(err)
		}
		if body.FinishReason != genq.FinishLength || body.Usage == nil || body.Usage.CompletionTokens != 5 || body.Usage.PromptTokens < 20 {
			t.Fatalf("result %s", res.Data)
		}
	})
	t.Run("text jobs keep the one-field result of POST /generate", func(t *testing.T) {
		res, err := b.Generate(ctx, genq.Job{Envelope: genq.Envelope{ID: "x", Variant: "B", Text: "hi"}, TextRequest: genq.TextRequest{MaxTokens: 2}}, func(genq.Progress) {})
		if err != nil {
			t.Fatal(err)
		}
		if s := string(res.Data); !strings.HasPrefix(s, `{"generated_text":`) || strings.Contains(s, "usage") {
			t.Fatalf("result %s", s)
		}
	})
	t.Run("a prompt of token ids is the prompt", func(t *testing.T) {
		ids, err := b.testEncode("Once upon a time", true)
		if err != nil {
			t.Fatal(err)
		}
		text, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Prompt: "Once upon a time", Temperature: &zero, MaxTokens: 6}})
		if err != nil {
			t.Fatal(err)
		}
		tokens, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: ids, Temperature: &zero, MaxTokens: 6}})
		if err != nil || tokens.Text != text.Text || tokens.PromptTokens != len(ids) {
			t.Fatalf("from ids %+v (%v); from the text %+v", tokens, err, text)
		}
	})
	t.Run("raw prompt is BOS and the text", func(t *testing.T) {
		g, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Prompt: "Once upon a time", MaxTokens: 3}})
		if err != nil {
			t.Fatal(err)
		}
		ids, _ := b.testEncode("Once upon a time", true)
		if g.PromptTokens != len(ids) || g.Tokens != 3 || g.FinishReason != genq.FinishLength {
			t.Fatalf("%+v; want %d prompt tokens", g, len(ids))
		}
	})
	t.Run("a request's top_k and min_p replace the worker's", func(t *testing.T) {
		greedy, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero}})
		if err != nil {
			t.Fatal(err)
		}
		hot, one, all, sure := 2.0, 1, -1, 1.0
		seeds := []int64{1, 2, 3}
		for _, s := range seeds {
			for name, job := range map[string]genq.Job{
				"top_k 1 (narrowed on the device)": {TextRequest: genq.TextRequest{Messages: chat, Temperature: &hot, TopK: &one, Seed: &s}},
				"min_p 1 (whole rows: top_k -1)":   {TextRequest: genq.TextRequest{Messages: chat, Temperature: &hot, TopK: &all, MinP: &sure, Seed: &s}},
			} {
				g, err := b.generateJob(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				if g.Text != greedy.Text {
					t.Errorf("%s, seed %d: %q; at temperature 2 only the best token may be drawn, as greedy draws %q", name, s, g.Text, greedy.Text)
				}
			}
		}
		hotAll, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &hot, TopK: &all, Seed: &seeds[0]}})
		if err != nil {
			t.Fatal(err)
		}
		if hotAll.Text == greedy.Text {
			t.Fatalf("at temperature 2 over every token the answer is greedy's %q: the checks above prove nothing", greedy.Text)
		}
	})
	t.Run("penalties and biases reach the sampler over device narrowing", func(t *testing.T) {
		// Both letters are raised far above the rest (whose logits the
		// tiny model keeps within ±10), A by 40 more than B: greedy picks
		// A every time, whatever the model slightly prefers. A frequency
		// penalty of 100 per use takes more than that lead from A once it
		// has been used once more than B, so the letters take turns.
		var ids []int32
		for _, letter := range []string{"A", "B"} {
			tok, err := b.testEncode(letter, false)
			if err != nil || len(tok) != 1 {
				t.Fatalf("%q encodes to %v, %v", letter, tok, err)
			}
			ids = append(ids, tok[0])
		}
		bias := map[int32]float64{ids[0]: 1000, ids[1]: 960}
		heavy := 100.0
		biased, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, LogitBias: bias}})
		if err != nil {
			t.Fatal(err)
		}
		penalised, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, LogitBias: bias, FrequencyPenalty: &heavy}})
		if err != nil {
			t.Fatal(err)
		}
		if biased.Text != strings.Repeat("A", 12) {
			t.Fatalf("biased greedy answer %q: want 12 of the letter raised most", biased.Text)
		}
		if penalised.Text != strings.Repeat("AB", 6) {
			t.Fatalf("penalised answer %q: want the raised letters taking turns", penalised.Text)
		}
		_, err = b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, LogitBias: map[int32]float64{1 << 20: 1}}})
		if genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), "vocabulary has tokens 0 to") {
			t.Fatalf("a bias beyond the vocabulary: %v", err)
		}
	})
	t.Run("a seed replays, greedy and sampled rows share a batch", func(t *testing.T) {
		jobs := []genq.Job{
			{TextRequest: genq.TextRequest{Messages: chat, Seed: &seed}},
			{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero}},
			{TextRequest: genq.TextRequest{Messages: chat, Seed: &seed}},
			{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero}},
		}
		out := make([]seqResult, len(jobs))
		errs := make([]error, len(jobs))
		done := make(chan int)
		for i, j := range jobs {
			go func() { out[i], errs[i] = b.generateJob(ctx, j); done <- i }()
		}
		for range jobs {
			<-done
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("job %d: %v", i, err)
			}
		}
		alone, err := b.generateJob(ctx, jobs[1])
		if err != nil {
			t.Fatal(err)
		}
		if out[1].Text != out[3].Text || out[1].Text != alone.Text {
			t.Fatalf("greedy answers differ: %q %q %q", out[1].Text, out[3].Text, alone.Text)
		}
	})
}

// TestVLLMExtras: ignore_eos and repetition_penalty reach the sampler and
// the stop check, each shown by a choice the test forces.
func TestVLLMExtras(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 12, Temperature: 0.8, TopK: 20})
	ctx := context.Background()
	chat := []genq.Message{{Role: "user", Content: "hi"}}
	zero := 0.0
	var eos int32 = -1
	eos = b.stopTokens()[0]
	// An end-of-turn token raised far above the rest ends the answer at
	// once, unless the job ignores it.
	toEOS := map[int32]float64{eos: 100}
	ended, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, LogitBias: toEOS}})
	if err != nil || ended.Tokens != 1 || ended.FinishReason != genq.FinishStop || ended.Text != "" {
		t.Fatalf("with the end-of-turn token raised: %+v, %v", ended, err)
	}
	ignored, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, LogitBias: toEOS, IgnoreEOS: true, MaxTokens: 7}})
	if err != nil || ignored.Tokens != 7 || ignored.FinishReason != genq.FinishLength {
		t.Fatalf("ignoring it: %+v, %v", ignored, err)
	}

	// The repetition penalty counts the prompt's tokens as seen. Two
	// tokens are raised far above the rest: x, a token of the prompt, and
	// y, one outside it, by biases computed from the first step's raw
	// logits so that greedy picks x without the penalty and y with it,
	// each by half what the penalty takes from x's logit. The choice is
	// the test's arithmetic, not the model's: it holds on any CPU.
	prompt, err := b.testEncode("Once upon a time", true)
	if err != nil {
		t.Fatal(err)
	}
	raw := firstLogits(t, b, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt}})
	strong := 10.0
	penalised := func(l float32) float64 { // as sample.Sampler's repeat
		if l > 0 {
			return float64(l) / strong
		}
		return float64(l) * strong
	}
	x := prompt[1]
	for _, id := range prompt[1:] {
		if float64(raw[id])-penalised(raw[id]) > float64(raw[x])-penalised(raw[x]) {
			x = id
		}
	}
	y, err := b.testEncode("Q", false)
	if err != nil || len(y) != 1 || slices.Contains(prompt, y[0]) {
		t.Fatalf("%q encodes to %v (%v): want one token outside the prompt %v", "Q", y, err, prompt)
	}
	margin := (float64(raw[x]) - penalised(raw[x])) / 2
	if margin < 0.5 {
		t.Fatalf("the penalty takes only %v from the best of the prompt's logits", 2*margin)
	}
	bias := map[int32]float64{x: 100, y[0]: 100 + float64(raw[x]) - margin - float64(raw[y[0]])}
	pieces := map[int32]string{}
	for _, id := range []int32{x, y[0]} {
		if pieces[id], err = b.testDecode([]int32{id}); err != nil {
			t.Fatal(err)
		}
	}
	first := func(penalty *float64) string {
		t.Helper()
		g, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, Temperature: &zero, LogitBias: bias, RepetitionPenalty: penalty, MaxTokens: 1}})
		if err != nil || g.Tokens != 1 {
			t.Fatalf("%+v, %v", g, err)
		}
		return g.Text
	}
	if got := first(nil); got != pieces[x] {
		t.Fatalf("without a repetition penalty: %q; want the prompt's token %q (%d), ahead by %v", got, pieces[x], x, margin)
	}
	if got := first(&strong); got != pieces[y[0]] {
		t.Fatalf("repetition penalty 10: %q; want %q (%d), ahead of the prompt's %q by %v", got, pieces[y[0]], y[0], pieces[x], margin)
	}
}
