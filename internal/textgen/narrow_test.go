package textgen

import (
	"context"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestDeviceNarrowingMatchesHost: narrowing each row to its top-k in the
// step's graph (ggml's sort, here on the CPU backend) and sampling the
// survivors gives the very answers of copying whole rows to the host, for
// greedy and for seeded sampling, with pipelining on. Greedy runs the
// prompts together (batched steps) and also matches the plain one-sequence
// loop. Sampling runs them one at a time: a batch's composition depends on
// when requests arrive, and it moves the logits by rounding, which a
// seeded draw may feel.
func TestDeviceNarrowingMatchesHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"greedy", Config{Temperature: 0}},
		{"sampled", Config{Temperature: 0.9, TopK: 20, TopP: 0.95, Seed: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.cfg
			base.MaxNewTokens, base.Slots, base.Pipeline = 32, 4, "on"
			host, device := base, base
			host.Narrow, device.Narrow = "host", "device"
			hb := openTiny(t, genq.VariantB, host)
			db := openTiny(t, genq.VariantB, device)
			if hb.narrowK != 0 || db.narrowK < 4 {
				t.Fatalf("narrowK: host %d, device %d", hb.narrowK, db.narrowK)
			}
			run := concurrently
			if tc.cfg.Temperature > 0 {
				run = oneByOne
			}
			want := run(t, hb, batchTexts)
			got := run(t, db, batchTexts)
			distinct := map[string]bool{}
			for i := range want {
				if got[i].Text != want[i].Text {
					t.Errorf("prompt %q:\ndevice %q\nhost   %q", batchTexts[i], got[i].Text, want[i].Text)
				}
				distinct[want[i].Text] = true
			}
			if len(distinct) < 2 {
				t.Fatal("every prompt got the same answer: the comparison proves nothing")
			}
			if tc.cfg.Temperature == 0 {
				plain, err := db.GenerateUnbatched(context.Background(), batchTexts[1])
				if err != nil {
					t.Fatal(err)
				}
				if plain != want[1].Text {
					t.Errorf("unbatched %q, narrowed %q", plain, want[1].Text)
				}
			}
		})
	}
}

// Without top-k a sampler needs whole rows: nothing is narrowed.
func TestNoTopKNeedsWholeRows(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{Temperature: 1, TopP: 0.9, Narrow: "device", MaxNewTokens: 4})
	if b.narrowK != 0 {
		t.Fatalf("narrowK %d without a top-k", b.narrowK)
	}
	if _, err := b.generate(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
}

func oneByOne(t *testing.T, b *Backend, texts []string) []seqResult {
	t.Helper()
	out := make([]seqResult, len(texts))
	for i, text := range texts {
		g, err := b.generate(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = g
	}
	return out
}
