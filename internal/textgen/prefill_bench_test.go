package textgen

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// BenchmarkPrefill is one long prompt alone, answered with one token: the
// time to first token is the prefill's. Prompts differ from each other
// from their first token, so no cache is of use, whatever the setting.
// GENQ_BENCH_BATCHES picks the step budgets (TEXT_BATCH_SIZE; default
// 256,512,2048), GENQ_BENCH_PROMPT the prompt's tokens (default 1500),
// GENQ_BENCH_KV_UNIFIED the cache's layout.
//
//	GENQ_BENCH_SIZES=mid GENQ_BENCH_THREADS=2 go test ./internal/textgen -run '^$' -bench Prefill -benchtime 5x
func BenchmarkPrefill(b *testing.B) {
	batches := []int{256, 512, 2048}
	if s := os.Getenv("GENQ_BENCH_BATCHES"); s != "" {
		batches = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			batches = append(batches, n)
		}
	}
	promptTokens := 1500
	if s := os.Getenv("GENQ_BENCH_PROMPT"); s != "" {
		promptTokens, _ = strconv.Atoi(s)
	}
	for _, size := range benchSizes() {
		path := benchModel(b, genq.VariantB, size)
		for _, batch := range batches {
			b.Run(fmt.Sprintf("%s-B/batch%d", size, batch), func(b *testing.B) {
				be, err := Open(context.Background(), Config{
					ModelFile: path, Slots: 8, ContextSize: 2048, MaxNewTokens: 1, BatchSize: batch,
					Threads: benchThreads(), IgnoreEOS: true, KVUnified: os.Getenv("GENQ_BENCH_KV_UNIFIED"),
				}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer be.Close()
				vocab := be.vocab.Size()
				var ttfts []time.Duration
				round := 0
				for b.Loop() {
					prompt := make([]int32, promptTokens)
					for i := range prompt {
						prompt[i] = int32(16 + (round*7919+i*31)%(vocab-32))
					}
					round++
					g, err := be.generateJob(context.Background(), genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, MaxTokens: 1}})
					if err != nil {
						b.Fatal(err)
					}
					ttfts = append(ttfts, g.FirstToken)
				}
				b.ReportMetric(float64(medianDuration(ttfts).Microseconds())/1000, "ttft-ms")
				// The fastest is the figure least moved by other work on a
				// shared machine, which only ever adds time.
				b.ReportMetric(float64(slices.Min(ttfts).Microseconds())/1000, "ttft-min-ms")
				st := &be.sched.stats
				if steps := float64(st.steps.Load()); steps > 0 {
					b.ReportMetric(steps/float64(round), "steps/prompt")
					b.ReportMetric(float64(st.all.planNanos.Load())/steps/1e3, "plan-us/step")
					b.ReportMetric(float64(st.all.computeNanos.Load())/steps/1e3, "compute-us/step")
				}
			})
		}
	}
}
