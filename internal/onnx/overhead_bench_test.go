package onnx

import (
	"context"
	"slices"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/genq"
)

// plainSD3 runs the export's transformer and VAE decoder straight through
// onnxruntime_go, with inputs and outputs made once: the least any
// pipeline on ONNX Runtime must spend per step and per image. Against it,
// genq's time is its own overhead (tensor conversions, guidance, the Euler
// update, and per image the prompt's encoding and the PNG).
type plainSD3 struct {
	den, vae      *ort.DynamicAdvancedSession
	denIn, denOut []ort.Value
	vaeIn, vaeOut []ort.Value
	steps         int
}

func newPlainSD3(b *testing.B, be *Backend) *plainSD3 {
	b.Helper()
	den, vae := be.denoiser, be.vaeDecoder
	opts, err := newSessionOptions(be.info.Device.Kind == "cuda", be.cfg.Threads)
	if err != nil {
		b.Fatal(err)
	}
	defer opts.Destroy()
	p := &plainSD3{steps: be.cfg.Steps}
	if p.den, err = ort.NewDynamicAdvancedSession(den.path, den.inNames, den.outNames, opts); err != nil {
		b.Fatal(err)
	}
	if p.vae, err = ort.NewDynamicAdvancedSession(vae.path, vae.inNames, vae.outNames, opts); err != nil {
		b.Fatal(err)
	}
	c, h, w := be.shapes.latentChannels, int64(be.cfg.Height/8), int64(be.cfg.Width/8)
	neg := be.negative
	mk := func(typ ort.TensorElementDataType, shape ort.Shape) ort.Value {
		v, err := newFloatTensor(typ, shape, make([]float32, shape.FlattenedSize()))
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	io := be.kind.io
	for _, name := range den.inNames {
		var shape ort.Shape
		switch name {
		case io.latent:
			shape = ort.NewShape(2, c, h, w)
		case io.text:
			shape = ort.NewShape(2, neg.seqLen, neg.width)
		case io.pooled:
			shape = ort.NewShape(2, int64(len(neg.pooled)))
		case io.timestep:
			shape = ort.NewShape(2)
		default:
			b.Skipf("the overhead benchmark feeds SD3's transformer; %s has input %s", den.part, name)
		}
		p.denIn = append(p.denIn, mk(den.inputType(name), shape))
	}
	outShape, err := den.outputShape(0, 2, c, h, w)
	if err != nil {
		b.Fatal(err)
	}
	out, err := newEmptyTensor(den.outputs[den.outNames[0]].DataType, outShape)
	if err != nil {
		b.Fatal(err)
	}
	p.denOut = []ort.Value{out}
	p.vaeIn = []ort.Value{mk(vae.inputType("latent_sample"), ort.NewShape(1, c, h, w))}
	vaeShape, err := vae.outputShape(0, 1, 3, int64(be.cfg.Height), int64(be.cfg.Width))
	if err != nil {
		b.Fatal(err)
	}
	if out, err = newEmptyTensor(vae.outputs[vae.outNames[0]].DataType, vaeShape); err != nil {
		b.Fatal(err)
	}
	p.vaeOut = []ort.Value{out}
	return p
}

// image runs the denoiser steps times and the decoder once, and returns
// the time of each step.
func (p *plainSD3) image(b *testing.B) []time.Duration {
	steps := make([]time.Duration, 0, p.steps)
	for range p.steps {
		start := time.Now()
		if err := p.den.Run(p.denIn, p.denOut); err != nil {
			b.Fatal(err)
		}
		steps = append(steps, time.Since(start))
	}
	if err := p.vae.Run(p.vaeIn, p.vaeOut); err != nil {
		b.Fatal(err)
	}
	return steps
}

func (p *plainSD3) close() {
	destroyAll(p.denIn)
	destroyAll(p.denOut)
	destroyAll(p.vaeIn)
	destroyAll(p.vaeOut)
	p.den.Destroy()
	p.vae.Destroy()
}

// BenchmarkOverheadOverORT runs one image through genq and one straight
// through ONNX Runtime per iteration, interleaved so that both see the same
// machine, and reports the medians and genq's ratio to ONNX Runtime alone:
//
//	go test -run '^$' -bench OverheadOverORT -benchtime 30x ./internal/onnx/
func BenchmarkOverheadOverORT(b *testing.B) {
	be, cfg := openBench(b)
	if be.kind != kindSD3 {
		b.Skipf("the overhead benchmark is for SD3 exports, not %s", be.kind.denoiser)
	}
	plain := newPlainSD3(b, be)
	defer plain.close()
	b.Logf("device %s (%s), %dx%d, %d steps", be.Info().Device.Kind, be.Info().Device.Name, cfg.Width, cfg.Height, be.cfg.Steps)

	var genqSteps, ortSteps, genqImages, ortImages []time.Duration
	var last time.Time
	progress := func(genq.Progress) {
		now := time.Now()
		if !last.IsZero() {
			genqSteps = append(genqSteps, now.Sub(last))
		}
		last = now
	}
	job := genq.Job{Envelope: genq.Envelope{Text: "an astronaut riding a horse on the moon"}}
	for b.Loop() {
		last = time.Time{}
		start := time.Now()
		if _, err := be.Generate(context.Background(), job, progress); err != nil {
			b.Fatal(err)
		}
		genqImages = append(genqImages, time.Since(start))
		start = time.Now()
		ortSteps = append(ortSteps, plain.image(b)...)
		ortImages = append(ortImages, time.Since(start))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	gs, os, gi, oi := median(genqSteps), median(ortSteps), median(genqImages), median(ortImages)
	b.ReportMetric(ms(gs), "genq-ms/step")
	b.ReportMetric(ms(os), "ort-ms/step")
	b.ReportMetric(float64(gs)/float64(os), "step-ratio")
	b.ReportMetric(ms(gi), "genq-ms/image")
	b.ReportMetric(ms(oi), "ort-ms/image")
	b.ReportMetric(float64(gi)/float64(oi), "image-ratio")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
