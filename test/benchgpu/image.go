package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/tensor"
)

// imageOptions are the flags of `benchgpu image`.
type imageOptions struct {
	dir                 string
	size, steps, images int
	noT5, profile       bool
	device, out, label  string
	groups              int    // ggmlimage.Config.AttentionGroups; 0, the device's default
	png                 string // where to write the first timed image; empty, nowhere
	freshGraphs         bool   // ggmlimage.Config.FreshStepGraphs
	f16Matrices         bool   // ggmlimage.Config.BFloat16 off
}

// ImageResults are one image benchmark: the ggml engine in process, one
// image at a time after a warm-up image.
type ImageResults struct {
	GPU             string  `json:"gpu"`
	Device          string  `json:"device"`
	Label           string  `json:"label"`
	Size            int     `json:"size"`
	Steps           int     `json:"steps"`
	T5              bool    `json:"t5"`
	Images          int     `json:"images"`
	SecondsPerImage float64 `json:"seconds_per_image"` // median
	SecondsPerStep  float64 `json:"seconds_per_step"`  // median over every step
	// SecondsOutsideSteps is the median over the images of an image's time
	// less its steps': the prompt's encoders, the VAE, the PNG.
	SecondsOutsideSteps float64 `json:"seconds_outside_steps"`
	AttentionGroups     int     `json:"attention_groups,omitempty"` // as asked; 0, the default
	FreshStepGraphs     bool    `json:"fresh_step_graphs,omitempty"`
	Float16Matrices     bool    `json:"float16_matrices,omitempty"`
	// Environment is the GGML_ settings the run had (ggml-cuda reads them).
	Environment []string `json:"environment,omitempty"`
	GPUUtilPct  float64  `json:"gpu_util_pct"` // mean of nvidia-smi's samples
	GPUMemMiB   float64  `json:"gpu_mem_mib"`  // the most nvidia-smi saw
	At          string   `json:"at"`
	// Profile is one more image, operation by operation (--profile), and
	// ProfiledSeconds the sum of its operations' times.
	Profile         []tensor.OpTime `json:"profile,omitempty"`
	ProfiledSeconds float64         `json:"profiled_seconds,omitempty"`
}

func imageBench(ctx context.Context, o imageOptions, log io.Writer) (*ImageResults, error) {
	cfg := ggmlimage.Config{
		ModelDir:        o.dir,
		Slots:           1,
		NoT5:            o.noT5,
		AttentionGroups: o.groups,
		FreshStepGraphs: o.freshGraphs,
		BFloat16:        bfloat16Setting(o.f16Matrices),
		Pipeline:        diffusion.Pipeline{Device: o.device, Width: o.size, Height: o.size, Steps: o.steps, GuidanceScale: 7, MaxSize: o.size, MaxSteps: o.steps},
	}
	b, err := ggmlimage.Open(ctx, cfg, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var steps []time.Duration
	last := time.Now()
	b.ObserveSteps(func(int, []float32) {
		steps = append(steps, time.Since(last))
		last = time.Now()
	})
	seed := int64(1)
	job := genq.Job{Envelope: genq.Envelope{Text: "a photo of an astronaut riding a horse on the moon"}, TextRequest: genq.TextRequest{Seed: &seed}}
	progress := func(genq.Progress) { last = time.Now() }
	if _, err := b.Generate(ctx, job, progress); err != nil { // warm-up: first-call allocations
		return nil, fmt.Errorf("warm-up image: %w", err)
	}
	steps = steps[:0]
	smi := startSMI(ctx)
	var images, outside []time.Duration
	for i := range o.images {
		start, before := time.Now(), len(steps)
		res, err := b.Generate(ctx, job, progress)
		if err != nil {
			smi.stop()
			return nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		images = append(images, time.Since(start))
		rest := images[i]
		for _, s := range steps[before:] {
			rest -= s
		}
		outside = append(outside, rest)
		fmt.Fprintf(log, "image %d: %.2f s, %.2f s of it outside the steps\n", i+1, images[i].Seconds(), rest.Seconds())
		if i == 0 && o.png != "" {
			if err := os.WriteFile(o.png, res.Data, 0o644); err != nil {
				smi.stop()
				return nil, err
			}
		}
	}
	util, mem := smi.stop()
	slices.Sort(images)
	slices.Sort(outside)
	slices.Sort(steps)
	var profile []tensor.OpTime
	var profiled time.Duration
	if o.profile {
		b.Profile(true)
		_, err := b.Generate(ctx, job, progress)
		profile = b.Profiled()
		b.Profile(false)
		if err != nil {
			return nil, fmt.Errorf("profiled image: %w", err)
		}
		for _, op := range profile {
			profiled += op.Time
		}
	}
	return &ImageResults{Profile: profile, ProfiledSeconds: profiled.Seconds(), GPU: gpuName(ctx), Device: b.Info().Device.Name, Label: o.label, Size: o.size, Steps: o.steps, T5: !o.noT5,
		Images: o.images, SecondsPerImage: images[len(images)/2].Seconds(), SecondsPerStep: steps[len(steps)/2].Seconds(),
		SecondsOutsideSteps: outside[len(outside)/2].Seconds(), AttentionGroups: o.groups, FreshStepGraphs: o.freshGraphs, Float16Matrices: o.f16Matrices, Environment: ggmlEnvironment(),
		GPUUtilPct: util, GPUMemMiB: mem, At: time.Now().UTC().Format(time.RFC3339)}, nil
}

// ggmlEnvironment is the process's GGML_ settings, which change what
// ggml-cuda does (GGML_CUDA_GRAPH_OPT, GGML_CUDA_CUBLAS_COMPUTE_TYPE, …).
func ggmlEnvironment() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GGML_") {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

// bfloat16Setting is ggmlimage.Config.BFloat16 for the -f16-matrices flag.
func bfloat16Setting(f16Matrices bool) string {
	if f16Matrices {
		return ggmlimage.BFloat16Off
	}
	return ggmlimage.BFloat16Auto
}
