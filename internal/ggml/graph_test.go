package ggml

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"

	"github.com/genq/genq/internal/genq"
)

// afterPrefix marks a position as counted from the end of the shared
// prefix, which the test learns only from the backend.
const afterPrefix = 1 << 20

// graphStep is one forward step of a graph test: each token's sequence
// (slot) and position.
type graphStep struct {
	seqs      []int
	positions []int32
	// copyPrefix, when set, first gives slot copyPrefix-1 the shared prefix.
	copyPrefix int
}

// TestStreamGraphMatchesEngine: genq's llama graph with a stream per slot
// computes what the engine's own llama graph over its unified cache
// computes, step after step, for every kind of step the scheduler makes:
// prompt chunks beside single tokens, sequences out of slot order, slots
// with no token in the step, and a slot that starts from the shared prefix.
// Both kernels are covered: the plain one (with query heads folded onto
// their key head) and flash attention.
func TestStreamGraphMatchesEngine(t *testing.T) {
	steps := []graphStep{
		{seqs: []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 1}, positions: []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 0}},
		{seqs: []int{2, 0, 1, 1, 1}, positions: []int32{7, 10, 1, 2, 3}},
		{seqs: []int{2, 0}, positions: []int32{8, 11}}, // slot 1 idle: a hole in the range
		{seqs: []int{0}, positions: []int32{12}},
		{copyPrefix: 2, seqs: []int{0, 1, 1, 1, 1}, positions: []int32{13, afterPrefix, afterPrefix + 1, afterPrefix + 2, afterPrefix + 3}}, // slot 1 restarts from the prefix
		{seqs: []int{1, 0, 2}, positions: []int32{afterPrefix + 4, 14, 9}},
		{copyPrefix: 3, seqs: []int{0}, positions: []int32{15}}, // slot 2 restarts, its prompt a step later
		{seqs: []int{2, 2, 1}, positions: []int32{afterPrefix, afterPrefix + 1, afterPrefix + 5}},
	}
	for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
		for _, flash := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/flash=%v", v, flash), func(t *testing.T) {
				streams := openTiny(t, v, Config{Slots: 3, Graph: "streams", flashAttention: flash})
				engine := openTiny(t, v, Config{Slots: 3, Graph: "engine", flashAttention: flash})
				if _, ok := streams.graph.(*streamGraph); !ok {
					t.Fatalf("Graph streams got %T", streams.graph)
				}
				if _, ok := engine.graph.(*engineGraph); !ok {
					t.Fatalf("Graph engine got %T", engine.graph)
				}
				prefix := int32(len(streams.prefix))
				if prefix == 0 {
					t.Fatal("no shared prefix: the copy is untested")
				}
				for i, st := range steps {
					positions := append([]int32(nil), st.positions...)
					for j, p := range positions {
						if p >= afterPrefix {
							positions[j] = prefix + p - afterPrefix
						}
					}
					want := stepLogits(t, engine, st.copyPrefix, st.seqs, positions)
					got := stepLogits(t, streams, st.copyPrefix, st.seqs, positions)
					if len(got) != len(want) {
						t.Fatalf("step %d: %d logits, want %d", i, len(got), len(want))
					}
					worst, scale := 0.0, 0.0
					for k := range want {
						worst = max(worst, math.Abs(float64(got[k]-want[k])))
						scale = max(scale, math.Abs(float64(want[k])))
					}
					// The plain kernels agree to float rounding. The CPU flash
					// kernel holds its query and sums in F16, in cell order,
					// which differs between the two caches: flash against
					// plain on the same graph differs by about 1%.
					tolerance := 1e-3
					if flash {
						tolerance = 2e-2
					}
					if scale == 0 || worst > tolerance*scale {
						t.Errorf("step %d: logits differ by up to %g (largest logit %g)", i, worst, scale)
					}
				}
			})
		}
	}
}

// stepLogits runs one step on b's graph, on its scheduler's loop, and
// returns every row's logits.
func stepLogits(t *testing.T, b *Backend, copyPrefix int, seqs []int, positions []int32) []float32 {
	t.Helper()
	var logits []float32
	var err error
	xerr := b.sched.exclusively(context.Background(), func() {
		defer recoverError(&err)
		if copyPrefix > 0 {
			if err = b.graph.clear(copyPrefix - 1); err != nil {
				return
			}
			if err = b.graph.copyPrefix(b.prefixSeq(), copyPrefix-1, int32(len(b.prefix))); err != nil {
				return
			}
		}
		ctx := b.model.Backend().NewContext()
		defer ctx.Close()
		n := len(seqs)
		tokens, outputs := make([]int32, n), make([]int32, n)
		for i := range n {
			tokens[i] = int32(7 + 13*i + int(positions[i]))
			outputs[i] = int32(i)
		}
		batch := input.Batch{
			Inputs:    ctx.Input().FromInts(tokens, n),
			Outputs:   ctx.Input().FromInts(outputs, n),
			Positions: positions,
			Sequences: seqs,
		}
		var out ml.Tensor
		if out, err = b.graph.forward(ctx, batch, false); err != nil {
			return
		}
		ctx.Compute(out)
		logits = out.Floats()
	})
	if xerr != nil {
		t.Fatal(xerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return logits
}

// TestGraphsAnswerAlike: the scheduler serves the same greedy answers over
// either graph, batched, with chunked prompts beside decoding sequences.
func TestGraphsAnswerAlike(t *testing.T) {
	for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
		t.Run(string(v), func(t *testing.T) {
			cfg := Config{MaxNewTokens: 32, Slots: 4, BatchSize: 9}
			cfg.Graph = "streams"
			streams := concurrently(t, openTiny(t, v, cfg), batchTexts)
			cfg.Graph = "engine"
			engine := concurrently(t, openTiny(t, v, cfg), batchTexts)
			for i := range batchTexts {
				if streams[i].Text != engine[i].Text {
					t.Errorf("prompt %q:\nstreams %q\nengine  %q", batchTexts[i], streams[i].Text, engine[i].Text)
				}
			}
		})
	}
}
