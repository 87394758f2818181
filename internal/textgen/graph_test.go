package textgen

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
// their key head) and flash attention, its prompt chunks attending with
// matrix products (a CPU's choice) or with the flash kernel too.
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
		for _, k := range []struct{ flash, flashChunks bool }{{false, false}, {true, false}, {true, true}} {
			flash := k.flash
			t.Run(fmt.Sprintf("%s/flash=%v/flash-chunks=%v", v, flash, k.flashChunks), func(t *testing.T) {
				streams := openTiny(t, v, Config{Slots: 3, Graph: "streams", flashAttention: flash, flashChunks: k.flashChunks})
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

// TestStreamLayout: how a step's tokens are grouped, where their keys go,
// and what each query may see.
func TestStreamLayout(t *testing.T) {
	g := &streamGraph{streams: 4, cellsPerStream: 64, padding: 32, fold: 2}
	inf := float32(math.Inf(-1))
	tests := []struct {
		name      string
		seqs      []int
		positions []int32
		groups    int
		inOrder   bool
		outRow    []int32
		cellOf    []int32
		gather    []int32 // the decoding group's
		cells     []int   // attended cells per group
	}{
		{
			name: "decoding slots in order", seqs: []int{0, 1, 2}, positions: []int32{5, 40, 0},
			groups: 1, inOrder: true, outRow: []int32{0, 1, 2}, cellOf: []int32{5, 104, 128},
			gather: []int32{0, 1, 2}, cells: []int{64},
		},
		{
			name: "out of order with an idle slot between", seqs: []int{3, 1}, positions: []int32{2, 7},
			groups: 1, outRow: []int32{2, 0}, cellOf: []int32{194, 71},
			gather: []int32{1, 0, 0}, cells: []int{32}, // the idle slot borrows the first row
		},
		{
			name: "a chunk after a decoding token", seqs: []int{2, 0, 0, 0}, positions: []int32{9, 30, 31, 32},
			groups: 2, outRow: []int32{0, 1, 2, 3}, inOrder: true, cellOf: []int32{137, 30, 31, 32},
			gather: []int32{0}, cells: []int{32, 64},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := g.layout(input.Batch{Sequences: tt.seqs, Positions: tt.positions}, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.groups) != tt.groups || l.inOrder != tt.inOrder ||
				fmt.Sprint(l.outRow) != fmt.Sprint(tt.outRow) || fmt.Sprint(l.cellOf) != fmt.Sprint(tt.cellOf) ||
				fmt.Sprint(l.groups[0].gather) != fmt.Sprint(tt.gather) {
				t.Fatalf("layout %+v", l)
			}
			for i, grp := range l.groups {
				if grp.cells != tt.cells[i] {
					t.Errorf("group %d attends %d cells, want %d", i, grp.cells, tt.cells[i])
				}
				// Each mask row sees cells 0..pos of its stream, nothing after.
				for r := 0; r < len(grp.mask)/grp.cells; r++ {
					row := grp.mask[r*grp.cells : (r+1)*grp.cells]
					seen := 0
					for seen < len(row) && row[seen] == 0 {
						seen++
					}
					for _, v := range row[seen:] {
						if v != inf {
							t.Fatalf("group %d mask row %d: %v", i, r, row)
						}
					}
					stream, tok := r/grp.maskRows, r%grp.maskRows
					want := 1 // an idle stream sees cell 0, its row unused
					if grp.single {
						if row := grp.gather[stream]; tt.seqs[row] == grp.stream0+stream {
							want = int(tt.positions[row]) + 1
						}
					} else {
						want = int(tt.positions[grp.first+tok]) + 1
					}
					if seen != want {
						t.Errorf("group %d mask row %d sees %d cells, want %d", i, r, seen, want)
					}
				}
			}
		})
	}
	for _, bad := range []struct {
		seqs      []int
		positions []int32
	}{
		{[]int{4}, []int32{0}},             // no such slot
		{[]int{0}, []int32{64}},            // past the context
		{[]int{1, 2, 1}, []int32{3, 0, 9}}, // one sequence, two separate tokens
	} {
		if _, err := g.layout(input.Batch{Sequences: bad.seqs, Positions: bad.positions}, false); err == nil {
			t.Errorf("layout(%v, %v): want an error", bad.seqs, bad.positions)
		}
	}
}

// TestGPUShapedConfigAnswersAlike runs the stream graph as a GPU runs it,
// on the CPU: flash attention (values not permuted, an F16 mask, the
// backend's attention for every group, prompt chunks included), steps pipelined, rows narrowed in
// the graph. Pipelining and narrowing change no sums, so the greedy answers
// must equal those of plain sequential steps with the same kernel.
func TestGPUShapedConfigAnswersAlike(t *testing.T) {
	base := Config{MaxNewTokens: 24, Slots: 4, BatchSize: 9, flashAttention: true, flashChunks: true}
	sequential := base
	sequential.Pipeline, sequential.Narrow = "off", "host"
	gpuShaped := base
	gpuShaped.Pipeline, gpuShaped.Narrow = "on", "device"
	want := concurrently(t, openTiny(t, genq.VariantB, sequential), batchTexts)
	b := openTiny(t, genq.VariantB, gpuShaped)
	if sg, ok := b.graph.(*streamGraph); !ok || sg.permutedV || b.narrowK == 0 || !b.cfg.pipeline {
		t.Fatalf("not the GPU's shape: graph %T, narrow %d, pipeline %v", b.graph, b.narrowK, b.cfg.pipeline)
	}
	got := concurrently(t, b, batchTexts)
	for i := range batchTexts {
		if got[i].Text != want[i].Text {
			t.Errorf("prompt %q:\nGPU-shaped %q\nsequential %q", batchTexts[i], got[i].Text, want[i].Text)
		}
	}
}
