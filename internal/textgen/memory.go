package textgen

import (
	"cmp"
	"fmt"

	"github.com/genq/genq/internal/llamacpp"
)

// defaultCPUSlots is how many sequences share a batch on the CPU when
// neither Slots nor DefaultSlots says: past a few, a CPU's step time grows
// with the batch and nobody's answer comes sooner.
const defaultCPUSlots = 4

// maxAutoSlots caps the slots sized from free memory, as vLLM caps its
// sequences at 256 by default: past that, a step carries so many tokens that
// each answer slows more than the batch gains.
const maxAutoSlots = 256

// gpuReserve is memory kept free on the GPU for what the plan cannot see:
// the CUDA context's own buffers, cuBLAS workspaces.
const gpuReserve = 768 << 20

// cpuReserve is memory kept free on the host for what the plan cannot
// see there: the worker's own heap, its NATS buffers, the tokenizer's
// tables; and cpuMemoryShare the share of the memory available at start
// that weights, KV cache and graph may take, leaving the rest to the
// machine's other work (page cache, other processes).
const (
	cpuReserve     = 512 << 20
	cpuMemoryShare = 0.8
)

// cpuKVShare caps the KV cache a context is sized for on the CPU, as a
// share of the memory available at start. The cache is written whole
// when the context is made, so it is resident from the first step; past
// this share, on a machine the worker shares with its api, NATS and
// clients, its pages crowd out the model file's, which mmap keeps in the
// page cache, and every step reads weights from disk again
// (docs/benchmarks.md, "Long contexts").
const cpuKVShare = 0.4

// contextStep is the granularity of a context sized from memory: the
// multiple of cells llama.cpp pads its cache to.
const contextStep = 256

// memoryPlan is what the KV cache and the compute buffers may take on one
// device, measured once the weights are loaded, the way vLLM's
// gpu_memory_utilization sizes its cache: what was free before the load,
// less the weights, then as many sequences' KV cache as the rest holds, or
// as long a context for each. On a GPU the device is the card; on the CPU
// it is the host's memory.
type memoryPlan struct {
	device  string
	free    uint64 // on the device before the weights loaded
	reserve uint64 // kept free for what the plan cannot see

	weights      uint64 // what the load took on the device
	kvPerToken   uint64 // one token's keys and values in F16, every layer
	graphBase    uint64 // compute memory for a full prefill step, without the per-slot part
	graphPerSlot uint64 // the sampled rows' logits

	contextSize int // tokens per sequence
	// kvCap bounds the KV cache of every sequence together when a
	// context is sized from memory; 0: no bound but the budget.
	kvCap uint64
}

// newMemoryPlan sizes m's needs on a device that had free bytes before m's
// weights took weights of them.
func newMemoryPlan(m *llamacpp.Model, device string, free, reserve, weights uint64, contextSize, batchSize int) memoryPlan {
	p := memoryPlan{device: device, free: free, reserve: reserve, weights: weights, contextSize: contextSize}
	p.kvPerToken = m.KVBytesPerToken()
	// Float32 activations of one step of batchSize tokens: the widest
	// layer's inputs and outputs, a few at once; each sampled row adds its
	// logits, on the device and their copy.
	hidden, ffn := m.Widths()
	p.graphBase = uint64(batchSize) * (4*ffn + 8*hidden) * 4
	p.graphPerSlot = uint64(m.Vocab.Size()) * 4 * 2
	return p
}

// kvPerSlot is one sequence's KV cache at the plan's context.
func (p memoryPlan) kvPerSlot() uint64 { return p.kvPerToken * uint64(p.contextSize) }

// budget is the memory the plan may use: share of what was free, less
// the reserve.
func (p memoryPlan) budget(share float64) uint64 {
	b := uint64(float64(p.free) * share)
	if b < p.reserve {
		return 0
	}
	return b - p.reserve
}

// need is the plan's estimate for slots sequences (and the one that keeps
// the shared prompt prefix).
func (p memoryPlan) need(slots int) uint64 {
	n := uint64(slots + 1)
	return p.weights + p.graphBase + n*(p.kvPerSlot()+p.graphPerSlot)
}

// slotsThatFit is the most sequences the budget holds, capped at
// maxAutoSlots; 0 when not even one fits.
func (p memoryPlan) slotsThatFit(share float64) int {
	budget := p.budget(share)
	fixed := p.weights + p.graphBase
	per := p.kvPerSlot() + p.graphPerSlot
	if budget <= fixed+per || per == 0 {
		return 0
	}
	return min(maxAutoSlots, int((budget-fixed)/per)-1)
}

// contextThatFits is the longest context, in whole contextSteps, at which
// the budget holds slots sequences (and the prefix's); 0 when not even
// one step does. With no KV cache to size (a model that reports none) it
// is unbounded.
func (p memoryPlan) contextThatFits(slots int, share float64) int {
	n := uint64(slots + 1)
	fixed := p.weights + p.graphBase + n*p.graphPerSlot
	budget := p.budget(share)
	if p.kvPerToken == 0 {
		return int(^uint(0) >> 1)
	}
	if budget <= fixed {
		return 0
	}
	kv := budget - fixed
	if p.kvCap > 0 {
		kv = min(kv, p.kvCap)
	}
	tokens := kv / (n * p.kvPerToken)
	return int(tokens/contextStep) * contextStep
}

// fallbackContext is the context of a model whose file names no trained
// context, when TEXT_CONTEXT_SIZE does not say.
const fallbackContext = 4096

// sizing is how Open chose a worker's slots and its context per slot:
// the context asked for (TEXT_CONTEXT_SIZE; 0 leaves it to Open), the
// model's trained context, the one chosen, and why, for the worker's log.
type sizing struct {
	slots   int
	asked   int
	trained int
	context int
	why     string
}

// planSize chooses cfg's slots and context. The context is TEXT_CONTEXT_SIZE
// when set, else the model's trained context (what agents' long prompts
// need), lowered only as far as plan's memory (nil: unknown) holds for the
// slots asked for. Slots left to Open are sized from free memory at that
// context on a GPU (the context first lowered to what one slot needs, if
// even one does not fit), and DefaultSlots on a CPU. share is the part of
// the free memory the plan may take.
func planSize(cfg Config, plan *memoryPlan, onGPU bool, share float64, trained int) (sizing, error) {
	s := sizing{slots: cfg.Slots, asked: cfg.ContextSize, trained: trained, context: cfg.ContextSize, why: "TEXT_CONTEXT_SIZE sets it"}
	if s.context == 0 {
		s.context, s.why = trained, "the model's trained context"
		if trained <= 0 {
			s.context, s.why = fallbackContext, "the model names no trained context"
		}
	}
	auto := cfg.ContextSize == 0
	lower := func(slots int) error {
		fit := plan.contextThatFits(slots, share)
		if fit >= s.context {
			return nil
		}
		if fit == 0 {
			return plan.doesNotFit(slots, share)
		}
		s.why = fmt.Sprintf("%s, lowered to what %s holds for %d slots: %s of %s free is usable beside %s of weights, at %s per token of KV cache",
			s.why, plan.device, slots, gib(plan.budget(share)), gib(plan.free), gib(plan.weights), kib(plan.kvPerToken))
		if plan.kvCap > 0 && plan.kvCap < plan.budget(share) {
			s.why += fmt.Sprintf(", the KV cache at most %s (%.0f%% of it)", gib(plan.kvCap), 100*float64(plan.kvCap)/float64(plan.free))
		}
		s.context, plan.contextSize = fit, fit
		return nil
	}
	if plan != nil {
		plan.contextSize = s.context
	}
	switch {
	case onGPU && plan != nil && s.slots == 0:
		if auto && plan.slotsThatFit(share) == 0 {
			if err := lower(1); err != nil {
				return s, err
			}
		}
		if s.slots = plan.slotsThatFit(share); s.slots == 0 {
			return s, plan.doesNotFit(1, share)
		}
	case s.slots == 0:
		s.slots = cmp.Or(cfg.DefaultSlots, defaultCPUSlots)
	}
	if plan != nil && auto {
		if err := lower(s.slots); err != nil {
			return s, err
		}
	}
	if onGPU && plan != nil && plan.need(s.slots) > plan.budget(1) {
		// Cache and graph overflow the card: fail now, in a sentence,
		// rather than in the engine's allocator.
		return s, plan.doesNotFit(s.slots, share)
	}
	return s, nil
}

func kib(b uint64) string { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }

// doesNotFit is the one-line reason a start fails for want of memory: what
// was asked, what fits, and which setting to change.
func (p memoryPlan) doesNotFit(slots int, share float64) error {
	fit := p.slotsThatFit(share)
	var advice string
	switch {
	case fit == 0:
		advice = "not even one slot fits at this context: lower TEXT_CONTEXT_SIZE, or use a smaller or more quantized model"
	default:
		advice = fmt.Sprintf("at most %d slots fit at this context: set SLOTS=%d or fewer (or leave SLOTS unset to size them from free memory), or lower TEXT_CONTEXT_SIZE", fit, fit)
	}
	return fmt.Errorf("the model does not fit on %s: %d slots of %d tokens need %s of KV cache beside %s of weights and about %s of compute graph, and %s of %s free is usable; %s",
		p.device, slots, p.contextSize, gib(uint64(slots+1)*p.kvPerSlot()), gib(p.weights),
		gib(p.graphBase+uint64(slots+1)*p.graphPerSlot), gib(p.budget(share)), gib(p.free), advice)
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
