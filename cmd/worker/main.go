// Command worker serves jobs from NATS JetStream, on CUDA when present and
// on the CPU otherwise. Without a model catalogue it loads its variant's
// model at start: text (A, B) through llama.cpp, images (C) through ggml
// or ONNX Runtime (IMAGE_ENGINE). With one (MODELS_FILE, MODELS) it serves
// the catalogue's models, loading each on demand within a memory budget
// and unloading the least recently used (fleet.go).
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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/genq/genq/internal/config/workerconfig"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/healthcheck"
	"github.com/genq/genq/internal/hub"
	"github.com/genq/genq/internal/logging"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/onnx"
	"github.com/genq/genq/internal/shutdown"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tracing"
	"github.com/genq/genq/internal/worker"
	"github.com/genq/genq/internal/worker/supervisor"
)

func main() {
	ctx, stop := shutdown.OnSignal(context.Background())
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		var exit supervisor.ExitError
		if errors.As(err, &exit) {
			// The supervisor logged what its worker process died of; it
			// exits as the process did (128 + the signal).
			stop()
			os.Exit(exit.Status)
		}
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	if len(args) == 1 && args[0] == "healthcheck" {
		addr, _ := lookup("METRICS_ADDR")
		url, err := healthcheck.LocalURL(cmp.Or(addr, workerconfig.DefaultMetricsAddr), "/healthz")
		if err != nil {
			return err
		}
		return healthcheck.Probe(ctx, url)
	}
	started := time.Now()
	cfg, err := workerconfig.Parse(args, lookup, stdout)
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, cfg.LogLevel, "worker")
	if err != nil {
		return err
	}
	log = log.With("worker_id", cfg.WorkerID, "variant", string(cfg.Variant))
	// The process that serves is the child of a supervisor, which says
	// what it died of, should it die, and notes it in the run records of
	// the jobs it held (internal/worker/supervisor).
	ledger, err := supervisor.Attach()
	if err != nil {
		return err
	}
	if ledger == nil {
		return supervise(ctx, cfg, args, log.With("process", "supervisor"))
	}
	cfg.Runtime.Ledger = ledger
	tr, stopTracing, err := tracing.Start(ctx, cfg.Tracing, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg.Runtime.Tracing = tr.Provider
	// The engines log through slog's default logger; give them ours.
	slog.SetDefault(log)
	if cfg.Variant.Kind() == genq.OutputText && cfg.GOGC == "" {
		// A text worker's Go heap is small (the weights and the cache live
		// in ggml's memory) and churns fast: every step builds a graph, and
		// at Go's default the collector's assists land on the scheduler
		// loop (docs/benchmarks.md, "The text worker's GOGC"). GOGC still
		// overrides.
		debug.SetGCPercent(workerconfig.TextGCPercent)
	}
	if cfg.Models.Configured() {
		// A catalogue: serve its models, loaded on demand.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if cfg.MetricsAddr != "" {
			stopMetrics, err := serveMetrics(cfg.MetricsAddr, reg, log)
			if err != nil {
				return err
			}
			defer stopMetrics()
		}
		return runFleet(ctx, cfg, log, reg)
	}
	logManifest(log, cfg.ModelDir)

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

	cfg.NATS.Name = "genq-worker-" + cfg.WorkerID
	// The api owns the queue's settings: serve the streams, buckets and
	// consumer as it made them (a missing one is made with the defaults,
	// until the api starts), and follow them.
	queue := natsqueue.DefaultSettings()
	queue.Adopt = true
	conn, err := natsqueue.Dial(ctx, cfg.NATS, queue, log, cfg.Variant)
	if err != nil {
		return err
	}
	defer conn.Close()
	if ttl := conn.Settings().HeartbeatTTL; cfg.Runtime.HeartbeatEvery >= ttl {
		log.Warn("HEARTBEAT_INTERVAL is not shorter than the api's HEARTBEAT_TTL: the api counts this worker gone between its heartbeats",
			"heartbeat_interval", cfg.Runtime.HeartbeatEvery.String(), "heartbeat_ttl", ttl.String())
	}
	go conn.FollowConsumerLimits(ctx, cfg.Variant, 30*time.Second)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rt := worker.New(cfg.Runtime, conn, backend, log, reg)
	if cfg.MetricsAddr != "" {
		stopMetrics, err := serveMetrics(cfg.MetricsAddr, reg, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	return rt.Run(ctx)
}

// supervise runs the worker as its own child and waits for it: should it
// die holding jobs, what it died of goes into their run records, where the
// next delivery, and the dead letter of one given up, find it.
func supervise(ctx context.Context, cfg workerconfig.Config, args []string, log *slog.Logger) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	// The child names itself as the supervisor does.
	env := append(os.Environ(), "WORKER_ID="+cfg.WorkerID)
	report := func(ctx context.Context, d supervisor.Death) error {
		at := time.Now()
		crashes := make([]natsqueue.JobCrash, len(d.Jobs))
		for i, j := range d.Jobs {
			crashes[i] = natsqueue.JobCrash{JobID: j.ID, Seq: j.Seq, Note: natsqueue.CrashNote{
				Delivery: j.Attempt, Worker: cfg.WorkerID, Cause: d.Cause, Where: d.Where, Running: j.Running, At: at,
			}}
		}
		o := cfg.NATS
		o.Name = "genq-worker-supervisor-" + cfg.WorkerID
		if err := natsqueue.NoteCrashes(ctx, o, log, crashes); err != nil {
			return err
		}
		log.Info("noted the death in the run records of the jobs it held", "jobs", len(crashes))
		return nil
	}
	d, err := supervisor.Run(ctx, supervisor.Options{Path: exe, Args: args, Env: env, Log: log, Report: report})
	if err != nil {
		return err
	}
	return d.Exit()
}

func openBackend(ctx context.Context, cfg workerconfig.Config, log *slog.Logger) (genq.Backend, error) {
	if cfg.Variant.Kind() == genq.OutputImage {
		if cfg.ImageEngine == "ggml" {
			return ggmlimage.Open(ctx, cfg.GGML, log)
		}
		return onnx.Open(ctx, cfg.ONNX, log)
	}
	return textgen.Open(ctx, cfg.Text, log)
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

// serveMetrics serves /metrics and /healthz; the liveness probe reads the latter.
// A second worker on one host finds the default port taken: it takes a free
// port instead and says which, rather than exit. An address chosen on purpose
// is kept, or the start fails saying what to do.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && addr == workerconfig.DefaultMetricsAddr && errors.Is(err, syscall.EADDRINUSE) {
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
