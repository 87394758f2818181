package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/internal/sd3"
)

// The image engines' comparison (issue 33): both engines in process on
// the same weights, the mid faithful export, a whole image at SD3's
// default steps.
const (
	ieSize    = 256
	ieSteps   = 28
	ieThreads = 1 // on a shared 2-core machine, ggml's threads wait for each other at every op
	ieRounds  = 5
)

// ieEngine is what the comparison needs of either backend.
type ieEngine interface {
	Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error)
	ObserveSteps(func(step int, latents []float32))
	Close() error
}

type imageEnginesResult struct {
	perImage, perStep map[string][]time.Duration // by engine, a value a round
	blas              string                     // the ggml engine's (ggmlimage.Backend.BLAS)
}

// imageEngines makes one image at a time on ONNX Runtime and on ggml,
// alternating which goes first, ieRounds rounds: the median step of each
// image (its denoising steps after the first, which also encodes the
// prompt) and the whole image (prompt encoding, the steps, the VAE, the
// PNG).
func (b *bench) imageEngines(ctx context.Context) error {
	dir := filepath.Join(b.work, "image-engines")
	mmdit, vae := sd3.MidMMDiT(), sd3.MidVAE()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F16, MMDiT: &mmdit, VAE: &vae}); err != nil {
		return err
	}
	lib := os.Getenv("ONNXRUNTIME_LIB")
	if lib == "" {
		lib = filepath.Join(b.root, onnx.DefaultLibraryPath)
	}
	engines := map[string]ieEngine{}
	defer func() {
		for _, e := range engines {
			e.Close()
		}
	}()
	var err error
	var ggml *ggmlimage.Backend
	if engines["onnxruntime"], err = onnx.Open(ctx, onnx.Config{ModelDir: dir, LibraryPath: lib, Device: onnx.DeviceCPU,
		Width: ieSize, Height: ieSize, Steps: ieSteps, Threads: ieThreads}, nil); err != nil {
		return err
	}
	if ggml, err = ggmlimage.Open(ctx, ggmlimage.Config{ModelDir: dir, Device: ggmlimage.DeviceCPU,
		Width: ieSize, Height: ieSize, Steps: ieSteps, GuidanceScale: 7, Threads: ieThreads}, nil); err != nil {
		return err
	}
	engines["ggml"] = ggml
	r := imageEnginesResult{perImage: map[string][]time.Duration{}, perStep: map[string][]time.Duration{}, blas: ggml.BLAS()}
	order := []string{"onnxruntime", "ggml"}
	rounds := ieRounds
	if b.quick {
		rounds = 1
	}
	for round := range rounds + 1 { // the first round warms up
		for _, name := range order {
			image, step, err := timeImage(ctx, engines[name])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if round > 0 {
				r.perImage[name] = append(r.perImage[name], image)
				r.perStep[name] = append(r.perStep[name], step)
			}
		}
		slices.Reverse(order)
	}
	b.result.imageEngines = r
	for _, name := range []string{"onnxruntime", "ggml"} {
		fmt.Fprintf(b.out, "   %s: %s per image, %s per step\n", name, ms(median(r.perImage[name])), ms(median(r.perStep[name])))
	}
	return nil
}

// timeImage makes one image and returns its time and its median step.
func timeImage(ctx context.Context, e ieEngine) (image, step time.Duration, err error) {
	var steps []time.Duration
	last := time.Now()
	e.ObserveSteps(func(i int, _ []float32) {
		if i > 0 {
			steps = append(steps, time.Since(last))
		}
		last = time.Now()
	})
	seed := int64(7)
	start := time.Now()
	if _, err := e.Generate(ctx, genq.Job{Envelope: genq.Envelope{Text: "a lighthouse on a cliff at dusk"}, TextRequest: genq.TextRequest{Seed: &seed}}, func(genq.Progress) {}); err != nil {
		return 0, 0, err
	}
	return time.Since(start), median(steps), nil
}

func (b *bench) imageEnginesMarkdown() string {
	r := b.result.imageEngines
	var s strings.Builder
	products := "the ggml engine multiplies on ggml's own kernels (no BLAS module in the engine's build)"
	if r.blas != "" {
		products = "the ggml engine multiplies through ggml's BLAS backend (" + r.blas + " kernels), the transformer's matrices widened to fp32 as they load"
	}
	fmt.Fprintf(&s, "## Images: ggml against ONNX Runtime (measured by `make bench`)\n\n"+
		"Both engines in one process on the same weights: the mid faithful export (`sd3.MidMMDiT`: 4 blocks, 384 wide, 6 heads; `sd3.MidVAE`: 32 to 128 wide), fp32 in ONNX Runtime's graphs, fp16 in ggml's GGUF files (as each engine runs SD3-medium); "+products+", on the engine built with its patches to ggml's CPU kernels (docs/engine.md). "+
		"One %d×%d image of %d steps at a time, guidance 7, %d thread each, alternating which engine goes first, %d rounds after one to warm up; medians of the rounds. "+
		"Per step is an image's median step after its first; per image counts the prompt's three encoders, the steps, the VAE and the PNG. CPU: %s (%d cores, shared with other work). A ratio is ONNX Runtime's time over ggml's: above 1, ggml is faster.\n\n",
		ieSize, ieSize, ieSteps, ieThreads, len(r.perImage["ggml"]), procfs.CPUName(), runtime.NumCPU())
	fmt.Fprintf(&s, "| | ONNX Runtime | ggml | ggml's speed ÷ ONNX Runtime's |\n|---|---|---|---|\n")
	row := func(what string, m map[string][]time.Duration) {
		o, g := median(m["onnxruntime"]), median(m["ggml"])
		fmt.Fprintf(&s, "| %s | %s | %s | **%.2f×** |\n", what, ms(o), ms(g), o.Seconds()/g.Seconds())
	}
	row("per step", r.perStep)
	row("per image", r.perImage)
	fmt.Fprintf(&s, "\nEach round's ratios, per step: %s; per image: %s.\n", roundRatios(r.perStep), roundRatios(r.perImage))
	return s.String()
}

// roundRatios lists ONNX Runtime's time over ggml's, a round at a time.
func roundRatios(m map[string][]time.Duration) string {
	var out []string
	for i := range m["ggml"] {
		out = append(out, fmt.Sprintf("%.2f", m["onnxruntime"][i].Seconds()/m["ggml"][i].Seconds()))
	}
	return strings.Join(out, ", ")
}
