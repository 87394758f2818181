package textgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

var batchTexts = []string{
	"What is the capital of France?",
	"Write a haiku about the sea.",
	"a",
	"Explain continuous batching in one long sentence, please, with details.",
	"¿Qué tal? 日本語も",
	"Tell me a story.",
}

// TestBatchedGreedyMatchesSingle: a sequence's greedy answer must not depend
// on what else shares its steps, whether prompts are prefilled whole or in
// chunks mixed with other sequences' decoding, but where its two best
// tokens tie up to the kernels' rounding (greedyDiff).
//
// Chunks of a few tokens run on the 4-bit model only: llama.cpp's CPU
// product of BF16 weights takes another path for a matrix of one row
// (a prompt token alone in its part of a step) than for several, and on a
// tiny random-weight model, whose activations amplify any difference, the
// two part by 1e-2 in the logits and more a few tokens on.
func TestBatchedGreedyMatchesSingle(t *testing.T) {
	for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
		t.Run(string(v), func(t *testing.T) {
			cfg := Config{MaxNewTokens: 48, Slots: 1}
			single := openTiny(t, v, cfg)
			want := make([]seqResult, len(batchTexts))
			for i, job := range greedyJobs(batchTexts) {
				g, err := single.generateJob(context.Background(), job)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = g
			}
			if distinct := len(map[string]bool{want[0].Text: true, want[1].Text: true, want[3].Text: true}); distinct < 2 || want[0].Text == "" {
				t.Fatalf("greedy answers do not tell prompts apart: the comparison below would prove nothing")
			}
			for _, tc := range []struct {
				batch int
				kv    string
			}{
				{256, "off"}, {256, "on"}, // whole prompts
				{5, "off"}, {5, "on"}, // 5-token chunks mixed with decoding
			} {
				if tc.batch < 8 && v == genq.VariantB {
					continue
				}
				t.Run(fmt.Sprintf("batch %d kv-unified %s", tc.batch, tc.kv), func(t *testing.T) {
					cfg := Config{MaxNewTokens: 48, Slots: 4, BatchSize: tc.batch, KVUnified: tc.kv}
					b := openTiny(t, v, cfg)
					got, errs := jobsTogether(t, b, greedyJobs(batchTexts))
					if err := errors.Join(errs...); err != nil {
						t.Fatal(err)
					}
					for i := range got {
						if d := greedyDiff(got[i], want[i]); d != "" {
							t.Errorf("prompt %q, batched and alone: %s", batchTexts[i], d)
						}
					}
					if n := b.sched.stats.maxSequences.Load(); n < 2 {
						t.Errorf("at most %d sequence(s) shared a step: no batching happened", n)
					}
				})
			}
		})
	}
}

// TestSharedPrefixChangesNothing: sequences that start from the cached
// system prefix (kept when the prefix cache is off) answer exactly as ones
// that prefill their whole prompt.
func TestSharedPrefixChangesNothing(t *testing.T) {
	cfg := Config{MaxNewTokens: 40, Slots: 3, PrefixCache: "off"}
	shared := openTiny(t, genq.VariantB, cfg)
	cfg.noSharedPrefix = true
	whole := openTiny(t, genq.VariantB, cfg)
	if len(shared.prefix) == 0 || len(whole.prefix) != 0 {
		t.Fatalf("prefix lengths %d and %d", len(shared.prefix), len(whole.prefix))
	}
	got, want := concurrently(t, shared, batchTexts[:3]), concurrently(t, whole, batchTexts[:3])
	for i := range got {
		if got[i].Text != want[i].Text {
			t.Errorf("prompt %q:\nshared prefix %q\nwhole prompt  %q", batchTexts[i], got[i].Text, want[i].Text)
		}
	}
}

// TestJoinRunningBatch: a job that arrives while another decodes starts at
// the next step, not when the first one ends.
func TestJoinRunningBatch(t *testing.T) {
	// IgnoreEOS: a random model may stop early, and the first job must
	// still be running when the second arrives.
	b := openTiny(t, genq.VariantA, Config{Slots: 2, ContextSize: 4096, MaxNewTokens: 3000, IgnoreEOS: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		b.generate(ctx, "a long answer")
	}()
	waitFor(t, func() bool { return b.sched.stats.steps.Load() > 20 })

	secondDone := make(chan struct{})
	go func() {
		defer close(secondDone)
		b.generate(ctx, "another")
	}()
	waitFor(t, func() bool { return b.sched.stats.maxSequences.Load() == 2 })
	select {
	case <-firstDone:
		t.Fatal("the first job ended before the second joined: they never shared a step")
	default:
	}
	cancel()
	<-firstDone
	<-secondDone
}

// TestAllSequencesProgress runs more jobs than slots: every one must finish,
// and the queued ones must join the running batch rather than wait for it
// to drain.
func TestAllSequencesProgress(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 3, MaxNewTokens: 64, IgnoreEOS: true})
	texts := make([]string, 9)
	for i := range texts {
		texts[i] = fmt.Sprintf("job number %d", i)
	}
	got := concurrently(t, b, texts)
	for i, g := range got {
		if g.Tokens != 64 {
			t.Errorf("job %d generated %d tokens, want 64", i, g.Tokens)
		}
	}
	if n := b.sched.stats.maxSequences.Load(); n != 3 {
		t.Errorf("most sequences in a step = %d, want the 3 slots full", n)
	}
}

// TestCancelFreesSlot: with one slot, a cancelled job must return at once
// and let the next job start.
func TestCancelFreesSlot(t *testing.T) {
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) { testCancelFreesSlot(t, kv) })
	}
}

func testCancelFreesSlot(t *testing.T, kv string) {
	b := openTiny(t, genq.VariantB, Config{Slots: 1, ContextSize: 4096, MaxNewTokens: 4000, KVUnified: kv, IgnoreEOS: true})

	ctx, cancel := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() {
		_, err := b.generate(ctx, "a very long answer please")
		firstDone <- err
	}()
	// Let it decode for a while, so it really holds the slot.
	waitFor(t, func() bool { return b.sched.stats.steps.Load() > 20 })

	secondDone := make(chan error, 1)
	go func() {
		_, err := b.generate(context.Background(), "short")
		secondDone <- err
	}()
	waitFor(t, func() bool { return len(b.sched.submit) == 0 }) // handed to the scheduler

	cancelled := time.Now()
	cancel()
	select {
	case err := <-firstDone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled job returned %v; want context.Canceled", err)
		}
		if d := time.Since(cancelled); d > 100*time.Millisecond {
			t.Fatalf("cancelled job took %v to return", d)
		}
	case <-time.After(time.Second):
		t.Fatal("cancelled job still running after 1s")
	}
	// The second job may generate 4000 tokens; what matters is that it
	// takes the slot within a second of the cancel.
	waitFor(t, func() bool { return b.sched.stats.admitted.Load() == 2 })
	if d := time.Since(cancelled); d > time.Second {
		t.Fatalf("next job started %v after the cancel", d)
	}
	b.Close() // ends the long second job
	if err := <-secondDone; genq.ErrorCode(err) != genq.Unavailable {
		t.Fatalf("second job after Close: %v; want unavailable", err)
	}
}

// TestCancelledBeforeStart: a job cancelled while it waits for a slot never
// runs.
func TestCancelledBeforeStart(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, MaxNewTokens: 200, IgnoreEOS: true})
	var wg sync.WaitGroup
	wg.Go(func() { b.generate(context.Background(), "first") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err := b.generate(ctx, "never runs")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	wg.Wait()
	g, err := b.generate(context.Background(), "after")
	if err != nil || g.Tokens == 0 {
		t.Fatalf("job after a cancelled one: %+v, %v", g, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 1s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestManyPromptsInOneStep: as many new prompts as one step can carry,
// each a sequence of its own, and each answer is what it is alone.
func TestManyPromptsInOneStep(t *testing.T) {
	const n = 64
	// A batch wide enough for every prompt at once.
	b := openTiny(t, genq.VariantA, Config{MaxNewTokens: 3, Slots: n, ContextSize: 1024, BatchSize: 1024})
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("word %d", i)
	}
	got := concurrently(t, b, texts)
	single := openTiny(t, genq.VariantA, Config{MaxNewTokens: 3, Slots: 1})
	for i, text := range texts {
		want, err := single.generate(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		if got[i].Text != want.Text {
			t.Errorf("prompt %q: %q among %d, %q alone", text, got[i].Text, n, want.Text)
		}
	}
}
