// Command worker loads one model for one variant and serves the jobs of that
// variant from NATS JetStream: text (A, B) through ggml, images (C) through
// ONNX Runtime, on CUDA when present and on the CPU otherwise.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/healthcheck"
	"github.com/genq/genq/internal/hub"
	"github.com/genq/genq/internal/logging"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/onnx"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// textGCPercent is the text worker's GOGC unless the environment sets one.
const textGCPercent = 400

type config struct {
	variant     genq.Variant
	modelDir    string
	slots       int
	workerID    string
	metricsAddr string
	logLevel    string
	nats        natsqueue.ConnectOptions
	queue       natsqueue.Settings
	runtime     worker.Config
	text        textgen.Config
	image       onnx.Config
	imageEngine string // IMAGE_ENGINE: onnx or ggml
	imageT5     string // IMAGE_T5: on or off (ggml only)
}

func parseConfig(args []string, lookup func(string) (string, bool), out io.Writer) (config, error) {
	var c config
	getenv := func(k string) string { v, _ := lookup(k); return v }
	// The variant decides defaults of other flags (model directory, slots,
	// text context), so it is read before the rest are declared.
	v, err := genq.ParseVariant(variantArg(args, getenv))
	if err != nil {
		return c, err
	}
	c.variant = v
	host, _ := os.Hostname()
	var variant string
	fs := envflag.NewLookup("worker", lookup, out)
	fs.String(&variant, "variant", "VARIANT", "B", "variant served: A, B (text) or C (images)")
	fs.String(&c.modelDir, "model-dir", "MODEL_DIR", genq.DefaultModelDir(v, getenv), "directory of the model (/models in containers)")
	defaultSlots, slotsHelp := v.Spec().Slots, "jobs run at once"
	if v.Kind() == genq.OutputText {
		// 0 lets the text backend size the batch from free GPU memory.
		defaultSlots = 0
		slotsHelp = fmt.Sprintf("jobs run at once, sharing one batch; 0 sizes them from free GPU memory (TEXT_GPU_MEMORY_UTILIZATION), or runs %d on a CPU", v.Spec().Slots)
	}
	fs.Int(&c.slots, "slots", "SLOTS", defaultSlots, slotsHelp)
	fs.String(&c.workerID, "worker-id", "WORKER_ID", host+"-"+uuid.NewString()[:8], "this worker's id in heartbeats and logs")
	fs.StringOff(&c.metricsAddr, "metrics-addr", "METRICS_ADDR", defaultMetricsAddr, "address of /metrics and /healthz (empty: off; when the default is taken, a free port)")
	fs.String(&c.logLevel, "log-level", "LOG_LEVEL", "info", "debug, info, warn or error")
	c.nats.RegisterFlags(fs, "nats://127.0.0.1:4222")
	c.queue.RegisterFlags(fs)
	fs.Duration(&c.runtime.DrainGrace, "drain-grace", "DRAIN_GRACE", 2*time.Minute, "how long jobs in flight may finish after SIGTERM")
	fs.Duration(&c.runtime.PollWait, "poll-wait", "POLL_WAIT", 2*time.Second, "longest wait of one pull request")
	fs.Int(&c.runtime.InteractiveSlots, "interactive-slots", "INTERACTIVE_SLOTS", 1, "slots kept for interactive jobs, never filled by batch jobs (0: batch work may fill every slot; at most SLOTS-1)")
	fs.Duration(&c.runtime.HeartbeatEvery, "heartbeat-interval", "HEARTBEAT_INTERVAL", 3*time.Second, "time between heartbeats")
	fs.Duration(&c.runtime.RetryDelay, "retry-delay", "RETRY_DELAY", time.Second, "wait before a failed job's second attempt, doubled after")
	natsqueue.RegisterRouteFlag(fs, &c.runtime.RouteByPrefix)
	fs.Duration(&c.runtime.StealAfter, "route-steal-after", "ROUTE_STEAL_AFTER", natsqueue.DefaultStealAfter, "with ROUTE_BY_PREFIX: how long a job routed to a busy or stopped worker waits before an idle worker takes it")
	c.text.RegisterFlags(fs, v)
	c.image.RegisterFlags(fs)
	fs.String(&c.imageEngine, "image-engine", "IMAGE_ENGINE", "onnx", "image engine: onnx (ONNX Runtime, the ONNX export) or ggml (the ggml/*.gguf files beside it)")
	fs.String(&c.imageT5, "image-t5", "IMAGE_T5", "on", "image engine ggml: off leaves T5 unloaded and gives the transformer zeros in its place")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.imageEngine != "onnx" && c.imageEngine != "ggml":
		return c, fmt.Errorf("image engine %q: want onnx or ggml", c.imageEngine)
	case c.imageT5 != "on" && c.imageT5 != "off":
		return c, fmt.Errorf("IMAGE_T5 %q: want on or off", c.imageT5)
	case c.imageT5 == "off" && c.imageEngine != "ggml":
		return c, errors.New("IMAGE_T5=off needs IMAGE_ENGINE=ggml: the ONNX engine always runs T5")
	}
	if c.slots < 1 && (c.slots < 0 || v.Kind() != genq.OutputText) {
		return c, errors.New("slots must be at least 1")
	}
	c.runtime.WorkerID, c.runtime.Variant = c.workerID, v
	c.text.ModelDir, c.text.Slots, c.text.DefaultSlots = c.modelDir, c.slots, v.Spec().Slots
	c.image.ModelDir, c.image.Slots = c.modelDir, c.slots
	return c, nil
}

// variantArg finds --variant among the arguments, or VARIANT, or B.
func variantArg(args []string, getenv func(string) string) string {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "variant" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	if v := getenv("VARIANT"); v != "" {
		return v
	}
	return "B"
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	getenv := func(k string) string { v, _ := lookup(k); return v }
	if len(args) == 1 && args[0] == "healthcheck" {
		url, err := healthcheck.LocalURL(cmp.Or(getenv("METRICS_ADDR"), defaultMetricsAddr), "/healthz")
		if err != nil {
			return err
		}
		return healthcheck.Probe(ctx, url)
	}
	started := time.Now()
	cfg, err := parseConfig(args, lookup, stdout)
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, cfg.logLevel, "worker")
	if err != nil {
		return err
	}
	log = log.With("worker_id", cfg.workerID, "variant", string(cfg.variant))
	// The engines log through slog's default logger; give them ours.
	slog.SetDefault(log)
	if cfg.variant.Kind() == genq.OutputText && getenv("GOGC") == "" {
		// A text worker's Go heap is small (the weights and the cache live
		// in ggml's memory) and churns fast: every step builds a graph, and
		// at Go's default the collector's assists land on the scheduler
		// loop (docs/benchmarks.md, "The text worker's GOGC"). GOGC still
		// overrides.
		debug.SetGCPercent(textGCPercent)
	}
	logManifest(log, cfg.modelDir)

	// The model loads before the worker announces itself: a model it cannot
	// serve stops it here, never on the first request.
	backend, err := openBackend(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer backend.Close()
	info := backend.Info()
	log.Info("model loaded", "model", info.Model, "device", info.Device.Kind, "device_name", info.Device.Name,
		"slots", info.Slots, "load", time.Since(started).Round(time.Millisecond).String())

	cfg.nats.Name = "genq-worker-" + cfg.workerID
	// The server redelivers by the consumer's AckWait and attempts, not by
	// this worker's flags: serve the consumer as it is, and follow it.
	cfg.queue.AdoptConsumer = true
	conn, err := natsqueue.Dial(ctx, cfg.nats, cfg.queue, log, cfg.variant)
	if err != nil {
		return err
	}
	defer conn.Close()
	go conn.FollowConsumerLimits(ctx, cfg.variant, 30*time.Second)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rt := worker.New(cfg.runtime, conn, backend, log, reg)
	if cfg.metricsAddr != "" {
		stopMetrics, err := serveMetrics(cfg.metricsAddr, reg, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	return rt.Run(ctx)
}

func openBackend(ctx context.Context, cfg config, log *slog.Logger) (genq.Backend, error) {
	if cfg.variant.Kind() == genq.OutputImage {
		if cfg.imageEngine == "ggml" {
			return ggmlimage.Open(ctx, ggmlImageConfig(cfg), log)
		}
		return onnx.Open(ctx, cfg.image, log)
	}
	return textgen.Open(ctx, cfg.text, log)
}

// ggmlImageConfig gives the ggml engine the IMAGE_* settings the ONNX
// engine reads.
func ggmlImageConfig(cfg config) ggmlimage.Config {
	im := cfg.image
	return ggmlimage.Config{ModelDir: im.ModelDir, Slots: im.Slots, Device: im.Device,
		Width: im.Width, Height: im.Height, Steps: im.Steps, GuidanceScale: im.GuidanceScale, Seed: im.Seed,
		MaxSize: im.MaxSize, MaxSteps: im.MaxSteps, Threads: im.Threads, NoT5: cfg.imageT5 == "off"}
}

// logManifest says where the model came from, when genqctl download wrote it.
func logManifest(log *slog.Logger, dir string) {
	m, err := hub.ReadManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("model directory has no download manifest (a generated or hand-placed model)", "dir", dir)
	case err != nil:
		log.Warn("model manifest unreadable", "dir", dir, "err", err)
	default:
		log.Info("model manifest", "dir", dir, "repo", m.Repo, "revision", m.Revision, "commit", m.Commit,
			"files", len(m.Files), "bytes", m.TotalSize(), "downloaded_at", m.DownloadedAt)
	}
}

// defaultMetricsAddr is where a worker serves /metrics unless told otherwise.
const defaultMetricsAddr = ":9091"

// serveMetrics serves /metrics and /healthz; the liveness probe reads the latter.
// A second worker on one host finds the default port taken: it takes a free
// port instead and says which, rather than exit. An address chosen on purpose
// is kept, or the start fails saying what to do.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && addr == defaultMetricsAddr && errors.Is(err, syscall.EADDRINUSE) {
		ln, err = net.Listen("tcp", ":0")
		if err == nil {
			log.Warn("the default metrics address is taken (another worker on this host?); serving /metrics on a free port instead: set METRICS_ADDR to choose one",
				"default", addr, "addr", ln.Addr().String())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("metrics listen on %s: %w (each worker on a host needs its own METRICS_ADDR, e.g. :9092; empty turns /metrics off)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
