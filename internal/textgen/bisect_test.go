package textgen

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestFailedStepIsBisected: a step that fails because of one sequence in
// it (a fault injected whenever that sequence has decoded a few tokens)
// fails that sequence alone; the others, which shared its steps, restart
// from their prompts and give the very answers they give alone (greedy).
func TestFailedStepIsBisected(t *testing.T) {
	errBad := errors.New("injected step failure")
	texts := batchTexts[:4]
	const poison = 3
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) {
			cfg := Config{MaxNewTokens: 24, Slots: 4, KVUnified: kv, IgnoreEOS: true}
			single := openTiny(t, genq.VariantB, Config{MaxNewTokens: 24, Slots: 1, IgnoreEOS: true})
			b := openTiny(t, genq.VariantB, cfg)
			bad, err := b.promptTokens(texts[poison])
			if err != nil {
				t.Fatal(err)
			}
			b.sched.fault = func(st *step) error {
				for _, seq := range st.seqs {
					if slices.Equal(seq.req.prompt, bad) && seq.generated >= 3 {
						return errBad
					}
				}
				return nil
			}
			got, errs := generateTogether(t, b, texts)
			for i, text := range texts {
				if i == poison {
					if !errors.Is(errs[i], errBad) {
						t.Errorf("the failing sequence got %v, want the step's error", errs[i])
					}
					continue
				}
				if errs[i] != nil {
					t.Errorf("prompt %q failed beside the failing one: %v", text, errs[i])
					continue
				}
				want, err := single.generate(context.Background(), text)
				if err != nil {
					t.Fatal(err)
				}
				if got[i].Text != want.Text || got[i].Tokens != 24 {
					t.Errorf("prompt %q after the bisection: %q (%d tokens), alone %q", text, got[i].Text, got[i].Tokens, want.Text)
				}
			}
			if n := b.sched.stats.maxSequences.Load(); n < 2 {
				t.Errorf("at most %d sequence(s) shared a step: nothing was bisected", n)
			}
		})
	}
}
