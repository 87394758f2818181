package ggmlimage_test

import (
	"context"
	"sync"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// Concurrent jobs share the transformer's calls, one per step for all of
// them, and each gets the image it gets alone (within one level: a batch
// changes the kernels' summation order, not the numbers' meaning). A job
// of another size gets calls of its own.
func TestConcurrentJobsShareTransformerCalls(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 2, tinyexport.Options{Faithful: true, GGMLWeights: sd3.F32}); err != nil {
		t.Fatal(err)
	}
	const steps = 3
	b, err := ggmlimage.Open(ctx, ggmlimage.Config{
		ModelDir: dir,
		Slots:    3,
		Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: 32, Height: 32, Steps: steps, GuidanceScale: 7, MaxSize: 64, MaxSteps: steps, Threads: 1},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	jobs := make([]genq.Job, 3)
	for i := range jobs {
		seed := int64(10 + i)
		jobs[i] = genq.Job{Envelope: genq.Envelope{ID: string(rune('a' + i)), Text: []string{"a red cat", "a blue dog", "the moon"}[i]}, TextRequest: genq.TextRequest{Seed: &seed}}
	}
	alone := make([][]byte, len(jobs))
	for i, job := range jobs {
		r, err := b.Generate(ctx, job, nil)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = r.Data
	}
	if got := b.TransformerCalls(); got != int64(len(jobs)*steps) {
		t.Fatalf("%d calls for %d jobs of %d steps run one by one", got, len(jobs), steps)
	}

	run := func(jobs []genq.Job) [][]byte {
		out := make([][]byte, len(jobs))
		var wg sync.WaitGroup
		for i, job := range jobs {
			wg.Go(func() {
				r, err := b.Generate(ctx, job, nil)
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = r.Data
			})
		}
		wg.Wait()
		return out
	}
	before := b.TransformerCalls()
	together := run(jobs[:2])
	// Alone they make 2×steps calls. Started together they step together;
	// the second may start a step late when its goroutine starts after the
	// first's first call.
	if calls := b.TransformerCalls() - before; calls > steps+1 {
		t.Errorf("two concurrent jobs made %d transformer calls, want %d (one per step), or %d", calls, steps, steps+1)
	}
	for i := range together {
		if together[i] == nil {
			t.Fatal("a job failed")
		}
		a, c := decode(t, alone[i]), decode(t, together[i])
		for j := range a.Pix {
			if d := int(a.Pix[j]) - int(c.Pix[j]); d > 1 || d < -1 {
				t.Fatalf("job %d: pixel value %d is %d alone and %d batched", i, j, a.Pix[j], c.Pix[j])
			}
		}
	}

	// A 64×64 job beside a 32×32 one: the shapes cannot share a call.
	before = b.TransformerCalls()
	other := jobs[2]
	other.Width, other.Height = 64, 64
	run([]genq.Job{jobs[0], other})
	if calls := b.TransformerCalls() - before; calls != 2*steps {
		t.Errorf("jobs of two sizes made %d calls, want %d", calls, 2*steps)
	}
}
