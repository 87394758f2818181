// Command bench measures genq end to end on this machine and rewrites the
// measured section of docs/benchmarks.md and its chart: the façade's
// overhead (HTTP → NATS → worker against the same backend in process), text
// throughput against concurrency for the tiny and the mid-size generated
// models, image latency per step and per image, cold start per variant,
// and peak memory. `make bench` runs it; it stays under 10 minutes on two
// cores.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/test/localstack"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	bin   localstack.Binaries
	root  string
	work  string
	out   io.Writer
	runs  int
	quick bool
	// mtThreads are the compute threads of every server in the multi-turn
	// step.
	mtThreads int
	// fsAnswer is the length of every answer in the fair-share step.
	fsAnswer int
	result   results
	// emb is the embeddings step's figures (embeddings.go).
	emb *embBench
}

type results struct {
	batch      batchBeside
	overhead   overhead
	text       []textPoint
	tokens     map[string]int // new tokens per request, by model
	perToken   map[string]time.Duration
	ttft       map[string]time.Duration
	plain      map[string]float64 // tok/s of the plain one-sequence loop in process, by model
	inProcess  map[string]float64 // tok/s of the scheduler in process at concurrency 1, by model
	image      imageResult
	coldStarts map[string]time.Duration
	rss        []rssRow
	hostStep   map[string]textgen.StepTimes // decode steps at 64 × 128,256, by where rows were narrowed
	noise      []float64                    // (max-min)/median of repeated measurements
	multiTurn  multiTurnResult
	route      routeResult
	fair       fairResult
	// imageEngines compares the image engines in process.
	imageEngines imageEnginesResult
}

type overhead struct {
	n                                     int
	directP50, direct99, httpP50, httpP99 time.Duration
}

type textPoint struct {
	model    string
	conc     int
	tokPerS  float64
	p50, p99 time.Duration
}

type imageResult struct {
	size              int
	perImage, perStep time.Duration
}

type rssRow struct {
	what string
	mib  float64
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	report := fs.String("report", "docs/benchmarks.md", "Markdown file whose measured section to rewrite")
	chart := fs.String("chart", "docs/benchmarks.png", "PNG chart to write")
	runs := fs.Int("runs", 3, "repetitions of each measurement; medians are reported")
	quick := fs.Bool("quick", false, "fewer requests, for a smoke run")
	only := fs.String("only", "", "run only this step (multiturn, image-engines, batch, fairshare, embeddings, or route: routing by prefix, not part of a full run), rewriting only its section")
	mtThreads := fs.Int("multiturn-threads", 2, "compute threads of each server in the multi-turn step")
	fsAnswer := fs.Int("fairshare-answer", 256, "tokens of every answer in the fair-share step")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Without -march, ggml's CPU code has no SIMD and every text figure
	// would be 4 to 24 times too slow to mean anything.
	if !strings.Contains(os.Getenv("CGO_CFLAGS"), "-march") {
		return errors.New("CGO_CFLAGS has no -march: run it as `make bench`")
	}
	root, err := localstack.RepoRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "genq-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	start := time.Now()
	fmt.Fprintln(out, "building binaries…")
	bin, err := localstack.Build(ctx, root, filepath.Join(work, "bin"))
	if err != nil {
		return err
	}
	b := &bench{bin: bin, root: root, work: work, out: out, runs: *runs, quick: *quick, mtThreads: *mtThreads, fsAnswer: *fsAnswer, result: results{
		tokens: map[string]int{}, perToken: map[string]time.Duration{}, ttft: map[string]time.Duration{},
		plain: map[string]float64{}, inProcess: map[string]float64{}, coldStarts: map[string]time.Duration{},
		hostStep: map[string]textgen.StepTimes{},
	}}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"façade overhead", b.facadeOverhead},
		{"text throughput", b.textThroughput},
		{"host time per step", b.hostPerStep},
		{"images", b.images},
		{"cold start", b.coldStart},
		{"multiturn", b.multiTurn},
		{"image-engines", b.imageEngines},
		{"batch", b.batchBesideInteractive},
		{"fairshare", b.fairShare},
		{"embeddings", b.embeddings},
	}
	if *only == "route" {
		steps = append(steps, struct {
			name string
			fn   func(context.Context) error
		}{"route", b.routing})
	}
	if *only != "" {
		steps = slices.DeleteFunc(steps, func(st struct {
			name string
			fn   func(context.Context) error
		}) bool {
			return st.name != *only
		})
		if len(steps) == 0 {
			return fmt.Errorf("-only %q: no such step", *only)
		}
	}
	for _, st := range steps {
		fmt.Fprintf(out, "== %s\n", st.name)
		t0 := time.Now()
		if err := st.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		fmt.Fprintf(out, "   (%s)\n", time.Since(t0).Round(time.Second))
	}
	if *only == "route" {
		md := b.routeMarkdown()
		fmt.Fprintln(out, md)
		return localstack.ReplaceSection(*report, "<!-- bench-route:begin -->", "<!-- bench-route:end -->", md)
	}
	// Each step with a section of its own writes it whenever it ran.
	for _, sec := range []struct {
		name     string
		markdown func() string
	}{
		{"multiturn", b.multiTurnMarkdown},
		{"batch", b.batchMarkdown},
		{"fairshare", b.fairMarkdown},
		{"embeddings", b.embeddingsMarkdown},
		{"image-engines", b.imageEnginesMarkdown},
	} {
		if *only != "" && *only != sec.name {
			continue
		}
		md := sec.markdown()
		fmt.Fprintln(out, md)
		if err := localstack.ReplaceSection(*report, "<!-- bench-"+sec.name+":begin -->", "<!-- bench-"+sec.name+":end -->", md); err != nil {
			return err
		}
	}
	if *only != "" {
		return nil
	}
	if err := writeChart(*chart, b.result.text); err != nil {
		return err
	}
	md := b.markdown(time.Since(start), filepath.Base(*chart))
	fmt.Fprintln(out, md)
	return localstack.ReplaceSection(*report, "<!-- bench:begin -->", "<!-- bench:end -->", md)
}

// stack starts nats-server, the api and one worker, ready, on a freshly
// written tiny model.
func (b *bench) stack(ctx context.Context, name, variant string, modelArgs []string, env ...string) (*localstack.Stack, *localstack.Proc, error) {
	dir := filepath.Join(b.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	s := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: variant, Env: env}
	err := s.WriteTinyModel(ctx, modelArgs...)
	if err == nil {
		err = s.StartNATS(ctx)
	}
	if err == nil {
		err = s.StartAPI(ctx)
	}
	var w *localstack.Proc
	if err == nil {
		w, err = s.StartWorker(ctx, true)
	}
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, w, nil
}

// okLatencies are the outcomes' latencies, sorted, or an error naming the
// first request that was not answered 200.
func okLatencies(what string, outs []localstack.Outcome) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, len(outs))
	for _, o := range outs {
		if o.Status != http.StatusOK {
			return nil, fmt.Errorf("%s: %d %v %s", what, o.Status, o.Err, o.Body)
		}
		lat = append(lat, o.Latency)
	}
	slices.Sort(lat)
	return lat, nil
}

var prompts = []string{
	"Write a haiku about queues.",
	"Explain continuous batching in two sentences.",
	"What is the capital of France?",
	"List three uses of a message broker.",
	"Translate 'good morning' into German.",
	"Give me a name for a cat.",
}

func requests(n int) []localstack.Request {
	r := make([]localstack.Request, n)
	for i := range r {
		r[i] = localstack.Request{Text: prompts[i%len(prompts)]}
	}
	return r
}

// facadeOverhead runs the same prompts on the same tiny model, once through
// POST /generate (api → NATS → worker → back) and once straight into the
// backend in this process, one request at a time, interleaved in rounds so
// drift hits both alike.
func (b *bench) facadeOverhead(ctx context.Context) error {
	env := []string{"SLOTS=1", "TEXT_MAX_NEW_TOKENS=8", "TEXT_SEED=42", "TEXT_IGNORE_EOS=true"}
	s, _, err := b.stack(ctx, "overhead", "B", nil, env...)
	if err != nil {
		return err
	}
	defer s.Close()
	backend, err := openTextBackend(ctx, s.ModelDir, env)
	if err != nil {
		return err
	}
	defer backend.Close()

	perRound := 40
	if b.quick {
		perRound = 10
	}
	var direct, viaHTTP []time.Duration
	client := &http.Client{}
	for round := range 5 {
		for i := range perRound {
			job := genq.Job{Envelope: genq.Envelope{ID: fmt.Sprintf("direct-%d-%d", round, i), Variant: genq.VariantB, Text: prompts[i%len(prompts)], Deadline: time.Now().Add(time.Minute)}}
			t0 := time.Now()
			if _, err := backend.Generate(ctx, job, func(genq.Progress) {}); err != nil {
				return err
			}
			direct = append(direct, time.Since(t0))
		}
		for i := range perRound {
			o := localstack.Generate(ctx, client, s.URL(), localstack.Request{Text: prompts[i%len(prompts)]}, time.Minute)
			if o.Status != http.StatusOK {
				return fmt.Errorf("generate: %d %v %s", o.Status, o.Err, o.Body)
			}
			viaHTTP = append(viaHTTP, o.Latency)
		}
	}
	slices.Sort(direct)
	slices.Sort(viaHTTP)
	b.result.overhead = overhead{n: len(direct), directP50: pct(direct, .5), direct99: pct(direct, .99), httpP50: pct(viaHTTP, .5), httpP99: pct(viaHTTP, .99)}
	o := b.result.overhead
	fmt.Fprintf(b.out, "   direct p50 %s p99 %s; http p50 %s p99 %s\n", o.directP50, o.direct99, o.httpP50, o.httpP99)
	return nil
}

// openTextBackend opens the text backend in this process with exactly the
// settings a worker reads from env.
func openTextBackend(ctx context.Context, modelDir string, env []string) (*textgen.Backend, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var cfg textgen.Config
	fs := envflag.New("bench", func(k string) string { return vars[k] }, io.Discard)
	cfg.RegisterFlags(fs, genq.VariantB)
	if err := fs.Parse(nil); err != nil {
		return nil, err
	}
	cfg.ModelDir = modelDir
	cfg.Slots, _ = strconv.Atoi(vars["SLOTS"])
	return textgen.Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

// textThroughput measures tokens per second through HTTP at each
// concurrency. Stop tokens are ignored so every answer is exactly the
// configured length, the way llama.cpp's batched bench counts.
func (b *bench) textThroughput(ctx context.Context) error {
	for _, m := range []struct {
		name    string
		variant string
		args    []string
		tokens  int
		concs   []int
		// rowsOnly: the throughput rows alone, without the time to first
		// token and the engine-alone comparison.
		rowsOnly bool
	}{
		{"tiny", "B", nil, 128, []int{1, 2, 4, 8, 16}, false},
		{"mid", "B", []string{"--size", "mid"}, 32, []int{1, 2, 4, 8, 16}, false},
		// Variant A's 4-bit weights, whose CPU kernels depend most on the
		// CPU (the repacked Q4_0 ones; docs/engine.md, patch 0005).
		{"mid q4_0", "A", []string{"--size", "mid"}, 32, []int{1, 4}, true},
	} {
		if b.quick {
			m.tokens = 16
		}
		b.result.tokens[m.name] = m.tokens
		env := []string{"SLOTS=16", fmt.Sprintf("TEXT_MAX_NEW_TOKENS=%d", m.tokens), "TEXT_IGNORE_EOS=true"}
		s, w, err := b.stack(ctx, "text-"+strings.ReplaceAll(m.name, " ", "-"), m.variant, m.args, env...)
		if err != nil {
			return err
		}
		client := &http.Client{}
		localstack.Fire(ctx, client, s.URL(), requests(4), 4, 5*time.Minute) // warm up
		var c1Latency time.Duration
		for _, c := range m.concs {
			n := max(2*c, 4)
			var rates []float64
			var lat []time.Duration
			for range b.runs {
				t0 := time.Now()
				outs := localstack.Fire(ctx, client, s.URL(), requests(n), c, 5*time.Minute)
				wall := time.Since(t0)
				ls, err := okLatencies(fmt.Sprintf("%s c=%d", m.name, c), outs)
				if err != nil {
					s.Close()
					return err
				}
				lat = append(lat, ls...)
				rates = append(rates, float64(n*m.tokens)/wall.Seconds())
			}
			slices.Sort(lat)
			p := textPoint{model: m.name, conc: c, tokPerS: median(rates), p50: pct(lat, .5), p99: pct(lat, .99)}
			b.result.noise = append(b.result.noise, spread(rates))
			b.result.text = append(b.result.text, p)
			if c == 1 {
				c1Latency = p.p50
			}
			fmt.Fprintf(b.out, "   %s c=%d: %.0f tok/s, p50 %s p99 %s\n", m.name, c, p.tokPerS, p.p50.Round(time.Millisecond), p.p99.Round(time.Millisecond))
		}
		b.result.rss = append(b.result.rss, rssRow{"worker, text " + m.name + " model, 16 slots", procfs.PeakRSSMiB(w.PID())})
		s.Close()
		if m.rowsOnly {
			continue
		}

		// Time to first token: the same stack answering one token.
		one, err := b.oneTokenLatency(ctx, m.name, m.args)
		if err != nil {
			return err
		}
		b.result.ttft[m.name] = one
		b.result.perToken[m.name] = (c1Latency - one) / time.Duration(m.tokens-1)

		// The engine alone: a plain loop and the scheduler in this process.
		plain, scheduled, err := b.engineRates(ctx, s.ModelDir, m.tokens)
		if err != nil {
			return err
		}
		b.result.plain[m.name], b.result.inProcess[m.name] = plain, scheduled
	}
	return nil
}

func (b *bench) oneTokenLatency(ctx context.Context, model string, args []string) (time.Duration, error) {
	s, _, err := b.stack(ctx, "ttft-"+model, "B", args, "SLOTS=16", "TEXT_MAX_NEW_TOKENS=1", "TEXT_IGNORE_EOS=true")
	if err != nil {
		return 0, err
	}
	defer s.Close()
	client := &http.Client{}
	localstack.Fire(ctx, client, s.URL(), requests(2), 1, time.Minute)
	outs := localstack.Fire(ctx, client, s.URL(), requests(12), 1, time.Minute)
	lat, err := okLatencies("ttft", outs)
	if err != nil {
		return 0, err
	}
	return pct(lat, .5), nil
}

// engineRates measures, in this process and one request at a time, the
// plain single-sequence loop over the engine (GenerateUnbatched) and the
// scheduler (Generate): the same model and settings without HTTP or NATS.
// Rounds alternate between the two so drift hits both alike.
func (b *bench) engineRates(ctx context.Context, modelDir string, tokens int) (plain, scheduled float64, err error) {
	env := []string{"SLOTS=1", fmt.Sprintf("TEXT_MAX_NEW_TOKENS=%d", tokens), "TEXT_IGNORE_EOS=true"}
	backend, err := openTextBackend(ctx, modelDir, env)
	if err != nil {
		return 0, 0, err
	}
	defer backend.Close()
	var plainRates, schedRates []float64
	for r := range b.runs + 1 {
		for _, unbatched := range []bool{true, false} {
			t0 := time.Now()
			for i := range 4 {
				if unbatched {
					_, err = backend.GenerateUnbatched(ctx, prompts[i])
				} else {
					job := genq.Job{Envelope: genq.Envelope{ID: fmt.Sprintf("engine-%d-%d", r, i), Variant: genq.VariantB, Text: prompts[i], Deadline: time.Now().Add(time.Minute)}}
					_, err = backend.Generate(ctx, job, func(genq.Progress) {})
				}
				if err != nil {
					return 0, 0, err
				}
			}
			rate := float64(4*tokens) / time.Since(t0).Seconds()
			switch {
			case r == 0: // the first round warms up
			case unbatched:
				plainRates = append(plainRates, rate)
			default:
				schedRates = append(schedRates, rate)
			}
		}
	}
	return median(plainRates), median(schedRates), nil
}

// hostPerStep measures the host's work per decode step (filling the batch;
// sampling and decoding) at 64 sequences over Llama 3's 128,256-token
// vocabulary, on the tiny blocks so that the engine's compute, reported
// apart, stays short. Rows are narrowed on the device (llama.cpp's backend
// sampling, as a GPU runs it) or read whole.
func (b *bench) hostPerStep(ctx context.Context) error {
	dir := filepath.Join(b.work, "models", "tiny-128k")
	if err := tinygguf.Write(filepath.Join(dir, tinygguf.FileName(genq.VariantB, "tiny-128k")),
		tinygguf.OptionsFor(genq.VariantB, "tiny-128k", 1)); err != nil {
		return err
	}
	const slots = 64
	tokens := 24
	if b.quick {
		tokens = 8
	}
	for _, narrow := range []string{"device", "host"} {
		sampling := map[string]string{"device": "on", "host": "off"}[narrow]
		backend, err := openTextBackend(ctx, dir, []string{fmt.Sprintf("SLOTS=%d", slots), "TEXT_DEVICE_SAMPLING=" + sampling,
			"TEXT_IGNORE_EOS=true", fmt.Sprintf("TEXT_MAX_NEW_TOKENS=%d", tokens), "TEXT_CONTEXT_SIZE=512"})
		if err != nil {
			return err
		}
		errs := make(chan error, slots)
		for i := range slots {
			go func() {
				job := genq.Job{Envelope: genq.Envelope{ID: fmt.Sprintf("host-step-%d", i), Variant: genq.VariantB, Text: prompts[i%len(prompts)], Deadline: time.Now().Add(10 * time.Minute)}}
				_, err := backend.Generate(ctx, job, func(genq.Progress) {})
				errs <- err
			}()
		}
		for range slots {
			if e := <-errs; e != nil && err == nil {
				err = e
			}
		}
		b.result.hostStep[narrow] = backend.DecodeStepTimes()
		backend.Close()
		if err != nil {
			return err
		}
		st := b.result.hostStep[narrow]
		fmt.Fprintf(b.out, "   narrow=%s: host %s per step (plan %s, finish %s), compute %s, %d decode steps\n",
			narrow, ms(st.Host()), ms(st.Plan), ms(st.Finish), ms(st.Compute), st.Steps)
	}
	return nil
}

// images measures variant C on the default engine and the tiny model at
// 256×256 through HTTP: per image at 28 steps, and per step from the
// difference with 2 steps.
func (b *bench) images(ctx context.Context) error {
	const size = 256
	lat := map[int]time.Duration{}
	for _, steps := range []int{28, 2} {
		s, w, err := b.stack(ctx, fmt.Sprintf("image-%d", steps), "C", nil,
			fmt.Sprintf("IMAGE_WIDTH=%d", size), fmt.Sprintf("IMAGE_HEIGHT=%d", size), fmt.Sprintf("IMAGE_STEPS=%d", steps), "IMAGE_SEED=7")
		if err != nil {
			return err
		}
		client := &http.Client{}
		localstack.Fire(ctx, client, s.URL(), requests(2), 1, time.Minute)
		outs := localstack.Fire(ctx, client, s.URL(), requests(5*b.runs), 1, time.Minute)
		ls, err := okLatencies("image", outs)
		if err != nil {
			s.Close()
			return err
		}
		lat[steps] = pct(ls, .5)
		if steps == 28 {
			b.result.rss = append(b.result.rss, rssRow{fmt.Sprintf("worker, images %d×%d tiny export", size, size), procfs.PeakRSSMiB(w.PID())})
		}
		s.Close()
	}
	b.result.image = imageResult{size: size, perImage: lat[28], perStep: (lat[28] - lat[2]) / 26}
	fmt.Fprintf(b.out, "   %d²: %s per image, %s per step\n", size, lat[28], b.result.image.perStep)
	return nil
}

// coldStart times, for each variant, process start to the first answered
// request: the api and a worker start together, and the request waits in
// the queue until the worker has loaded its model.
func (b *bench) coldStart(ctx context.Context) error {
	for _, v := range []string{"A", "B", "C"} {
		var times []time.Duration
		for r := range b.runs {
			dir := filepath.Join(b.work, fmt.Sprintf("cold-%s-%d", v, r))
			_ = os.MkdirAll(dir, 0o755)
			s := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: v, Env: []string{"IMAGE_WIDTH=256", "IMAGE_HEIGHT=256"}}
			if err := s.WriteTinyModel(ctx); err != nil {
				return err
			}
			if err := s.StartNATS(ctx); err != nil {
				return err
			}
			port, _ := localstack.FreePort()
			s.APIPort = port
			t0 := time.Now()
			api, err := localstack.Start("api", b.bin.API, nil, []string{"VARIANT=" + v, "NATS_URL=" + s.NATSURL(), "ADDR=127.0.0.1:" + strconv.Itoa(port)}, dir)
			if err != nil {
				return err
			}
			s.API = api
			w, err := s.StartWorker(ctx, false)
			if err != nil {
				s.Close()
				return err
			}
			var first time.Duration
			for time.Since(t0) < time.Minute {
				o := localstack.Generate(ctx, http.DefaultClient, s.URL(), localstack.Request{Text: "hello"}, 30*time.Second)
				if o.Status == http.StatusOK {
					first = time.Since(t0)
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if r == 0 {
				b.result.rss = append(b.result.rss, rssRow{"api, variant " + v + ", after its first request", procfs.PeakRSSMiB(api.PID())})
				if v == "A" {
					b.result.rss = append(b.result.rss, rssRow{"worker, variant A tiny 4-bit model", procfs.PeakRSSMiB(w.PID())})
				}
			}
			s.Close()
			if first == 0 {
				return fmt.Errorf("variant %s never answered", v)
			}
			times = append(times, first)
		}
		slices.Sort(times)
		b.result.coldStarts[v] = times[len(times)/2]
		fmt.Fprintf(b.out, "   variant %s: %s\n", v, b.result.coldStarts[v])
	}
	return nil
}

// median is the middle of xs (the upper one of an even count), zero for
// none.
func median[T cmp.Ordered](xs []T) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// spread is (max-min)/median: how much repeated runs disagreed.
func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := median(xs)
	if m == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / m
}

func commit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
