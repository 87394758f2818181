package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/internal/worker"
)

// benchNewTokens is each job's answer, every token sampled (IgnoreEOS).
const benchNewTokens = 16

// BenchmarkFleet measures what serving two models on one worker costs
// (docs/benchmarks.md, "Many models"): the load of a model from the page
// cache, and the decode rate of jobs for one model alone, for two models
// interleaved within a budget that holds both, and within one that holds
// one (every job a switch). GENQ_BENCH_SIZE picks the models' size (mid
// by default).
func BenchmarkFleet(b *testing.B) {
	size := os.Getenv("GENQ_BENCH_SIZE")
	if size == "" {
		size = "mid"
	}
	dir := b.TempDir()
	var models []genq.Model
	for _, f := range []tinygguf.Family{tinygguf.FamilyLlama, tinygguf.FamilyQwen3} {
		path := filepath.Join(dir, string(f)+".gguf")
		opts := tinygguf.OptionsFor(genq.VariantB, size, 1)
		opts.Family = f
		if err := tinygguf.Write(path, opts); err != nil {
			b.Fatal(err)
		}
		st, _ := os.Stat(path)
		models = append(models, genq.Model{Name: string(f), Kind: genq.KindChat, Path: path, SizeBytes: st.Size(), Queue: genq.QueueToken(genq.KindChat, string(f))})
	}
	cfg := textgen.Config{Slots: 1, Threads: 1, MaxNewTokens: benchNewTokens, IgnoreEOS: true, ContextSize: 512}
	var loads atomic.Int64
	open := func(ctx context.Context, m genq.Model, _ func(float64)) (genq.Backend, error) {
		loads.Add(1)
		c := cfg
		c.ModelFile = m.Path
		return textgen.Open(ctx, c, slog.New(slog.DiscardHandler))
	}
	b.Run("load", func(b *testing.B) {
		warm, err := open(context.Background(), models[0], nil) // into the page cache
		if err != nil {
			b.Fatal(err)
		}
		warm.Close()
		for b.Loop() {
			be, err := open(context.Background(), models[0], nil)
			if err != nil {
				b.Fatal(err)
			}
			be.Close()
		}
	})
	for _, tc := range []struct {
		name   string
		budget int64
		order  []int
	}{
		{"alone-llama", models[0].SizeBytes + models[1].SizeBytes, []int{0}},
		{"alone-qwen3", models[0].SizeBytes + models[1].SizeBytes, []int{1}},
		{"interleaved", models[0].SizeBytes + models[1].SizeBytes, []int{0, 1}},
		{"switching", max(models[0].SizeBytes, models[1].SizeBytes), []int{0, 1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			fleet, err := worker.NewFleet(models, worker.FleetOptions{Budget: tc.budget, KeepAlive: time.Hour, Load: open, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			backends := []genq.Backend{fleet.Backend(models[0].Queue, genq.BackendInfo{}), fleet.Backend(models[1].Queue, genq.BackendInfo{})}
			job := func(i int) {
				var j genq.Job
				j.ID = fmt.Sprintf("bench-%d", i)
				j.Prompt = "Once upon a time"
				if _, err := backends[tc.order[i%len(tc.order)]].Generate(context.Background(), j, nil); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 2 { // both models loaded where the budget holds them
				job(i)
			}
			before := loads.Load()
			i := 0
			start := time.Now()
			for b.Loop() {
				job(i)
				i++
			}
			b.ReportMetric(float64(i*benchNewTokens)/time.Since(start).Seconds(), "tokens/s")
			b.ReportMetric(float64(loads.Load()-before)/float64(i), "loads/op")
		})
	}
}
