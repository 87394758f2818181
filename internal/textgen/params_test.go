package textgen

import (
	"context"
	"encoding/json"
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
		// Both letters are raised far above the rest; greedy then picks
		// mostly the one the model slightly prefers, unless the frequency
		// penalty (2 per use) hands the turn to the other.
		var ids []int32
		for _, letter := range []string{"A", "B"} {
			tok, err := b.testEncode(letter, false)
			if err != nil || len(tok) != 1 {
				t.Fatalf("%q encodes to %v, %v", letter, tok, err)
			}
			ids = append(ids, tok[0])
		}
		bias := map[int32]float64{ids[0]: 100, ids[1]: 100}
		two := 2.0
		biased, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, LogitBias: bias}})
		if err != nil {
			t.Fatal(err)
		}
		penalised, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, LogitBias: bias, FrequencyPenalty: &two}})
		if err != nil {
			t.Fatal(err)
		}
		fewer := func(text string) int { return min(strings.Count(text, "A"), strings.Count(text, "B")) }
		if strings.Trim(biased.Text, "AB") != "" || len(biased.Text) != 12 || fewer(biased.Text) >= 3 {
			t.Fatalf("biased greedy answer %q: want 12 raised letters, mostly one of them", biased.Text)
		}
		if strings.Trim(penalised.Text, "AB") != "" || len(penalised.Text) != 12 || fewer(penalised.Text) < 3 {
			t.Fatalf("penalised answer %q: want 12 raised letters, taking turns", penalised.Text)
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
// the stop check.
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

	// The tiny model's greedy answer repeats a few tokens; a strong
	// repetition penalty spreads it over more (counted by the tokens'
	// pieces: their text alone reads U+FFFD for many).
	greedy, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, IgnoreEOS: true, Logprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	strong := 10.0
	spread, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, IgnoreEOS: true, Logprobs: true, RepetitionPenalty: &strong}})
	if err != nil {
		t.Fatal(err)
	}
	if distinct(spread.Logprobs) <= distinct(greedy.Logprobs) {
		t.Fatalf("repetition penalty 10: %q (%d distinct tokens), greedy %q (%d)", spread.Text, distinct(spread.Logprobs), greedy.Text, distinct(greedy.Logprobs))
	}
}

func distinct(entries []genq.TokenLogprob) int {
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Token] = true
	}
	return len(seen)
}
