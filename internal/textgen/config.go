// Package ggml is genq's text backend: it serves a GGUF chat model with
// ollama's Go-native ggml engine, in process, and runs its own continuous-
// batching scheduler and sampler on top of it.
package textgen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen/sample"
)

// Config is what Open needs to load and serve a model.
type Config struct {
	ModelDir  string // directory holding one .gguf (or ModelFile names it)
	ModelFile string // a .gguf file; relative names are inside ModelDir

	// Slots is the most sequences in one batch. 0 sizes it: from free
	// memory on a GPU (see GPUMemoryUtilization), DefaultSlots on a CPU.
	Slots        int
	DefaultSlots int // 0 means defaultCPUSlots
	ContextSize  int // per-sequence context: prompt plus answer, in tokens
	MaxNewTokens int

	// Sampling. RegisterFlags defaults them to Llama 3.1's 0.6 / 0.9 and
	// Hugging Face's top-k 50; a zero Temperature is greedy.
	Temperature float64
	TopP        float64
	TopK        int
	Seed        int64 // 0 = random per request; nonzero = reproducible

	Threads   int // 0 = number of CPUs, or 1 for a model too small to split (see Open)
	BatchSize int // max tokens per forward step (the prefill chunk size)

	// SystemPrompt is the first message of every conversation.
	SystemPrompt string
	// GPU = false keeps the model on the CPU even when CUDA is found.
	GPU bool
	// GPUMemoryUtilization is the share of the GPU's free memory that the
	// weights, the KV cache and the compute graph may take when Slots is
	// sized from it, as vLLM's gpu_memory_utilization.
	GPUMemoryUtilization float64

	// Narrow is where each sampled row is narrowed to the sampler's top-k:
	// "device" sorts in the step's own graph and only k logits per row reach
	// the host; "host" copies whole rows and selects there; "auto" narrows
	// on the device when a GPU computes and the step samples two rows or
	// more (one row is cheaper to copy than to sort). A CPU's sort over a
	// 128k vocabulary costs more than the host's selection, and for small
	// vocabularies neither matters.
	Narrow string

	// Graph is which forward pass steps run: "streams" is genq's own llama
	// graph, each slot with its own stream of cache cells, so a token
	// attends over its own sequence only; "engine" is the engine's model
	// graph over one unified cache, where every token scores the cells of
	// every sequence in the step; "auto" takes streams for llama models and
	// the engine's graph for other architectures.
	Graph string

	// Pipeline is "on", "off" or "auto": whether the graph of step N+1 is
	// built while step N computes. Auto turns it on when a GPU computes,
	// leaving the CPU free to build; on a CPU it steals a core from ggml's
	// threads, which then spin at their barriers (measured in
	// docs/benchmarks.md).
	Pipeline string

	// PrefixCache is "on" or "off": whether a finished sequence's cells
	// stay in its slot for a later prompt that starts with the same
	// tokens (prefixcache.go).
	PrefixCache string

	// IgnoreEOS makes every answer MaxNewTokens long, as llama.cpp's
	// --ignore-eos does: benchmarks count tokens that way, and a
	// random-weight model would otherwise stop at a random length. Never
	// for serving users.
	IgnoreEOS bool
	pipeline  bool // Pipeline, resolved by Open
	// noSharedPrefix prefills every prompt whole: tests compare against it.
	noSharedPrefix bool
	// flashChunks has prompt chunks attend with the flash kernel on a CPU
	// too, as decoding does there (matmulChunkAttention): tests and
	// benchmarks compare the two.
	flashChunks bool
	// flashAttention forces ggml's flash kernel on the CPU, where Open
	// otherwise takes it for real models only: tests cover both kernels.
	flashAttention bool
}

// DefaultSystemPrompt is the system message of every conversation unless
// TEXT_SYSTEM_PROMPT says otherwise.
const DefaultSystemPrompt = "You are a helpful assistant."

// RegisterFlags binds the text settings to flags and TEXT_* environment
// variables. ModelDir and Slots belong to the worker and are not bound here.
func (c *Config) RegisterFlags(fs *envflag.Set, v genq.Variant) {
	fs.String(&c.ModelFile, "text-model-file", "TEXT_MODEL_FILE", "", "the .gguf to load when the model directory holds several (relative to it)")
	fs.Int(&c.ContextSize, "text-context-size", "TEXT_CONTEXT_SIZE", v.Spec().ContextSize, "tokens of context per sequence, prompt and answer together")
	fs.Int(&c.MaxNewTokens, "text-max-new-tokens", "TEXT_MAX_NEW_TOKENS", 256, "most tokens generated per request")
	fs.Float64(&c.Temperature, "text-temperature", "TEXT_TEMPERATURE", 0.6, "sampling temperature; 0 is greedy")
	fs.Float64(&c.TopP, "text-top-p", "TEXT_TOP_P", 0.9, "nucleus sampling: keep the most likely tokens up to this probability")
	fs.Int(&c.TopK, "text-top-k", "TEXT_TOP_K", 50, "keep only the k most likely tokens; 0 keeps all (Hugging Face samples with 50)")
	fs.Int64(&c.Seed, "text-seed", "TEXT_SEED", 0, "sampling seed: 0 draws a fresh one per request, any other value makes output reproducible")
	fs.Int(&c.Threads, "text-threads", "TEXT_THREADS", 0, "CPU threads for compute; 0 uses every CPU")
	fs.Int(&c.BatchSize, "text-batch-size", "TEXT_BATCH_SIZE", 256, "most tokens in one forward step; long prompts are prefilled in chunks of this size")
	fs.String(&c.Pipeline, "text-pipeline", "TEXT_PIPELINE", "auto", "build step N+1 while step N computes: on, off, or auto (on when a GPU computes)")
	fs.String(&c.SystemPrompt, "text-system-prompt", "TEXT_SYSTEM_PROMPT", DefaultSystemPrompt, "system message of every conversation")
	fs.Bool(&c.GPU, "text-gpu", "TEXT_GPU", true, "offload every layer to a CUDA GPU when one is found")
	fs.Float64(&c.GPUMemoryUtilization, "text-gpu-memory-utilization", "TEXT_GPU_MEMORY_UTILIZATION", 0.9, "share of the GPU's free memory that weights, KV cache and graph may take when SLOTS is unset and the slots are sized from it")
	fs.String(&c.Narrow, "text-narrow", "TEXT_NARROW", "auto", "where rows are narrowed to the sampler's top-k: device (in the step's graph), host, or auto (device on a GPU for steps of two rows or more)")
	fs.String(&c.Graph, "text-graph", "TEXT_GRAPH", "auto", "forward pass: streams (genq's llama graph, attention per sequence), engine (the engine's graph, one unified cache), or auto (streams for llama models)")
	fs.String(&c.PrefixCache, "text-prefix-cache", "TEXT_PREFIX_CACHE", "on", "keep finished conversations' KV cells for prompts that start with them: on or off")
	fs.Bool(&c.IgnoreEOS, "text-ignore-eos", "TEXT_IGNORE_EOS", false, "benchmarks only: generate exactly max-new-tokens, ignoring end-of-turn tokens")
}

// withDefaults fills the zero values a caller that did not register flags
// leaves behind, and rejects settings that cannot work.
func (c Config) withDefaults() (Config, error) {
	if c.Slots < 0 {
		return c, fmt.Errorf("text: slots %d: want 0 (sized by Open) or more", c.Slots)
	}
	if c.ContextSize <= 0 {
		c.ContextSize = 512
	}
	if c.MaxNewTokens <= 0 {
		c.MaxNewTokens = 256
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 256
	}
	var err error
	if c.Pipeline, err = oneOf("pipeline", c.Pipeline, "auto", "on", "off"); err != nil {
		return c, err
	}
	if c.Graph, err = oneOf("graph", c.Graph, "auto", "streams", "engine"); err != nil {
		return c, err
	}
	if c.PrefixCache, err = oneOf("prefix cache", c.PrefixCache, "on", "off"); err != nil {
		return c, err
	}
	if c.Narrow, err = oneOf("narrow", c.Narrow, "auto", "device", "host"); err != nil {
		return c, err
	}
	if c.GPUMemoryUtilization <= 0 || c.GPUMemoryUtilization > 1 {
		if c.GPUMemoryUtilization != 0 {
			return c, fmt.Errorf("text: GPU memory utilization %v: want a share in (0, 1]", c.GPUMemoryUtilization)
		}
		c.GPUMemoryUtilization = 0.9
	}
	if c.SystemPrompt == "" {
		c.SystemPrompt = DefaultSystemPrompt
	}
	c = c.withSlots(c.Slots)
	if c.MaxNewTokens >= c.ContextSize {
		return c, fmt.Errorf("text: max new tokens (%d) leaves no room for a prompt in a context of %d", c.MaxNewTokens, c.ContextSize)
	}
	if err := c.samplerParams().Validate(); err != nil {
		return c, fmt.Errorf("text: %w", err)
	}
	return c, nil
}

// oneOf checks a setting against its choices; empty takes the first.
func oneOf(name, value string, choices ...string) (string, error) {
	if value == "" {
		return choices[0], nil
	}
	if !slices.Contains(choices, value) {
		return value, fmt.Errorf("text: %s %q: want one of %s", name, value, strings.Join(choices, ", "))
	}
	return value, nil
}

// withSlots sets the slots, once known, and what depends on them.
func (c Config) withSlots(slots int) Config {
	c.Slots = slots
	// A chunk of one prompt never exceeds its context, and a step always
	// carries one token per decoding sequence.
	c.BatchSize = max(min(c.BatchSize, c.ContextSize), c.Slots)
	return c
}

func (c Config) samplerParams() sample.Params {
	return sample.Params{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP}
}

// narrowCandidates is the most candidates per row the device hands over
// under this config: TopK for a sampled row, 1 for a greedy one, 0 (whole
// rows for every request) when it samples without a top-k. A request that
// asks for a larger top_k, or none, gets whole rows (stepNarrowK).
func (c Config) narrowCandidates() int {
	if c.TopK > 0 {
		return c.TopK
	}
	return c.samplerParams().Narrowed()
}
