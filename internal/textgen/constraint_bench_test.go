package textgen

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured"
	"github.com/genq/genq/internal/textgen/sample"
	"github.com/genq/genq/internal/tinygguf"
)

// Benchmarks of constrained decoding, on Llama 3's own 128,256 tokens
// (.cache/llama3-vocab.hex, which make test fetches; without it they skip):
//
//	go test ./internal/textgen -run '^$' -bench Constrained -benchtime 5x
//
// GENQ_BENCH_CONSTRAINED_SIZES picks the model sizes of
// BenchmarkConstrainedStep among those with the full vocabulary (default
// "mid-128k": the mid model's blocks; "tiny-128k" makes the host's share
// of a step its largest).

// llama3Tokens reads Llama 3's tokens, each one's bytes (none for the
// special ones), or skips the benchmark.
func llama3Tokens(b *testing.B) [][]byte {
	b.Helper()
	f, err := os.Open(filepath.Join("..", "..", ".cache", "llama3-vocab.hex"))
	if err != nil {
		b.Skipf("Llama 3's vocabulary: %v (scripts/fetch-vocab.sh writes it)", err)
	}
	defer f.Close()
	var toks [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		t, err := hex.DecodeString(sc.Text())
		if err != nil {
			b.Fatal(err)
		}
		toks = append(toks, t)
	}
	if err := sc.Err(); err != nil || len(toks) != 128256 {
		b.Fatalf("Llama 3's vocabulary: %d tokens, %v", len(toks), err)
	}
	return toks
}

// llama3Model writes a model of size (one with the full vocabulary) whose
// regular tokens are Llama 3's own, in their byte-level form; the special
// tokens stay tinygguf's, at Llama 3's ids. Without Llama 3's merges the
// tokenizer reads prompts byte by byte, which changes only the prompts'
// lengths.
func llama3Model(b *testing.B, size string) string {
	b.Helper()
	if !strings.HasSuffix(size, "-128k") {
		b.Skipf("size %q: Llama 3's vocabulary needs a size with the full vocabulary (-128k)", size)
	}
	toks := llama3Tokens(b)
	dir := filepath.Join(os.TempDir(), "genq-ggml-bench")
	opts := tinygguf.OptionsFor(genq.VariantB, size, 1)
	p := filepath.Join(dir, "llama3-vocab-"+string(opts.Weights)+"-"+tinygguf.FileName(genq.VariantB, size))
	if _, err := os.Stat(p); err == nil {
		return p
	}
	alphabet := tinygguf.ByteLevelAlphabet()
	specials := tinygguf.Llama3Specials()
	for i := len(specials); i < 256; i++ {
		specials = append(specials, fmt.Sprintf("<|reserved_special_token_%d|>", i-8))
	}
	names := make([]string, len(toks))
	types := make([]int32, len(toks))
	for id, t := range toks {
		if id >= 128000 {
			names[id], types[id] = specials[id-128000], 3
			continue
		}
		var s strings.Builder
		for _, c := range t {
			s.WriteString(alphabet[c])
		}
		names[id], types[id] = s.String(), 1
	}
	opts.Override = map[string]any{"tokenizer.ggml.tokens": names, "tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges": []string{"Ġ Ġ"}}
	if err := tinygguf.Write(p, opts); err != nil {
		b.Fatal(err)
	}
	return p
}

// constrainedBenchSchema's answers cannot end within the benchmark's
// tokens: twenty objects at least, each with a string and an array of
// strings, so every constrained row is masked at every step, in strings
// (most tokens allowed) and between them (few allowed).
const constrainedBenchSchema = `{"type":"array","minItems":20,"items":{"type":"object",` +
	`"properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},` +
	`"required":["name","tags"],"additionalProperties":false}}`

// BenchmarkConstrainedStep runs steps of 8 sequences with none of them
// constrained, and with half of them, in alternate rounds on one backend,
// and reports each's generated tokens per second over the rounds' wall
// time (medians over rounds) and their ratio, and the decode-only steps'
// mean times (the host's finish: sampling, masks; ggml's compute).
func BenchmarkConstrainedStep(b *testing.B) {
	sizes := []string{"mid-128k"}
	if s := os.Getenv("GENQ_BENCH_CONSTRAINED_SIZES"); s != "" {
		sizes = strings.Split(s, ",")
	}
	const rows, tokens = 8, 32
	for _, size := range sizes {
		b.Run(size, func(b *testing.B) {
			path := llama3Model(b, size)
			be, err := Open(context.Background(), Config{
				ModelFile: path, Slots: rows, ContextSize: 512, MaxNewTokens: tokens,
				Temperature: 0.6, TopP: 0.9, TopK: 50, Seed: 1, Threads: benchThreads(), IgnoreEOS: true,
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			jobs := func(constrained int, round int) []genq.Job {
				out := make([]genq.Job, rows)
				for i := range out {
					seed := int64(round*rows + i)
					out[i] = genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: genq.RoleUser, Content: "List twenty things."}}, Seed: &seed}}
					if i < constrained {
						out[i].ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema,
							JSONSchema: &genq.JSONSchema{Name: "things", Schema: json.RawMessage(constrainedBenchSchema)}}
					}
				}
				return out
			}
			// Once, outside the timing: the weights paged in, then the
			// vocabulary's analysis and the grammar's masks, which a
			// worker works out on its first constrained job only.
			for _, constrained := range []int{0, 1} {
				t0 := time.Now()
				if _, err := benchTogether(be, jobs(constrained, -1)); err != nil {
					b.Fatal(err)
				}
				b.Logf("warm-up round with %d constrained: %v", constrained, time.Since(t0).Round(time.Millisecond))
			}
			var free, half []float64
			// The decode-only steps' times of each kind of round, summed,
			// and the process's CPU time and tokens: on a shared machine
			// the CPU time a token costs moves less than the wall time.
			var steps [2]stepSums
			var cpu [2]time.Duration
			var generated [2]int
			round := 0
			for b.Loop() {
				// ABBA: the order alternates, so a drift in the shared
				// machine's load falls on both kinds alike.
				kinds := []int{0, 1}
				if round%2 == 1 {
					kinds = []int{1, 0}
				}
				for _, kind := range kinds {
					constrained := kind * rows / 2
					t := time.Now()
					before, cpuBefore := sumsOf(&be.sched.stats.decode), processCPU(b)
					out, err := benchTogether(be, jobs(constrained, round))
					steps[kind] = steps[kind].plus(sumsOf(&be.sched.stats.decode).minus(before))
					cpu[kind] += processCPU(b) - cpuBefore
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for _, r := range out {
						n += r.Tokens
					}
					if n != rows*tokens {
						b.Fatalf("%d tokens generated, want %d: an answer ended early", n, rows*tokens)
					}
					generated[kind] += n
					rate := float64(n) / time.Since(t).Seconds()
					if constrained == 0 {
						free = append(free, rate)
					} else {
						half = append(half, rate)
					}
				}
				round++
			}
			b.ReportMetric(median(free), "free-tok/s")
			b.ReportMetric(median(half), "half-constrained-tok/s")
			b.ReportMetric(median(half)/median(free), "ratio")
			for kind, name := range []string{"free", "half-constrained"} {
				st := steps[kind]
				b.ReportMetric(st.mean(st.finish), name+"-finish-ms/step")
				b.ReportMetric(st.mean(st.compute), name+"-compute-ms/step")
				b.ReportMetric(rows/(st.mean(st.plan+st.compute+st.finish)/1e3), name+"-decode-tok/s")
				b.ReportMetric(float64(generated[kind])/cpu[kind].Seconds(), name+"-tok/cpu-s")
			}
			b.ReportMetric(float64(generated[1])/cpu[1].Seconds()/(float64(generated[0])/cpu[0].Seconds()), "cpu-ratio")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stepSums are sums of steps' times, in nanoseconds.
type stepSums struct{ steps, plan, compute, finish int64 }

func sumsOf(t *stepTimes) stepSums {
	return stepSums{t.steps.Load(), t.planNanos.Load(), t.computeNanos.Load(), t.finishNanos.Load()}
}

func (a stepSums) minus(b stepSums) stepSums {
	return stepSums{a.steps - b.steps, a.plan - b.plan, a.compute - b.compute, a.finish - b.finish}
}

func (a stepSums) plus(b stepSums) stepSums {
	return stepSums{a.steps + b.steps, a.plan + b.plan, a.compute + b.compute, a.finish + b.finish}
}

// mean is nanos over the steps, in milliseconds.
func (a stepSums) mean(nanos int64) float64 { return float64(nanos) / float64(max(a.steps, 1)) / 1e6 }

// benchTogether runs jobs at once, admitted to the same steps.
func benchTogether(be *Backend, jobs []genq.Job) ([]seqResult, error) {
	out := make([]seqResult, len(jobs))
	errs := make([]error, len(jobs))
	held := make(chan struct{})
	released := make(chan error, 1)
	go func() {
		released <- be.sched.exclusively(context.Background(), func() {
			close(held)
			for deadline := time.Now().Add(30 * time.Second); len(be.sched.submit) < len(jobs) && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		})
	}()
	<-held
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Go(func() { out[i], errs[i] = be.generateJobStream(context.Background(), job, nil) })
	}
	wg.Wait()
	if err := <-released; err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BenchmarkConstrainedRow times the host's work on one row of Llama 3's
// 128,256 logits: the sampler alone (top-k 50, top-p 0.9), and the mask
// worked out and applied before the same sampler, at states of a schema
// between values (few tokens allowed) and inside a string (most allowed).
func BenchmarkConstrainedRow(b *testing.B) {
	toks := llama3Tokens(b)
	mv := maskVocabOf(toks, []int32{128001, 128009})
	g, err := structured.Compile([]byte(constrainedBenchSchema))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if _, err := g.Prepare(context.Background(), mv.vocab, 0); err != nil {
		b.Fatal(err)
	}
	b.Logf("Prepare: %v", time.Since(t0))
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, len(toks))
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	params := sample.Params{Temperature: 0.6, TopK: 50, TopP: 0.9}
	row := make([]float32, len(logits))
	b.Run("unconstrained", func(b *testing.B) {
		s := sample.New(params, 1)
		for b.Loop() {
			copy(row, logits)
			if _, err := s.Sample(row); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, at := range []struct{ name, prefix string }{
		{"between values", `[{"name": "a", "tags": []}, `},
		{"in a string", `[{"name": "a`},
	} {
		b.Run("mask only "+at.name, func(b *testing.B) {
			m := g.NewMatcher()
			m.Advance([]byte(at.prefix))
			mask := make([]uint64, (len(toks)+63)/64)
			for b.Loop() {
				m.Mask(mv.vocab, mask)
			}
		})
		b.Run("masked "+at.name, func(b *testing.B) {
			m := g.NewMatcher()
			if !m.Advance([]byte(at.prefix)) {
				b.Fatalf("%q is not a start of the schema's answers", at.prefix)
			}
			sc := &seqConstraint{c: structured.Constraint{Grammar: g}, v: mv, m: m, mask: make([]uint64, (len(toks)+63)/64)}
			req := &request{sampler: sample.New(params, 1), constraint: sc}
			for b.Loop() {
				copy(row, logits)
				if _, _, err := sampleMasked(req, row); err != nil {
					b.Fatal(err)
				}
			}
			allowed, err := sc.fillMask(len(row))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(allowed), "allowed")
		})
	}
}

// BenchmarkMaskVocab times the analysis of Llama 3's vocabulary for masks,
// which a backend runs once, on its first constrained job: each token
// decoded to its bytes, and the trie built.
func BenchmarkMaskVocab(b *testing.B) {
	path := llama3Model(b, "tiny-128k")
	be, err := Open(context.Background(), Config{ModelFile: path, Slots: 1, Threads: 1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	for b.Loop() {
		newMaskVocab(be.textModel)
	}
	// The bytes a token gets are what decoding it writes: Llama 3's own.
	differ := 0
	for id, t := range llama3Tokens(b)[:128000] {
		if piece, err := be.testDecode([]int32{int32(id)}); err != nil || piece != string(t) {
			differ++
		}
	}
	b.ReportMetric(float64(differ), "tokens-whose-bytes-differ")
}
