package textgen

import (
	"context"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestUnbatchedMatchesScheduler: the plain one-sequence loop and the
// scheduler (shared prefix, chunked prefill, batched steps) are the same
// computation, so their greedy answers agree token for token. Interleaving
// them on one backend also shows each leaves the cache clean for the other.
func TestUnbatchedMatchesScheduler(t *testing.T) {
	for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
		t.Run(string(v), func(t *testing.T) {
			b := openTiny(t, v, Config{MaxNewTokens: 48, Slots: 1, BatchSize: 7})
			distinct := map[string]bool{}
			for _, text := range batchTexts {
				plain, err := b.GenerateUnbatched(context.Background(), text)
				if err != nil {
					t.Fatal(err)
				}
				scheduled, err := b.generate(context.Background(), text)
				if err != nil {
					t.Fatal(err)
				}
				if plain != scheduled.Text {
					t.Errorf("prompt %q:\nunbatched %q\nscheduler %q", text, plain, scheduled.Text)
				}
				distinct[scheduled.Text] = true
			}
			if len(distinct) < 2 {
				t.Fatalf("every prompt got the same answer: the comparison proves nothing")
			}
		})
	}
}

func TestUnbatchedHonoursCancel(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 8, Slots: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.GenerateUnbatched(ctx, "hello"); err == nil {
		t.Fatal("a cancelled context generated anyway")
	}
}
