package textgen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/internal/tinygguf"
)

// Benchmarks report medians over rounds; run them with a round count, e.g.
//
//	go test ./internal/textgen -run '^$' -bench Throughput -benchtime 5x
//
// GENQ_BENCH_SIZES picks model sizes (default "tiny,mid"), GENQ_BENCH_WEIGHTS
// their weight format (default the variant's; f32 to compare with peers'
// figures taken on F32 files), GENQ_BENCH_THREADS the compute threads
// (default: Open's choice), GENQ_BENCH_KV_UNIFIED the cache's layout
// (default: Open's choice).

const benchPrompt = "Write a short story about a robot who learns to paint, in a few paragraphs."

func benchModel(b *testing.B, v genq.Variant, size string) string {
	b.Helper()
	opts := tinygguf.OptionsFor(v, size, 1)
	w := os.Getenv("GENQ_BENCH_WEIGHTS")
	if size == "tiny" && w == "" {
		return tinyModels[v]
	}
	if w != "" {
		opts.Weights = tinygguf.Weights(w)
	}
	dir := filepath.Join(os.TempDir(), "genq-ggml-bench")
	p := filepath.Join(dir, string(opts.Weights)+"-"+tinygguf.FileName(v, size))
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if err := tinygguf.Write(p, opts); err != nil {
		b.Fatal(err)
	}
	return p
}

func benchSizes() []string {
	if s := os.Getenv("GENQ_BENCH_SIZES"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{"tiny", "mid"}
}

// BenchmarkThroughput runs N jobs at once, each on a backend N slots wide,
// and reports total generated tokens per second and time to first token.
func BenchmarkThroughput(b *testing.B) {
	for _, size := range benchSizes() {
		for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
			path := benchModel(b, v, size)
			for _, n := range []int{1, 2, 4, 8} {
				b.Run(fmt.Sprintf("%s-%s/c%d", size, v, n), func(b *testing.B) {
					be, err := Open(context.Background(), Config{
						ModelFile: path, Slots: n, ContextSize: 512, MaxNewTokens: benchTokens(),
						Temperature: 0.6, TopP: 0.9, TopK: 50, Seed: 1, Threads: benchThreads(),
						IgnoreEOS: true, KVUnified: os.Getenv("GENQ_BENCH_KV_UNIFIED"),
					}, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer be.Close()
					var rates []float64
					var ttfts []time.Duration
					for b.Loop() {
						gens := make([]seqResult, n)
						var wg sync.WaitGroup
						start := time.Now()
						for i := range n {
							wg.Go(func() {
								g, err := be.generate(context.Background(), benchPrompt)
								if err != nil {
									b.Error(err)
								}
								gens[i] = g
							})
						}
						wg.Wait()
						elapsed := time.Since(start)
						tokens := 0
						for _, g := range gens {
							tokens += g.Tokens
							ttfts = append(ttfts, g.FirstToken)
						}
						rates = append(rates, float64(tokens)/elapsed.Seconds())
					}
					b.ReportMetric(median(rates), "tok/s")
					b.ReportMetric(float64(medianDuration(ttfts).Microseconds())/1000, "ttft-ms")
					b.ReportMetric(procfs.PeakRSSMiB(os.Getpid()), "peak-rss-MiB")
					st := &be.sched.stats
					if steps := float64(st.steps.Load()); steps > 0 {
						b.ReportMetric(float64(st.all.planNanos.Load())/steps/1e3, "plan-us/step")
						b.ReportMetric(float64(st.all.computeNanos.Load())/steps/1e3, "compute-us/step")
						b.ReportMetric(float64(st.all.finishNanos.Load())/steps/1e3, "finish-us/step")
					}
				})
			}
		}
	}
}

// BenchmarkOpen measures start-up: from Open to ready to serve.
func BenchmarkOpen(b *testing.B) {
	for _, size := range benchSizes() {
		for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
			path := benchModel(b, v, size)
			b.Run(fmt.Sprintf("%s-%s", size, v), func(b *testing.B) {
				var took []time.Duration
				for b.Loop() {
					start := time.Now()
					be, err := Open(context.Background(), Config{ModelFile: path, Slots: 4, ContextSize: 512}, nil)
					if err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
					be.Close()
				}
				b.ReportMetric(float64(medianDuration(took).Microseconds())/1000, "open-ms")
			})
		}
	}
}

// benchTokens is GENQ_BENCH_TOKENS, or 128: the tokens each job generates.
func benchTokens() int {
	if n, _ := strconv.Atoi(os.Getenv("GENQ_BENCH_TOKENS")); n > 0 {
		return n
	}
	return 128
}

// benchThreads is GENQ_BENCH_THREADS, or 0 for every CPU.
func benchThreads() int {
	n, _ := strconv.Atoi(os.Getenv("GENQ_BENCH_THREADS"))
	return n
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDuration(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkHostPerStep measures the host's work per decode step (building
// the batch, the cache's mask and the graph; sampling and decoding the
// answers) at 64 sequences over Llama 3's 128,256-token vocabulary, with the
// engine's compute reported apart, with the KV cache unified and not.
//
//	go test ./internal/textgen -run '^$' -bench HostPerStep -benchtime 1x
func BenchmarkHostPerStep(b *testing.B) {
	dir := filepath.Join(os.TempDir(), "genq-ggml-bench")
	path := filepath.Join(dir, tinygguf.FileName(genq.VariantB, "tiny-128k"))
	if _, err := os.Stat(path); err != nil {
		if err := tinygguf.Write(path, tinygguf.OptionsFor(genq.VariantB, "tiny-128k", 1)); err != nil {
			b.Fatal(err)
		}
	}
	const slots = 64
	for _, kv := range []string{"off", "on"} {
		b.Run("kv-unified="+kv, func(b *testing.B) {
			be, err := Open(context.Background(), Config{
				ModelFile: path, Slots: slots, ContextSize: 512, MaxNewTokens: 24,
				Temperature: 0.6, TopP: 0.9, TopK: 50, Seed: 1, Threads: benchThreads(),
				IgnoreEOS: true, KVUnified: kv,
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			for b.Loop() {
				var wg sync.WaitGroup
				for i := range slots {
					wg.Go(func() {
						if _, err := be.generate(context.Background(), fmt.Sprintf("%s (%d)", benchPrompt, i)); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			st := be.DecodeStepTimes()
			if st.Steps == 0 {
				b.Fatal("no decode-only step")
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(st.Host()), "host-ms/step")
			b.ReportMetric(ms(st.Plan), "plan-ms/step")
			b.ReportMetric(ms(st.Finish), "finish-ms/step")
			b.ReportMetric(ms(st.Compute), "compute-ms/step")
			b.ReportMetric(float64(st.Steps), "decode-steps")
		})
	}
}
