package main

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/genq/genq/internal/diffusion"
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
	bfloat16          bool                       // whether IMAGE_BFLOAT16=auto took bfloat16 here
	// levels is how far each ggml image is from ONNX Runtime's of the
	// same job, by engine.
	levels map[string]pixelDifference
}

// The engines compared: ggml as the worker runs it (IMAGE_BFLOAT16=auto)
// and with IMAGE_BFLOAT16=off.
const (
	ieONNX      = "onnxruntime"
	ieGGML      = "ggml"
	ieGGMLFloat = "ggml, bfloat16 off"
)

var ieEngines = []string{ieONNX, ieGGML, ieGGMLFloat}

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
	if engines[ieONNX], err = onnx.Open(ctx, onnx.Config{
		ModelDir:    dir,
		LibraryPath: lib,
		Pipeline:    diffusion.Pipeline{Device: onnx.DeviceCPU, Width: ieSize, Height: ieSize, Steps: ieSteps, Threads: ieThreads},
	}, nil); err != nil {
		return err
	}
	ggml := map[string]*ggmlimage.Backend{}
	for name, bf16 := range map[string]string{ieGGML: ggmlimage.BFloat16Auto, ieGGMLFloat: ggmlimage.BFloat16Off} {
		if ggml[name], err = ggmlimage.Open(ctx, ggmlimage.Config{
			ModelDir: dir,
			BFloat16: bf16,
			Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: ieSize, Height: ieSize, Steps: ieSteps, GuidanceScale: 7, Threads: ieThreads},
		}, nil); err != nil {
			return err
		}
		engines[name] = ggml[name]
	}
	r := imageEnginesResult{perImage: map[string][]time.Duration{}, perStep: map[string][]time.Duration{}, levels: map[string]pixelDifference{},
		blas: ggml[ieGGML].BLAS(), bfloat16: ggml[ieGGML].BFloat16()}
	order := slices.Clone(ieEngines)
	rounds := ieRounds
	if b.quick {
		rounds = 1
	}
	images := map[string][]byte{}
	for round := range rounds + 1 { // the first round warms up
		for _, name := range order {
			image, step, png, err := timeImage(ctx, engines[name])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if round > 0 {
				r.perImage[name] = append(r.perImage[name], image)
				r.perStep[name] = append(r.perStep[name], step)
			} else {
				images[name] = png
			}
		}
		slices.Reverse(order)
	}
	for _, name := range ieEngines[1:] {
		if r.levels[name], err = comparePNGs(images[name], images[ieONNX]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	b.result.imageEngines = r
	for _, name := range ieEngines {
		fmt.Fprintf(b.out, "   %s: %s per image, %s per step\n", name, ms(median(r.perImage[name])), ms(median(r.perStep[name])))
	}
	return nil
}

// pixelDifference is how far one image's 8-bit values are from another's.
type pixelDifference struct {
	mean      float64 // levels, over every value
	worst     int     // levels
	overOne   float64 // the share of values more than one level apart
	numValues int
}

// comparePNGs compares two PNGs of the same size value by value.
func comparePNGs(a, b []byte) (pixelDifference, error) {
	ia, err := png.Decode(bytes.NewReader(a))
	if err != nil {
		return pixelDifference{}, err
	}
	ib, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return pixelDifference{}, err
	}
	if ia.Bounds() != ib.Bounds() {
		return pixelDifference{}, fmt.Errorf("sizes %v and %v", ia.Bounds(), ib.Bounds())
	}
	var d pixelDifference
	sum, over := 0, 0
	for y := ia.Bounds().Min.Y; y < ia.Bounds().Max.Y; y++ {
		for x := ia.Bounds().Min.X; x < ia.Bounds().Max.X; x++ {
			ca, cb := color.NRGBAModel.Convert(ia.At(x, y)).(color.NRGBA), color.NRGBAModel.Convert(ib.At(x, y)).(color.NRGBA)
			for _, v := range [][2]uint8{{ca.R, cb.R}, {ca.G, cb.G}, {ca.B, cb.B}} {
				diff := int(v[0]) - int(v[1])
				diff = max(diff, -diff)
				sum += diff
				d.worst = max(d.worst, diff)
				if diff > 1 {
					over++
				}
				d.numValues++
			}
		}
	}
	d.mean, d.overOne = float64(sum)/float64(d.numValues), float64(over)/float64(d.numValues)
	return d, nil
}

// timeImage makes one image and returns its time, its median step and
// the image.
func timeImage(ctx context.Context, e ieEngine) (image, step time.Duration, png []byte, err error) {
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
	res, err := e.Generate(ctx, genq.Job{Envelope: genq.Envelope{Text: "a lighthouse on a cliff at dusk"}, TextRequest: genq.TextRequest{Seed: &seed}}, func(genq.Progress) {})
	if err != nil {
		return 0, 0, nil, err
	}
	return time.Since(start), median(steps), res.Data, nil
}

func (b *bench) imageEnginesMarkdown() string {
	r := b.result.imageEngines
	var s strings.Builder
	products := "the ggml engine multiplies on ggml's own kernels (no BLAS module in the engine's build)"
	if r.blas != "" {
		products = "the ggml engine multiplies float32 through ggml's BLAS backend (" + r.blas + " kernels), the transformer's matrices widened to fp32 as they load unless they are bfloat16"
	}
	precision := "`IMAGE_BFLOAT16=auto` kept float16 here: this CPU's ggml kernels have no native bfloat16 products, so the two ggml rows run alike"
	if r.bfloat16 {
		precision = "`IMAGE_BFLOAT16=auto` took bfloat16 here (the CPU's ggml kernels have AVX512_BF16's dot products): the transformer's per-token matrices and the VAE's inner 3×3 kernels as bfloat16, multiplied on ggml's CPU kernels with float32 sums (docs/image.md); `IMAGE_BFLOAT16=off` keeps them float16 with float32 values"
	}
	fmt.Fprintf(&s, "## Images: ggml against ONNX Runtime (measured by `make bench`)\n\n"+
		"Both engines in one process on the same weights: the mid faithful export (`sd3.MidMMDiT`: 4 blocks, 384 wide, 6 heads; `sd3.MidVAE`: 32 to 128 wide), fp32 in ONNX Runtime's graphs, fp16 in ggml's GGUF files (as each engine runs SD3-medium); "+products+", on the engine built with its patches to ggml's CPU kernels (docs/engine.md). "+precision+". "+
		"One %d×%d image of %d steps at a time, guidance 7, %d thread each, the engines' order reversed each round, %d rounds after one to warm up; medians of the rounds. "+
		"Per step is an image's median step after its first; per image counts the prompt's three encoders, the steps, the VAE and the PNG. CPU: %s (%d cores, shared with other work). A ratio is ONNX Runtime's time over ggml's: above 1, ggml is faster. "+
		"The last column compares each ggml image with ONNX Runtime's of the same job (seed, prompt), value by value.\n\n",
		ieSize, ieSize, ieSteps, ieThreads, len(r.perImage[ieGGML]), procfs.CPUName(), runtime.NumCPU())
	fmt.Fprintf(&s, "| | per step | per image | speed × ONNX Runtime's, per step | speed × ONNX Runtime's, per image | image against ONNX Runtime's |\n|---|---|---|---|---|---|\n")
	for _, name := range ieEngines {
		step, image := median(r.perStep[name]), median(r.perImage[name])
		if name == ieONNX {
			fmt.Fprintf(&s, "| ONNX Runtime | %s | %s | | | |\n", ms(step), ms(image))
			continue
		}
		o := func(m map[string][]time.Duration) float64 {
			return median(m[ieONNX]).Seconds() / median(m[name]).Seconds()
		}
		d := r.levels[name]
		fmt.Fprintf(&s, "| %s | %s | %s | **%.2f×** | **%.2f×** | mean %.3f levels, at most %d; %.2f%% of values more than one apart |\n",
			name, ms(step), ms(image), o(r.perStep), o(r.perImage), d.mean, d.worst, 100*d.overOne)
	}
	for _, name := range ieEngines[1:] {
		fmt.Fprintf(&s, "\n%s, each round's ratios, per step: %s; per image: %s.\n", name, roundRatios(r.perStep, name), roundRatios(r.perImage, name))
	}
	return s.String()
}

// roundRatios lists ONNX Runtime's time over engine's, a round at a time.
func roundRatios(m map[string][]time.Duration, engine string) string {
	var out []string
	for i := range m[engine] {
		out = append(out, fmt.Sprintf("%.2f", m[ieONNX][i].Seconds()/m[engine][i].Seconds()))
	}
	return strings.Join(out, ", ")
}
