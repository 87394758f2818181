package textgen

import (
	"fmt"
	"math"

	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"

	"github.com/genq/genq/internal/genq"
)

// stepGraph builds a step's forward pass and owns the KV cache the pass
// reads and writes. A batch's Sequences are slots: 0 to Slots-1 for
// requests, Slots for the shared prompt prefix.
//
// Two implementations: streamGraph, genq's own llama graph over a cache
// with one stream of cells per slot, and engineGraph, the engine's own
// model graph over its unified cache, for every other architecture and as
// the reference the first is tested against (TEXT_GRAPH=engine).
type stepGraph interface {
	// forward builds the logits of batch's output rows. With reserve it
	// builds the largest graph of that shape, to size compute memory, and
	// changes no cache state.
	forward(ctx ml.Context, batch input.Batch, reserve bool) (ml.Tensor, error)
	// copyPrefix makes the first n cells of slot dst those of slot src.
	copyPrefix(src, dst int, n int32) error
	// clear forgets every cell of slot.
	clear(slot int) error
	// trim forgets the cells of slot from position n on.
	trim(slot int, n int32) error
	// dropCopiesFrom cancels the copies from src that no step has made
	// yet, and returns the slots they were for.
	dropCopiesFrom(src int) []int
	// maxChunks is the most prompt chunks one step may carry (0: no limit).
	maxChunks() int
	close()
}

// engineGraph is the engine's model graph and unified causal cache: every
// token of a step attends over the cells of all the step's sequences,
// masked to its own.
type engineGraph struct {
	model model.Model
	cache kvcache.Cache
}

func (g *engineGraph) forward(ctx ml.Context, batch input.Batch, reserve bool) (ml.Tensor, error) {
	if !reserve {
		return model.Forward(ctx, g.model, batch)
	}
	if err := g.cache.StartForward(ctx, batch, true); err != nil {
		return nil, err
	}
	return g.model.Forward(ctx, batch)
}

func (g *engineGraph) copyPrefix(src, dst int, n int32) error {
	g.cache.CopyPrefix(src, dst, n)
	return nil
}

func (g *engineGraph) clear(slot int) error {
	return g.cache.Remove(slot, 0, math.MaxInt32)
}

func (g *engineGraph) maxChunks() int { return 0 }

func (g *engineGraph) close() { g.cache.Close() }

// buildForward is g.forward with ggml's panics (out of graph nodes, say)
// turned into errors, which must fail the step, not the worker.
func buildForward(g stepGraph, ctx ml.Context, batch input.Batch, reserve bool) (t ml.Tensor, err error) {
	defer recoverError(&err)
	t, err = g.forward(ctx, batch, reserve)
	if err != nil {
		return nil, fmt.Errorf("build forward graph: %w", err)
	}
	return t, nil
}

// newGraph picks the step graph for m: genq's stream graph for llama
// models, unless cfg.Graph asks for the engine's. Both keep one cache
// sequence per slot and one more for the shared prompt prefix.
func newGraph(m model.Model, cfg Config, device genq.Device) (g stepGraph, err error) {
	defer recoverError(&err) // ggml panics when the cache does not fit
	// Attended cells are rounded up to a padding. ggml's default of 256
	// suits GPU kernels; on the CPU padded cells are pure cost, a large one
	// for small models (docs/benchmarks.md).
	padding := 0
	if !device.IsCUDA() {
		padding = 32
	}
	arch := m.Backend().Config().Architecture()
	if cfg.Graph != "engine" {
		if sg, ok := newStreamGraph(m, cfg.Slots+1, cfg.ContextSize, padding); ok {
			sg.matmulChunks = !device.IsCUDA() && !sg.permutedV && !cfg.flashChunks
			return sg, nil
		}
		if cfg.Graph == "streams" {
			return nil, fmt.Errorf("graph %q: genq's own graph serves llama models, not %q; set TEXT_GRAPH=engine", cfg.Graph, arch)
		}
	}
	cache := m.Config().Cache
	if cache == nil {
		return nil, fmt.Errorf("architecture %q has no KV cache, which batching needs", arch)
	}
	if padding > 0 {
		cc := backendCacheConfig(m)
		cc.CachePadding = padding
		setCacheConfig(cache, cc)
	}
	cache.Init(m.Backend(), ml.DTypeF16, cfg.Slots+1, cfg.ContextSize, cfg.BatchSize)
	return &engineGraph{model: m, cache: cache}, nil
}

// backendCacheConfig is how the engine's attention wants the cache laid
// out: values cell-major for the plain kernel, an F16 mask for flash.
func backendCacheConfig(m model.Model) ml.CacheConfig {
	if b, ok := m.Backend().(interface{ CacheConfig() ml.CacheConfig }); ok {
		return b.CacheConfig()
	}
	return ml.CacheConfig{CachePadding: 256, PermutedV: true}
}

// setCacheConfig overrides the cache's layout unless the model has already
// chosen one (the cache panics then, and the model's choice stands).
func setCacheConfig(c kvcache.Cache, cc ml.CacheConfig) {
	var ignored error
	defer recoverError(&ignored)
	c.SetConfig(cc)
}
