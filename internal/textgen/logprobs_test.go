package textgen

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestLogprobs checks a job's log-probabilities against the raw logits of
// its first step, computed apart on the plain one-sequence path: the
// answer's first token is scored under the model's own softmax, before the
// temperature, penalties and biases that chose it.
func TestLogprobs(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 10, Slots: 2, Temperature: 0.8, TopK: 20, IgnoreEOS: true})
	ctx := context.Background()
	chat := []genq.Message{{Role: "user", Content: "tell me"}}
	raw := firstLogits(t, b, genq.Job{TextRequest: genq.TextRequest{Messages: chat}})
	logprob := func(id int32) float64 {
		var sum float64
		for _, l := range raw {
			sum += math.Exp(float64(l))
		}
		return float64(raw[id]) - math.Log(sum)
	}
	letterA, err := b.testEncode("A", false)
	if err != nil || len(letterA) != 1 {
		t.Fatalf("%v %v", letterA, err)
	}
	zero, seed := 0.0, int64(3)

	tests := []struct {
		name string
		job  genq.Job
		top  int
		// first is the id of the answer's first token; 0: the greedy one.
		first int32
	}{
		{"greedy with the top 5", genq.Job{TextRequest: genq.TextRequest{Temperature: &zero, Logprobs: true, TopLogprobs: 5}}, 5, -1},
		{"sampled, no top", genq.Job{TextRequest: genq.TextRequest{Logprobs: true, Seed: &seed}}, 0, -2},
		{"a bias chooses, the raw logits score", genq.Job{TextRequest: genq.TextRequest{Temperature: &zero, Logprobs: true, TopLogprobs: 3,
			LogitBias: map[int32]float64{letterA[0]: 100}}}, 3, letterA[0]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := tt.job
			job.Messages = chat
			g, err := b.generateJob(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Logprobs) == 0 || len(g.Logprobs) > g.Tokens {
				t.Fatalf("%d entries for %d tokens", len(g.Logprobs), g.Tokens)
			}
			first := g.Logprobs[0]
			id := tt.first
			switch id {
			case -1:
				id = int32(slices.Index(raw, slices.Max(raw)))
			case -2: // sampled: the token whose piece the entry holds
				id = -1
				for i := range raw {
					if piece, _ := b.testDecode([]int32{int32(i)}); piece == first.Token {
						id = int32(i)
						break
					}
				}
			}
			if piece, _ := b.testDecode([]int32{id}); first.Token != piece || !strings.HasPrefix(g.Text, strings.ToValidUTF8(piece, "\uFFFD")[:1]) {
				t.Fatalf("first entry %q, text %q; want token %d (%q)", first.Token, g.Text, id, piece)
			}
			if want := logprob(id); math.Abs(first.Logprob.Logprob-want) > 1e-3 {
				t.Fatalf("first token's logprob %v; the raw logits give %v", first.Logprob.Logprob, want)
			}
			for i, e := range g.Logprobs {
				if len(e.Top) != tt.top || e.Logprob.Logprob > 0 || len(e.Bytes) != len(e.Token) {
					t.Fatalf("entry %d: %+v; want %d alternatives and a logprob <= 0", i, e, tt.top)
				}
				if i > 0 && e.Offset < g.Logprobs[i-1].Offset || e.Offset > len(g.Text) {
					t.Fatalf("entry %d starts at %d, after %d, in a text of %d bytes", i, e.Offset, g.Logprobs[i-1].Offset, len(g.Text))
				}
				var mass float64
				for j, alt := range e.Top {
					mass += math.Exp(alt.Logprob)
					if j > 0 && alt.Logprob > e.Top[j-1].Logprob {
						t.Fatalf("entry %d: alternatives out of order: %+v", i, e.Top)
					}
				}
				if mass > 1+1e-6 {
					t.Fatalf("entry %d: the alternatives hold %v of the probability", i, mass)
				}
				if tt.first == -1 && (e.Top[0].Token != e.Token || e.Top[0].Logprob != e.Logprob.Logprob) {
					t.Fatalf("entry %d: greedy chose %q, but the most likely is %+v", i, e.Token, e.Top[0])
				}
			}
		})
	}

	t.Run("tokens from a stop string on are not the answer's", func(t *testing.T) {
		whole, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, Logprobs: true}})
		if err != nil {
			t.Fatal(err)
		}
		// The stop: the first one-byte token after the first that the
		// text does not hold before it.
		at := slices.IndexFunc(whole.Logprobs, func(e genq.TokenLogprob) bool {
			return e.Offset > 0 && len(e.Token) == 1 && e.Token[0] > ' ' && e.Token[0] < 0x7f && !strings.Contains(whole.Text[:e.Offset], e.Token)
		})
		if at < 0 {
			t.Fatalf("no token of %q serves as a stop string", whole.Text)
		}
		stop, cutAt := whole.Logprobs[at].Token, whole.Logprobs[at].Offset
		cut, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, Logprobs: true, Stop: genq.StopList{"\x01never", stop}}})
		if err != nil {
			t.Fatal(err)
		}
		if cut.Text != whole.Text[:cutAt] || len(cut.Logprobs) != at || cut.FinishReason != genq.FinishStop || cut.StopSequence != stop {
			t.Fatalf("with stop %q: %q and %d entries, stopped by %q; want %q and %d", stop, cut.Text, len(cut.Logprobs), cut.StopSequence, whole.Text[:cutAt], at)
		}
		if whole.StopSequence != "" {
			t.Fatalf("no stop string, yet stopped by %q", whole.StopSequence)
		}
	})
	t.Run("a count-only job counts its prompt and runs nothing", func(t *testing.T) {
		prompt, err := b.jobPrompt(genq.Job{TextRequest: genq.TextRequest{Messages: chat}})
		if err != nil {
			t.Fatal(err)
		}
		n, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, CountOnly: true, MaxTokens: 1}})
		if err != nil || n.PromptTokens != len(prompt) || n.Tokens != 0 || n.Text != "" {
			t.Fatalf("%+v, %v; want %d prompt tokens and no answer", n, err, len(prompt))
		}
	})
	t.Run("none asked, none given", func(t *testing.T) {
		g, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{Messages: chat, MaxTokens: 2}})
		if err != nil || g.Logprobs != nil {
			t.Fatalf("%v, %v", g.Logprobs, err)
		}
	})
}

// firstLogits runs job's prompt alone through the plain one-sequence path
// and returns the logits of the answer's first token.
func firstLogits(t *testing.T, b *Backend, job genq.Job) []float32 {
	t.Helper()
	prompt, err := b.jobPrompt(job)
	if err != nil {
		t.Fatal(err)
	}
	var logits []float32
	xerr := b.sched.exclusively(context.Background(), func() {
		defer b.clearSlot(0)
		b.sched.cache.take(0)
		if err = b.clearSlot(0); err != nil {
			return
		}
		pos := 0
		for in := prompt; len(in) > 0 && err == nil; {
			n := min(len(in), b.cfg.BatchSize)
			logits, err = b.forwardSequence(in[:n], pos, 0)
			in, pos = in[n:], pos+n
		}
		logits = slices.Clone(logits) // the engine's buffer is the next step's
	})
	if err = cmp.Or(xerr, err); err != nil {
		t.Fatal(err)
	}
	return logits
}

// TestScoredRowsBesideOthers: a step that carries requests of every kind
// (greedy, seeded, scored with logprobs, a top_k over the worker's) gives
// each the answer, and the log-probabilities, it gets alone.
func TestScoredRowsBesideOthers(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 12, Slots: 4, Temperature: 0.8, TopK: 20, IgnoreEOS: true})
	chat := func(content string) []genq.Message { return []genq.Message{{Role: "user", Content: content}} }
	zero, seed, large := 0.0, int64(9), 200
	jobs := []genq.Job{
		{TextRequest: genq.TextRequest{Messages: chat("greedy"), Temperature: &zero}},
		{TextRequest: genq.TextRequest{Messages: chat("sampled"), Seed: &seed}},
		{TextRequest: genq.TextRequest{Messages: chat("scored"), Temperature: &zero, Logprobs: true, TopLogprobs: 2}},
		{TextRequest: genq.TextRequest{Messages: chat("large top-k"), Seed: &seed, TopK: &large}},
	}
	together, errs := jobsTogether(t, b, jobs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := b.sched.stats.maxSequences.Load(); n < 2 {
		t.Fatalf("at most %d sequence(s) shared a step: the check below proves nothing", n)
	}
	for i, job := range jobs {
		alone, err := b.generateJob(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if together[i].Text != alone.Text || len(together[i].Logprobs) != len(alone.Logprobs) {
			t.Errorf("job %d: beside the others %q (%d logprobs), alone %q (%d)", i, together[i].Text, len(together[i].Logprobs), alone.Text, len(alone.Logprobs))
		}
		for j := range alone.Logprobs {
			if d := together[i].Logprobs[j].Logprob.Logprob - alone.Logprobs[j].Logprob.Logprob; math.Abs(d) > 1e-4 {
				t.Errorf("job %d, token %d: logprob %v beside the others, %v alone", i, j, together[i].Logprobs[j].Logprob.Logprob, alone.Logprobs[j].Logprob.Logprob)
			}
		}
	}
}

// TestEchoScoresThePrompt: a job that echoes its prompt with logprobs gets
// every prompt token back, each after the first scored against the raw
// logits of the prompt before it, computed apart on the plain path; and it
// answers as it does without the echo, beside other jobs.
func TestEchoScoresThePrompt(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 6, Slots: 3, BatchSize: 5, IgnoreEOS: true})
	ctx := context.Background()
	prompt, err := b.testEncode("Once upon a time there was a queue", true)
	if err != nil || len(prompt) < 8 {
		t.Fatalf("%v %v", prompt, err)
	}
	zero := 0.0
	echo := genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, Temperature: &zero, Echo: true, Logprobs: true, TopLogprobs: 2}}
	plain := genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, Temperature: &zero}}
	other := genq.Job{TextRequest: genq.TextRequest{Prompt: "Something else entirely", Temperature: &zero}}
	together, errs := jobsTogether(t, b, []genq.Job{echo, other, plain})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, alone := together[0], together[2]
	if got.Text != alone.Text {
		t.Fatalf("echoing changed the answer: %q, without the echo %q", got.Text, alone.Text)
	}
	if otherAlone, err := b.generateJob(ctx, other); err != nil || together[1].Text != otherAlone.Text {
		t.Fatalf("the job beside the echo answered %q, alone %q (%v)", together[1].Text, otherAlone.Text, err)
	}
	if len(got.PromptLogprobs) != len(prompt) {
		t.Fatalf("%d prompt entries for %d tokens", len(got.PromptLogprobs), len(prompt))
	}
	if first := got.PromptLogprobs[0]; first.Logprob.Logprob != 0 || first.Top != nil {
		t.Fatalf("the first prompt token is scored: %+v", first)
	}
	// The prompt's text is its tokens that are text: BOS is not.
	var text strings.Builder
	for _, id := range prompt[1:] {
		piece, _ := b.testDecode([]int32{id})
		text.WriteString(piece)
	}
	if got.PromptText != text.String() {
		t.Fatalf("prompt text %q, want %q", got.PromptText, text.String())
	}
	for _, i := range []int{1, len(prompt) / 2, len(prompt) - 1} {
		raw := firstLogits(t, b, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt[:i]}})
		var sum float64
		for _, l := range raw {
			sum += math.Exp(float64(l))
		}
		want := float64(raw[prompt[i]]) - math.Log(sum)
		if e := got.PromptLogprobs[i]; math.Abs(e.Logprob.Logprob-want) > 1e-3 || len(e.Top) != 2 {
			t.Errorf("prompt token %d: %+v; the raw logits give %v", i, e, want)
		}
	}
	// Echo without logprobs: the text alone.
	textOnly, err := b.generateJob(ctx, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, Temperature: &zero, Echo: true}})
	if err != nil || textOnly.PromptText != got.PromptText || textOnly.PromptLogprobs != nil {
		t.Fatalf("echo without logprobs: %q, %d entries, %v", textOnly.PromptText, len(textOnly.PromptLogprobs), err)
	}
}

// TestPromptOnlyScoresWithoutAnswering: a prompt-only job (max_tokens 0
// with echo) gets its prompt scored as an echo that answers gets it, no
// answer, and a finish of "length"; the job beside it answers as alone.
func TestPromptOnlyScoresWithoutAnswering(t *testing.T) {
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) { testPromptOnly(t, kv) })
	}
}

func testPromptOnly(t *testing.T, kv string) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 6, Slots: 3, BatchSize: 5, IgnoreEOS: true, KVUnified: kv})
	ctx := context.Background()
	prompt, err := b.testEncode("Once upon a time there was a queue", true)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	scored := genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, Temperature: &zero, Echo: true, Logprobs: true, TopLogprobs: 1, PromptOnly: true}}
	answered := scored
	answered.PromptOnly = false
	other := genq.Job{TextRequest: genq.TextRequest{Prompt: "Something else entirely", Temperature: &zero}}
	together, errs := jobsTogether(t, b, []genq.Job{scored, other, scored})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	want, err := b.generateJob(ctx, answered)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []seqResult{together[0], together[2]} {
		if got.Text != "" || got.Tokens != 0 || got.Logprobs != nil || got.FinishReason != genq.FinishLength {
			t.Fatalf("a prompt-only job answered %q (%d tokens, finish %q)", got.Text, got.Tokens, got.FinishReason)
		}
		if got.PromptText != want.PromptText || len(got.PromptLogprobs) != len(prompt) {
			t.Fatalf("prompt %q with %d entries, want %q with %d", got.PromptText, len(got.PromptLogprobs), want.PromptText, len(prompt))
		}
		for i, e := range got.PromptLogprobs {
			if w := want.PromptLogprobs[i]; math.Abs(e.Logprob.Logprob-w.Logprob.Logprob) > 1e-3 {
				t.Errorf("prompt token %d: %v, answering %v", i, e.Logprob.Logprob, w.Logprob.Logprob)
			}
		}
	}
	if otherAlone, err := b.generateJob(ctx, other); err != nil || together[1].Text != otherAlone.Text {
		t.Fatalf("the job beside answered %q, alone %q (%v)", together[1].Text, otherAlone.Text, err)
	}
	// The whole context may be prompt: no room is kept for an answer.
	long := genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, b.cfg.ContextSize), Echo: true, PromptOnly: true}}
	if _, err := b.newJobRequest(long); err != nil {
		t.Fatalf("a prompt-only job of the whole context: %v", err)
	}
}

// TestEchoScoresTokensOutsideTheText: a harness that scores a prompt with
// one answer token drops the answer's last entry; when that token is not
// the answer's text (it ends the turn, or is another special token), the
// entry is still there, so the drop takes it and not a prompt token. An
// answer that does not echo keeps no entry for it, as OpenAI's chats give
// none.
func TestEchoScoresTokensOutsideTheText(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 4, Slots: 2})
	ctx := context.Background()
	var eos, special int32 = -1, -1
	eos = b.stopTokens()[0]
	for id := range b.vocab.Size() {
		if b.vocab.IsControl(int32(id)) && !b.vocab.IsEndOfGeneration(int32(id)) {
			special = int32(id)
			break
		}
	}
	if eos < 0 || special < 0 {
		t.Fatalf("the tiny model has no end-of-turn (%d) or other special token (%d)", eos, special)
	}
	prompt, err := b.testEncode("Once upon a time", true)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	for _, tt := range []struct {
		name   string
		tok    int32
		finish string
	}{{"end of turn", eos, genq.FinishStop}, {"another special token", special, genq.FinishLength}} {
		t.Run(tt.name, func(t *testing.T) {
			forced := map[int32]float64{tt.tok: genq.MaxLogitBias}
			echo := genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, Temperature: &zero, Echo: true, Logprobs: true, TopLogprobs: 1, MaxTokens: 1, LogitBias: forced}}
			got, err := b.generateJob(ctx, echo)
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != "" || got.FinishReason != tt.finish || len(got.Logprobs) != 1 || got.Logprobs[0].Offset != 0 ||
				len(got.PromptLogprobs) != len(prompt) {
				t.Fatalf("answer %q (%s), %d entries %+v, %d prompt entries", got.Text, got.FinishReason, len(got.Logprobs), got.Logprobs, len(got.PromptLogprobs))
			}
			plain := echo
			plain.Echo = false
			if res, err := b.generateJob(ctx, plain); err != nil || res.FinishReason != tt.finish || len(res.Logprobs) != 0 {
				t.Fatalf("without echo: %d entries, finish %s, %v", len(res.Logprobs), res.FinishReason, err)
			}
		})
	}
}
