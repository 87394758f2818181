package onnx

import (
	"bytes"
	"context"
	"image/png"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
)

func TestGenerateHonoursJobParams(t *testing.T) {
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Seed: 3, Steps: 2, MaxSize: 128, MaxSteps: 4}})
	seed, guidance := int64(9), 2.5
	base := genq.Job{Envelope: genq.Envelope{Text: "a cat"}, TextRequest: genq.TextRequest{Seed: &seed}, ImageRequest: genq.ImageRequest{Width: 96, Height: 64, Steps: 3, GuidanceScale: &guidance}}
	first := generateJob(t, b, base)
	cfg, err := png.DecodeConfig(bytes.NewReader(first))
	if err != nil || cfg.Width != 96 || cfg.Height != 64 {
		t.Fatalf("DecodeConfig = %+v, %v; want 96x64", cfg, err)
	}
	if again := generateJob(t, b, base); !bytes.Equal(first, again) {
		t.Error("the same seed and parameters gave different images")
	}
	for name, change := range map[string]func(*genq.Job){
		"seed":            func(j *genq.Job) { s := int64(10); j.Seed = &s },
		"steps":           func(j *genq.Job) { j.Steps = 4 },
		"guidance":        func(j *genq.Job) { g := 6.0; j.GuidanceScale = &g },
		"negative prompt": func(j *genq.Job) { j.NegativePrompt = "blurry" },
	} {
		j := base
		change(&j)
		if bytes.Equal(first, generateJob(t, b, j)) {
			t.Errorf("changing the %s left the image unchanged", name)
		}
	}
}

func TestGenerateRefusesParamsOverLimits(t *testing.T) {
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Steps: 2, MaxSize: 128, MaxSteps: 4}})
	nan := 31.0
	for name, job := range map[string]genq.Job{
		"too wide":         {Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Width: 144, Height: 64}},
		"not a multiple":   {Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Width: 72, Height: 64}},
		"width alone":      {Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Width: 64}},
		"too many steps":   {Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Steps: 5}},
		"negative steps":   {Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Steps: -1}},
		"guidance too big": {Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{GuidanceScale: &nan}},
		"messages":         {Envelope: genq.Envelope{Text: ""}, TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: "user", Content: "x"}}}},
	} {
		if job.Text == "" {
			job.Text = "x"
		}
		_, err := b.Generate(context.Background(), job, nil)
		if genq.ErrorCode(err) != genq.Invalid {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
}

func generateJob(t *testing.T, b *Backend, job genq.Job) []byte {
	t.Helper()
	res, err := b.Generate(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Data
}
