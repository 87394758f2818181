package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/config/workerconfig"
	"github.com/genq/genq/internal/embedgen"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/llamacpp"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/worker"
)

// budgetShare is the share of the device's memory the default budget
// takes: the rest is for the KV caches and compute buffers, which a
// model's file size does not count.
const budgetShare = 0.8

// runFleet serves the catalogue's models that this worker can load, each
// from its own queue, loading them on demand within the memory budget
// (worker.Fleet).
func runFleet(ctx context.Context, cfg workerconfig.Config, log *slog.Logger, reg *prometheus.Registry) error {
	for _, n := range cfg.Fleet.Serve {
		if _, ok := cfg.Catalog.Lookup(n); !ok {
			return fmt.Errorf("WORKER_MODELS names %q, which the catalogue (MODELS_FILE, MODELS) does not hold", n)
		}
	}
	models := fleetModels(cfg, log)
	if len(models) == 0 {
		return errors.New("no model of the catalogue is one this worker can load (chat and embedding models, as GGUF files)")
	}
	// Before anything loads the engine (the budget asks it for the device).
	if err := setSpinForEmbeddings(models, cfg.Embedding.SpinCount, llamacpp.SetOpenMPSpin, log); err != nil {
		return err
	}
	budget, err := fleetBudget(cfg, log)
	if err != nil {
		return err
	}
	models = leaveOutTooLarge(models, budget, len(cfg.Fleet.Serve) > 0, log)
	fleet, err := worker.NewFleet(models, worker.FleetOptions{Budget: budget, KeepAlive: cfg.Fleet.KeepAlive,
		Load: modelLoader(cfg, log), Log: log, Registry: reg})
	if err != nil {
		return err
	}
	served := fleet.Models()
	queues := make([]genq.Variant, len(served))
	for i, m := range served {
		queues[i] = m.Queue
	}
	cfg.NATS.Name = "genq-worker-" + cfg.WorkerID
	queue := natsqueue.DefaultSettings()
	queue.Adopt = true
	conn, err := natsqueue.Dial(ctx, cfg.NATS, queue, log, queues...)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Keep time by the consumers' ack wait and attempts, as a worker of one
	// model does: the api makes every model's consumer alike.
	go conn.FollowConsumerLimits(ctx, queues[0], 30*time.Second)
	log.Info("serving several models", "models", len(served), "budget", budget, "keep_alive", cfg.Fleet.KeepAlive.String())

	info := func(m genq.Model) genq.BackendInfo {
		return genq.BackendInfo{Device: llamacpp.BackendDevice(nil), Model: m.Name, Slots: modelSlots(cfg, m), Gather: modelGather(cfg, m)}
	}
	return fleet.Serve(ctx, conn, cfg.Runtime, info, log, reg)
}

// setSpinForEmbeddings sets the engine threads' spin at a barrier
// (EMBEDDING_SPIN_COUNT, through set: llamacpp.SetOpenMPSpin) in a worker
// that serves embedding models alone: their steps' operations are long,
// and a thread spinning while its partner is preempted holds a core the
// api, NATS or this worker's Go code need. A chat model's decode steps are
// many short operations, which a short spin slows on a quiet machine
// (docs/text.md, "Threads"), and the setting is the process's, so a
// worker serving any chat model keeps libgomp's own.
func setSpinForEmbeddings(models []genq.Model, count int, set func(int) error, log *slog.Logger) error {
	// Checked here, at start: the embedding model's own check of it comes
	// only when a request first loads the model.
	if err := embedgen.CheckSpinCount(count); err != nil {
		return err
	}
	if count < 0 || len(models) == 0 || slices.ContainsFunc(models, func(m genq.Model) bool { return m.Kind != genq.KindEmbedding }) {
		return nil
	}
	if err := set(count); err != nil {
		return fmt.Errorf("EMBEDDING_SPIN_COUNT: %w", err)
	}
	log.Info("embedding engine threads poll briefly at barriers", "spin_count", count)
	return nil
}

// fleetModels are the catalogue's chat and embedding models with a file
// this worker finds; the seed's model when its directory holds one.
func fleetModels(cfg workerconfig.Config, log *slog.Logger) []genq.Model {
	var out []genq.Model
	for _, m := range cfg.Catalog.Models() {
		if len(cfg.Fleet.Serve) > 0 && !servesModel(cfg.Fleet.Serve, m) {
			continue
		}
		if m.Kind != genq.KindChat && m.Kind != genq.KindEmbedding {
			log.Info("model left out: this worker serves chat and embedding models", "model", m.Name, "kind", m.Kind)
			continue
		}
		if m.Path == "" && m.Queue == cfg.Variant {
			m.Path = cfg.ModelDir
		}
		path, size, err := catalog.GGUFFile(m.Path)
		if err != nil {
			log.Info("model left out: no file for it here", "model", m.Name, "err", err)
			continue
		}
		m.Path = path
		m.SizeBytes = size
		// What the model costs against the budget: its weights and the KV
		// cache of its slots at its context (fleetContext), as the header
		// tells them before any load.
		if info, err := catalog.ReadGGUF(path); err == nil && m.Kind == genq.KindChat {
			m.ContextLength = fleetContext(cfg, info.ContextLength)
			m.SizeBytes += info.KVBytesPerToken * int64(m.ContextLength) * int64(fleetSlots(cfg)+1)
		}
		out = append(out, m)
	}
	return out
}

// leaveOutTooLarge drops the models over the budget when the worker was
// not told which to serve (no WORKER_MODELS) and another model fits.
// Announced as unloadable, they would make the api refuse their requests,
// also while a deployment that can load them is scaled to zero and waits
// for their queue to grow. Named in WORKER_MODELS, or with no model
// fitting (the worker is misconfigured either way), they stay, for the
// fleet to refuse at once and say why.
func leaveOutTooLarge(models []genq.Model, budget int64, named bool, log *slog.Logger) []genq.Model {
	fits := slices.ContainsFunc(models, func(m genq.Model) bool { return m.SizeBytes <= budget })
	if named || !fits {
		return models
	}
	return slices.DeleteFunc(models, func(m genq.Model) bool {
		if m.SizeBytes <= budget {
			return false
		}
		log.Info("model left out: it is larger than the memory budget, and WORKER_MODELS does not name it", "model", m.Name, "bytes", m.SizeBytes, "budget", budget)
		return true
	})
}

// servesModel reports whether names (WORKER_MODELS) name m, by its name
// or an alias.
func servesModel(names []string, m genq.Model) bool {
	for _, n := range names {
		if n == m.Name || slices.Contains(m.Aliases, n) {
			return true
		}
	}
	return false
}

// fleetBudget is MODEL_MEMORY_BUDGET, or budgetShare of the GPU's memory
// (with TEXT_GPU and a GPU) or of the memory available now.
func fleetBudget(cfg workerconfig.Config, log *slog.Logger) (int64, error) {
	if cfg.Fleet.Budget != "" {
		return worker.ParseBytes(cfg.Fleet.Budget)
	}
	if cfg.Text.GPU {
		lib, err := llamacpp.Load(cfg.Text.LibDir, log)
		if err != nil {
			return 0, err
		}
		if gpu := lib.GPU(); gpu != nil {
			_, total := gpu.Memory()
			return int64(float64(total) * budgetShare), nil
		}
	}
	avail := procfs.AvailableMemory()
	if avail == 0 {
		return 0, errors.New("cannot read the memory available: set MODEL_MEMORY_BUDGET")
	}
	return int64(float64(avail) * budgetShare), nil
}

// DefaultFleetContext is each model's context in a fleet unless
// TEXT_CONTEXT_SIZE says otherwise (or the model was trained for less):
// a fixed context, as Ollama's num_ctx, so that a model's cost is known
// before it loads.
const DefaultFleetContext = 8192

// fleetContext is a model's context in a fleet: TEXT_CONTEXT_SIZE, else
// DefaultFleetContext, at most the trained context (when known).
func fleetContext(cfg workerconfig.Config, trained int) int {
	if cfg.Text.ContextSize > 0 {
		return cfg.Text.ContextSize
	}
	if trained > 0 {
		return min(trained, DefaultFleetContext)
	}
	return DefaultFleetContext
}

// fleetSlots is each model's slots: SLOTS, or the variant's default, as a
// fleet's runtime must say them before its model loads.
func fleetSlots(cfg workerconfig.Config) int {
	if cfg.Slots > 0 {
		return cfg.Slots
	}
	return max(cfg.Variant.Spec().Slots, 1)
}

// modelSlots is a model's slots: its kind's. An embedding model's jobs
// share engine steps, so it holds more of them at once than a chat
// model's answers share a batch.
func modelSlots(cfg workerconfig.Config, m genq.Model) int {
	if m.Kind == genq.KindEmbedding {
		return cmp.Or(cfg.Slots, embedgen.DefaultSlots)
	}
	return fleetSlots(cfg)
}

// modelGather is how many waiting jobs of a model one fetch may take: an
// embedding model's step's inputs, for their jobs to share it.
func modelGather(cfg workerconfig.Config, m genq.Model) int {
	if m.Kind == genq.KindEmbedding {
		return cmp.Or(cfg.Embedding.BatchInputs, embedgen.DefaultBatchInputs)
	}
	return 0
}

// modelLoader loads a model with the loader of its kind.
func modelLoader(cfg workerconfig.Config, log *slog.Logger) worker.Loader {
	chat, embedding := textLoader(cfg, log), embeddingLoader(cfg, log)
	return func(ctx context.Context, m genq.Model, progress func(float64)) (genq.Backend, error) {
		if m.Kind == genq.KindEmbedding {
			return embedding(ctx, m, progress)
		}
		return chat(ctx, m, progress)
	}
}

// embeddingLoader loads an embedding model with the worker's embedding
// settings (EMBEDDING_*), its file read through first as a chat model's.
func embeddingLoader(cfg workerconfig.Config, log *slog.Logger) worker.Loader {
	return func(ctx context.Context, m genq.Model, progress func(float64)) (genq.Backend, error) {
		if err := warm(ctx, m.Path, func(p float64) { progress(p * warmShare) }); err != nil {
			return nil, err
		}
		ec := cfg.Embedding
		ec.ModelDir, ec.ModelFile, ec.Slots, ec.LibDir = filepath.Dir(m.Path), filepath.Base(m.Path), modelSlots(cfg, m), cfg.Text.LibDir
		b, err := embedgen.Open(ctx, ec, log.With("model", m.Name))
		if err != nil {
			return nil, err
		}
		progress(1)
		return b, nil
	}
}

// textLoader loads a chat model with the worker's text settings. The file
// is read through once first, which puts it in the page cache (the
// engine's mmap then finds it there): the first part of the load's
// progress; the engine's own count of its load (llama.cpp's
// progress_callback) is the rest.
func textLoader(cfg workerconfig.Config, log *slog.Logger) worker.Loader {
	return func(ctx context.Context, m genq.Model, progress func(float64)) (genq.Backend, error) {
		if err := warm(ctx, m.Path, func(p float64) { progress(p * warmShare) }); err != nil {
			return nil, err
		}
		tc := cfg.Text
		tc.ModelDir, tc.ModelFile, tc.Slots = filepath.Dir(m.Path), filepath.Base(m.Path), fleetSlots(cfg)
		if m.ContextLength > 0 {
			// The context the budget counted, not what free memory allows:
			// a model sized to free memory would leave none to the next.
			tc.ContextSize = m.ContextLength
		}
		b, err := textgen.OpenReporting(ctx, tc, log.With("model", m.Name), func(f float64) { progress(warmShare + f*(1-warmShare)) })
		if err != nil {
			return nil, err
		}
		progress(1)
		return b, nil
	}
}

// warmShare is the part of a chat model's load progress that reading its
// file takes; the engine's load is the rest. Which is longer depends on
// the device (a cold page cache makes the read long, a GPU the engine's
// copy of the weights to its memory), so each counts half. An embedding
// model's load counts its read alone (embedgen does not report its
// engine's load), up to this share.
const warmShare = 0.5

// warm reads path through, saying how far it is.
func warm(ctx context.Context, path string, progress func(float64)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	var done int64
	last := time.Now()
	for {
		n, err := f.Read(buf)
		done += int64(n)
		if time.Since(last) > 250*time.Millisecond && st.Size() > 0 {
			progress(float64(done) / float64(st.Size()))
			last = time.Now()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
