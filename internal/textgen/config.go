// Package textgen is genq's text backend: it serves a GGUF chat model on
// llama.cpp (internal/llamacpp), in process, and runs genq's own
// continuous-batching scheduler, sampler, structured-output masks and
// prefix cache on top of it.
package textgen

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
	// ContextSize is the context per sequence, prompt and answer
	// together, in tokens; 0 takes the model's trained context, lowered
	// to what memory holds for the slots (Open).
	ContextSize int
	// MaxNewTokens caps an answer; 0 leaves it to what the context leaves
	// after the prompt.
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

	// KVUnified is "auto", "on" or "off": whether the engine keeps one KV
	// buffer for every slot (llama.cpp's kv_unified), where a step's tokens
	// attend over every slot's cells, masked to their own, and a prompt
	// shares the cells it copies from another slot; or a stream of cells
	// per slot, each attending over its own (docs/text.md measures both).
	KVUnified string
	// FlashAttention is "auto", "on" or "off": llama.cpp's flash_attn_type.
	FlashAttention string

	// DeviceSampling is "auto", "on" or "off": whether the rows of a request
	// whose sampler needs only its top-k candidates are narrowed to them on
	// the device, in the step's own graph (llama.cpp's backend sampling),
	// so that only k logits per row reach the host. Rows that need the
	// whole vocabulary (a grammar's mask, logprobs, penalties and biases, a
	// sampler without top-k) cross whole. Auto narrows when a GPU computes,
	// where copying and scanning whole rows costs the step most.
	DeviceSampling string

	// PrefixCache is "on" or "off": whether a finished sequence's cells
	// stay in its slot for a later prompt that starts with the same
	// tokens (prefixcache.go).
	PrefixCache string

	// TenantSteps is "auto", "on" or "off": whether a tenant that has used
	// more than its share of the model lately sits out steps while one
	// under its share decodes (share.go). Auto does it on a CPU, where a
	// step's cost grows with its rows; on a GPU a step of many rows costs
	// about what one does, and sitting out would only slow the others.
	TenantSteps string

	// OtherProperties is "on" or "off": whether an object schema with
	// properties takes properties it does not list where
	// additionalProperties is left out or true, as JSON Schema says (on),
	// or none, as a request's strict: true asks for its own schemas
	// (structured.Options.ClosedObjects).
	OtherProperties string

	// SchemaPrepareBudget is how long a job's schema may take, compiled
	// and its token masks worked out, before its first token; the masks
	// left are worked out in the background, one grammar at a time, or on
	// first use (0: every mask before the first token, however long).
	SchemaPrepareBudget time.Duration

	// SchemaCacheMiB bounds the memory structured output keeps between
	// jobs, compiled grammars and their token masks together; 0 sizes it
	// from the memory available at start (schemaCacheBytes).
	SchemaCacheMiB int

	// IgnoreEOS makes every answer MaxNewTokens long, as llama.cpp's
	// --ignore-eos does: benchmarks count tokens that way, and a
	// random-weight model would otherwise stop at a random length. Unlike
	// llama.cpp's, which bans end-of-generation tokens, it draws them and
	// goes on, as vLLM's does, so the tokens differ where one is drawn
	// (docs/engine.md, "Greedy parity with llama-server"). Never for
	// serving users.
	IgnoreEOS bool
	// noSharedPrefix prefills every prompt whole: tests compare against it.
	noSharedPrefix bool
	// LibDir is the directory of the engine's libraries (LLAMA_LIB_DIR).
	LibDir string
}

// DefaultSystemPrompt is the system message of every conversation unless
// TEXT_SYSTEM_PROMPT says otherwise.
const DefaultSystemPrompt = "You are a helpful assistant."

// RegisterFlags binds the text settings to flags and TEXT_* environment
// variables. ModelDir and Slots belong to the worker and are not bound
// here. The settings are the same for both text variants: each sizes its
// context from its own model.
func (c *Config) RegisterFlags(fs *envflag.Set, _ genq.Variant) {
	autoKV := "off"
	if defaultKVUnified {
		autoKV = "on"
	}
	fs.String(&c.ModelFile, "text-model-file", "TEXT_MODEL_FILE", "", "the .gguf to load when the model directory holds several (relative to it)")
	fs.Int(&c.ContextSize, "text-context-size", "TEXT_CONTEXT_SIZE", 0, "tokens of context per sequence, prompt and answer together; 0: the model's trained context (n_ctx_train), lowered only to what memory holds for the slots, as the worker's log line \"text context sized\" says (docs/text.md, \"Context and answer length\")")
	fs.Int(&c.MaxNewTokens, "text-max-new-tokens", "TEXT_MAX_NEW_TOKENS", 0, "most tokens generated per request: a request's max_tokens above it is capped (finish_reason length); 0: what the context leaves after the prompt")
	fs.Float64(&c.Temperature, "text-temperature", "TEXT_TEMPERATURE", 0.6, "sampling temperature; 0 is greedy")
	fs.Float64(&c.TopP, "text-top-p", "TEXT_TOP_P", 0.9, "nucleus sampling: keep the most likely tokens up to this probability")
	fs.Int(&c.TopK, "text-top-k", "TEXT_TOP_K", 50, "keep only the k most likely tokens; 0 keeps all (Hugging Face samples with 50)")
	fs.Int64(&c.Seed, "text-seed", "TEXT_SEED", 0, "sampling seed: 0 draws a fresh one per request, any other value makes output reproducible")
	fs.Int(&c.Threads, "text-threads", "TEXT_THREADS", 0, "CPU threads for compute; 0 picks them, and follows the CPUs other processes leave free (docs/text.md, \"Threads\")")
	fs.Int(&c.BatchSize, "text-batch-size", "TEXT_BATCH_SIZE", 512, "most tokens in one forward step; long prompts are prefilled in chunks of this size (llama-server's -ub default)")
	fs.String(&c.SystemPrompt, "text-system-prompt", "TEXT_SYSTEM_PROMPT", DefaultSystemPrompt, "system message of every conversation")
	fs.Bool(&c.GPU, "text-gpu", "TEXT_GPU", true, "offload every layer to a CUDA GPU when llama.cpp finds one")
	fs.Float64(&c.GPUMemoryUtilization, "text-gpu-memory-utilization", "TEXT_GPU_MEMORY_UTILIZATION", 0.9, "share of the GPU's free memory that weights, KV cache and graph may take when SLOTS is unset and the slots are sized from it")
	fs.String(&c.KVUnified, "text-kv-unified", "TEXT_KV_UNIFIED", "auto", "one KV buffer for every slot (on), a stream per slot (off), or auto, "+autoKV+" today (docs/text.md, \"Slots and streams\")")
	fs.String(&c.FlashAttention, "text-flash-attention", "TEXT_FLASH_ATTENTION", "auto", "llama.cpp's flash attention: on, off, or auto, where llama.cpp chooses per device (on for the CPU and CUDA)")
	fs.String(&c.DeviceSampling, "text-device-sampling", "TEXT_DEVICE_SAMPLING", "auto", "narrow rows to their sampler's top-k on the device: on, off, or auto (on when a GPU computes; docs/text.md, \"Sampling on the device\")")
	fs.String(&c.LibDir, "llama-lib-dir", "LLAMA_LIB_DIR", "", "directory of the text engine's libraries (libllama.so and ggml's): lib/llama under make, which make engine builds, /opt/genq/lib/llama in the images")
	fs.String(&c.PrefixCache, "text-prefix-cache", "TEXT_PREFIX_CACHE", "on", "keep finished conversations' KV cells for prompts that start with them: on or off (docs/text.md, \"The prefix cache\")")
	fs.Duration(&c.SchemaPrepareBudget, "text-schema-prepare-budget", "TEXT_SCHEMA_PREPARE_BUDGET", 25*time.Millisecond, "structured output: time a job's schema may take, compiled and its token masks worked out, before its first token; the masks left are worked out in the background or on first use (0: all before the first token; docs/text.md, \"Vocabulary analysis and the mask\")")
	fs.Int(&c.SchemaCacheMiB, "text-schema-cache-mib", "TEXT_SCHEMA_CACHE_MIB", 0, "structured output: MiB that compiled grammars and their token masks may hold between jobs, the least recently used dropped (and worked out again on use) past it; 0: a thirty-second of the memory available at start, between 64 and 128 (docs/text.md, \"Vocabulary analysis and the mask\")")
	fs.String(&c.TenantSteps, "text-tenant-steps", "TEXT_TENANT_STEPS", "auto", "with API keys' tenants: a tenant over its share of the model lately sits out decoding steps while one under it decodes, on, off, or auto (on when the CPU computes; docs/protocol.md §11, \"Within a step\")")
	fs.String(&c.OtherProperties, "text-other-properties", "TEXT_OTHER_PROPERTIES", "on", "structured output: an object schema's unlisted properties, where additionalProperties is left out or true: on takes up to 8 after the listed ones (JSON Schema's rule), off none, as strict: true does (docs/text.md, \"The schema subset\")")
	fs.Bool(&c.IgnoreEOS, "text-ignore-eos", "TEXT_IGNORE_EOS", false, "benchmarks only: generate exactly max-new-tokens, ignoring end-of-turn tokens")
}

// withDefaults fills the zero values a caller that did not register flags
// leaves behind, and rejects settings that cannot work.
func (c Config) withDefaults() (Config, error) {
	if c.Slots < 0 {
		return c, fmt.Errorf("text: slots %d: want 0 (sized by Open) or more", c.Slots)
	}
	if c.ContextSize < 0 {
		return c, fmt.Errorf("text: context size %d: want 0 (the model's trained context, as memory allows) or more", c.ContextSize)
	}
	if c.MaxNewTokens < 0 {
		return c, fmt.Errorf("text: max new tokens %d: want 0 (what the context leaves) or more", c.MaxNewTokens)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 512
	}
	if c.SchemaCacheMiB < 0 {
		return c, fmt.Errorf("text: schema cache %d MiB: want 0 (sized from the memory available) or more", c.SchemaCacheMiB)
	}
	var err error
	if c.KVUnified, err = oneOf("KV unified", c.KVUnified, "auto", "on", "off"); err != nil {
		return c, err
	}
	if c.FlashAttention, err = oneOf("flash attention", c.FlashAttention, "auto", "on", "off"); err != nil {
		return c, err
	}
	if c.DeviceSampling, err = oneOf("device sampling", c.DeviceSampling, "auto", "on", "off"); err != nil {
		return c, err
	}
	if c.OtherProperties, err = oneOf("other properties", c.OtherProperties, "on", "off"); err != nil {
		return c, err
	}
	if c.TenantSteps, err = oneOf("tenant steps", c.TenantSteps, "auto", "on", "off"); err != nil {
		return c, err
	}
	if c.PrefixCache, err = oneOf("prefix cache", c.PrefixCache, "on", "off"); err != nil {
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
	if c.ContextSize > 0 {
		if c, err = c.withContext(c.ContextSize); err != nil {
			return c, err
		}
	}
	c = c.withSlots(c.Slots)
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

// withContext sets the context per sequence, once known, and checks that
// the answer's cap leaves a prompt room in it.
func (c Config) withContext(tokens int) (Config, error) {
	c.ContextSize = tokens
	if c.MaxNewTokens >= c.ContextSize {
		return c, fmt.Errorf("text: max new tokens (%d) leaves no room for a prompt in a context of %d", c.MaxNewTokens, c.ContextSize)
	}
	return c, nil
}

// withSlots sets the slots, once known, and what depends on them.
func (c Config) withSlots(slots int) Config {
	c.Slots = slots
	// A chunk of one prompt never exceeds its context, and a step always
	// carries one token per decoding sequence.
	if c.ContextSize > 0 {
		c.BatchSize = min(c.BatchSize, c.ContextSize)
	}
	c.BatchSize = max(c.BatchSize, c.Slots)
	return c
}

func (c Config) samplerParams() sample.Params {
	return sample.Params{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP}
}
