// Package embedgen is genq's embedding backend: it serves a GGUF embedding
// model (a BERT-family encoder) on llama.cpp, in process, and packs the
// inputs of every job it holds into shared engine steps, one sequence per
// input, reading each input's pooled vector apart.
package embedgen

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/envflag"
)

// Config is what Open needs to load and serve an embedding model.
type Config struct {
	ModelDir  string // directory holding one .gguf (or ModelFile names it)
	ModelFile string // a .gguf file; relative names are inside ModelDir
	LibDir    string // the engine's libraries (LLAMA_LIB_DIR)

	// Slots is how many jobs run at once: their inputs share the steps.
	Slots int
	// BatchTokens is the most tokens of one engine step, over all its
	// inputs. An encoder sees an input whole, so it bounds one input too.
	BatchTokens int
	// BatchInputs is the most inputs (sequences) of one engine step.
	BatchInputs int
	// StepTokens is the most tokens a step of several inputs takes; an
	// input longer runs alone. 0: DefaultCPUStepTokens on the CPU,
	// BatchTokens on a GPU. On the CPU an encoder's attention spans every
	// token of the step, so a long step costs more per input than several
	// short ones (docs/benchmarks.md, "Embeddings against llama-server").
	StepTokens int
	// Threads compute on the CPU; 0 is one per CPU.
	Threads int
	// SpinCount is how many times a compute thread polls at a barrier
	// before it sleeps (libgomp's GOMP_SPINCOUNT), set by a worker that
	// serves embedding models alone; -1 leaves libgomp's own. libgomp's
	// default, 300,000, keeps a thread spinning for milliseconds whenever
	// its partner is preempted (by the api, NATS or the worker's Go code
	// on the same cores), holding a core the preempted thread could run
	// on; at DefaultSpinCount a thread still outwaits a barrier between
	// threads that both run, then sleeps.
	SpinCount int
	// GPU = false keeps the model on the CPU even when CUDA is found.
	GPU bool
	// Dimensions lists the widths a request's dimensions may ask for
	// besides the model's own, comma-separated: a model trained to be cut
	// (Matryoshka, as OpenAI's text-embedding-3) allows them, others none.
	Dimensions string

	dims []int // Dimensions, parsed
}

// Defaults of the settings.
const (
	DefaultSlots       = 16
	DefaultBatchTokens = 4096
	DefaultBatchInputs = 64
	// DefaultCPUStepTokens is StepTokens on the CPU.
	DefaultCPUStepTokens = 512
	DefaultSpinCount     = 3000
)

// RegisterFlags declares the embedding engine's settings on fs.
func (c *Config) RegisterFlags(fs *envflag.Set) {
	fs.String(&c.ModelFile, "embedding-model-file", "EMBEDDING_MODEL_FILE", "", "the .gguf to load when the model directory holds several (relative to it)")
	fs.Int(&c.BatchTokens, "embedding-batch-tokens", "EMBEDDING_BATCH_TOKENS", DefaultBatchTokens, "most tokens of one engine step over all its inputs; also bounds one input, with the model's trained context")
	fs.Int(&c.BatchInputs, "embedding-batch-inputs", "EMBEDDING_BATCH_INPUTS", DefaultBatchInputs, "most inputs of one engine step, from any of the jobs the worker holds")
	fs.Int(&c.StepTokens, "embedding-step-tokens", "EMBEDDING_STEP_TOKENS", 0, "most tokens of one engine step of several inputs, within EMBEDDING_BATCH_TOKENS (a longer input runs alone); 0: 512 on the CPU, where attention over a long step costs more per input than several short steps, and EMBEDDING_BATCH_TOKENS on a GPU")
	fs.Int(&c.Threads, "embedding-threads", "EMBEDDING_THREADS", 0, "CPU threads for compute; 0: one per CPU")
	fs.Int(&c.SpinCount, "embedding-spin-count", "EMBEDDING_SPIN_COUNT", DefaultSpinCount, "how many times a compute thread polls at a barrier before it sleeps (libgomp's GOMP_SPINCOUNT), set by a worker that serves embedding models alone, the setting being the process's; -1: libgomp's own (GOMP_SPINCOUNT and OMP_WAIT_POLICY as the environment sets them, else 300,000 polls, which hold a core for milliseconds whenever the other compute thread is preempted)")
	fs.Bool(&c.GPU, "embedding-gpu", "EMBEDDING_GPU", true, "offload the embedding model to a CUDA GPU when llama.cpp finds one")
	fs.String(&c.Dimensions, "embedding-dimensions", "EMBEDDING_DIMENSIONS", "", "widths a request's dimensions may ask for besides the model's own, comma-separated, for a model trained to be cut (Matryoshka); empty: none, and dimensions other than the model's width are refused")
}

// ParseDimensions reads EMBEDDING_DIMENSIONS: positive widths, separated
// by commas; empty is none.
func ParseDimensions(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("EMBEDDING_DIMENSIONS: %q is not a positive width", f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CheckSpinCount refuses an EMBEDDING_SPIN_COUNT libgomp cannot take. A
// worker checks it at start too, as it sets the spin before any embedding
// model loads.
func CheckSpinCount(n int) error {
	if n < -1 {
		return fmt.Errorf("EMBEDDING_SPIN_COUNT must be -1 (libgomp's own) or at least 0, not %d", n)
	}
	return nil
}

func (c Config) withDefaults() (Config, error) {
	c.Slots = cmp.Or(c.Slots, DefaultSlots)
	c.BatchTokens, c.BatchInputs = cmp.Or(c.BatchTokens, DefaultBatchTokens), cmp.Or(c.BatchInputs, DefaultBatchInputs)
	// llama.cpp's own default is 4 whatever the machine: too many on a
	// 2-core box, too few on a large one.
	c.Threads = cmp.Or(c.Threads, runtime.NumCPU())
	var err error
	if c.dims, err = ParseDimensions(c.Dimensions); err != nil {
		return c, err
	}
	if err := CheckSpinCount(c.SpinCount); err != nil {
		return c, err
	}
	switch {
	case c.Slots < 1:
		return c, fmt.Errorf("embedding slots must be at least 1, not %d", c.Slots)
	case c.BatchTokens < 8:
		return c, fmt.Errorf("EMBEDDING_BATCH_TOKENS must be at least 8, not %d", c.BatchTokens)
	case c.BatchInputs < 1:
		return c, fmt.Errorf("EMBEDDING_BATCH_INPUTS must be at least 1, not %d", c.BatchInputs)
	case c.StepTokens < 0:
		return c, fmt.Errorf("EMBEDDING_STEP_TOKENS must be 0 (the device's default) or positive, not %d", c.StepTokens)
	}
	return c, nil
}

// stepTokens is StepTokens resolved for the device: its default there,
// and never more than BatchTokens.
func (c Config) stepTokens(gpu bool) int {
	n := c.StepTokens
	if n == 0 && !gpu {
		n = DefaultCPUStepTokens
	}
	if n == 0 || n > c.BatchTokens {
		return c.BatchTokens
	}
	return n
}
