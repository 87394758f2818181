package textgen

import (
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

// memoryPlan is what the KV cache and the compute buffers may take on one
// GPU, measured once the weights are on it, the way vLLM's
// gpu_memory_utilization sizes its cache: what was free before the load,
// less the weights, then as many sequences' KV cache as the rest holds.
type memoryPlan struct {
	device string
	free   uint64 // on the device before the weights loaded

	weights      uint64 // what the load took on the device
	kvPerSlot    uint64 // one sequence of the full context, keys and values in F16
	graphBase    uint64 // compute memory for a full prefill step, without the per-slot part
	graphPerSlot uint64 // the sampled rows' logits

	contextSize int
}

// newMemoryPlan sizes m's needs on a device that had free bytes before m's
// weights took weights of them.
func newMemoryPlan(m *llamacpp.Model, device string, free, weights uint64, contextSize, batchSize int) memoryPlan {
	p := memoryPlan{device: device, free: free, weights: weights, contextSize: contextSize}
	p.kvPerSlot = m.KVBytesPerToken() * uint64(contextSize)
	// Float32 activations of one step of batchSize tokens: the widest
	// layer's inputs and outputs, a few at once; each sampled row adds its
	// logits, on the device and their copy.
	hidden, ffn := m.Widths()
	p.graphBase = uint64(batchSize) * (4*ffn + 8*hidden) * 4
	p.graphPerSlot = uint64(m.Vocab.Size()) * 4 * 2
	return p
}

// budget is the memory the plan may use: utilization of what was free,
// less the reserve.
func (p memoryPlan) budget(utilization float64) uint64 {
	b := uint64(float64(p.free) * utilization)
	if b < gpuReserve {
		return 0
	}
	return b - gpuReserve
}

// need is the plan's estimate for slots sequences (and the one that keeps
// the shared prompt prefix).
func (p memoryPlan) need(slots int) uint64 {
	n := uint64(slots + 1)
	return p.weights + p.graphBase + n*(p.kvPerSlot+p.graphPerSlot)
}

// slotsThatFit is the most sequences the budget holds, capped at
// maxAutoSlots; 0 when not even one fits.
func (p memoryPlan) slotsThatFit(utilization float64) int {
	budget := p.budget(utilization)
	fixed := p.weights + p.graphBase
	per := p.kvPerSlot + p.graphPerSlot
	if budget <= fixed+per || per == 0 {
		return 0
	}
	return min(maxAutoSlots, int((budget-fixed)/per)-1)
}

// doesNotFit is the one-line reason a start fails for want of memory: what
// was asked, what fits, and which setting to change.
func (p memoryPlan) doesNotFit(slots int, utilization float64) error {
	fit := p.slotsThatFit(utilization)
	var advice string
	switch {
	case fit == 0:
		advice = "not even one slot fits at this context: lower TEXT_CONTEXT_SIZE, or use a smaller or more quantized model"
	default:
		advice = fmt.Sprintf("at most %d slots fit at this context: set SLOTS=%d or fewer (or leave SLOTS unset to size them from free memory), or lower TEXT_CONTEXT_SIZE", fit, fit)
	}
	return fmt.Errorf("the model does not fit on %s: %d slots of %d tokens need %s of KV cache beside %s of weights and about %s of compute graph, and %s of %s free is usable; %s",
		p.device, slots, p.contextSize, gib(uint64(slots+1)*p.kvPerSlot), gib(p.weights),
		gib(p.graphBase+uint64(slots+1)*p.graphPerSlot), gib(p.budget(utilization)), gib(p.free), advice)
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
