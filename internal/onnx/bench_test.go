package onnx

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
)

// Benchmarks run on the tiny export by default. To measure a real export
// (on a GPU, say), point them at it:
//
//	GENQ_BENCH_MODEL_DIR=/models/C GENQ_BENCH_SIZE=1024 \
//	ONNXRUNTIME_LIB=/opt/onnxruntime/lib/libonnxruntime.so.1 \
//	go test -run '^$' -bench . -benchtime 3x ./internal/onnx/
func benchConfig(b *testing.B) Config {
	cfg := Config{ModelDir: os.Getenv("GENQ_BENCH_MODEL_DIR"), Pipeline: diffusion.Pipeline{Seed: 1, Device: DeviceAuto}}
	size := 256
	if s := os.Getenv("GENQ_BENCH_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("GENQ_BENCH_SIZE: %v", err)
		}
		size = n
	}
	cfg.Width, cfg.Height = size, size
	if cfg.ModelDir == "" {
		cfg.ModelDir = tinyDir(b)
	}
	return cfg
}

// BenchmarkOpen measures Open to ready: reading and checking the export,
// creating the sessions, encoding the negative prompt.
func BenchmarkOpen(b *testing.B) {
	cfg := benchConfig(b)
	cfg.LibraryPath = ortLibrary(b)
	for b.Loop() {
		be, err := Open(context.Background(), cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		be.Close()
	}
	// Peak memory includes ONNX Runtime's allocations outside the Go heap.
	b.ReportMetric(procfs.PeakRSSMiB(os.Getpid()), "peak-RSS-MiB")
}

// BenchmarkGenerate measures one image of variant C's pipeline (28 steps,
// guidance 7) and reports seconds per step and per image.
func BenchmarkGenerate(b *testing.B) {
	be, cfg := openBench(b)
	b.Logf("device %s (%s), %dx%d, %d steps", be.Info().Device.Kind, be.Info().Device.Name, cfg.Width, cfg.Height, be.cfg.Steps)

	var steps int
	var stepTime time.Duration
	var last time.Time
	progress := func(genq.Progress) {
		now := time.Now()
		if !last.IsZero() {
			steps++
			stepTime += now.Sub(last)
		}
		last = now
	}
	images := 0
	for b.Loop() {
		last = time.Time{}
		if _, err := be.Generate(context.Background(), genq.Job{Envelope: genq.Envelope{Text: "an astronaut riding a horse on the moon"}}, progress); err != nil {
			b.Fatal(err)
		}
		images++
	}
	// The first progress call comes after the prompt is encoded, so the
	// intervals between calls are the denoising steps alone.
	b.ReportMetric(stepTime.Seconds()/float64(steps), "s/step")
	b.ReportMetric(b.Elapsed().Seconds()/float64(images), "s/image")
	// Peak memory includes ONNX Runtime's allocations outside the Go heap.
	b.ReportMetric(procfs.PeakRSSMiB(os.Getpid()), "peak-RSS-MiB")
}

// openBench opens the benchmark's backend on the tiny export, closed when
// the benchmark ends.
func openBench(b *testing.B) (*Backend, Config) {
	b.Helper()
	cfg := benchConfig(b)
	cfg.LibraryPath = ortLibrary(b)
	be, err := Open(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be, cfg
}
