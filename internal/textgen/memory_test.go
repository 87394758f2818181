package textgen

import (
	"strings"
	"testing"
)

// An 8B Llama 3 in F16 at a context of 2048 on a card with 79 GiB free:
// the figures of the H100 genq was measured on.
func llama8BPlan() memoryPlan {
	return memoryPlan{
		device:       "NVIDIA H100 80GB HBM3",
		free:         79 << 30,
		reserve:      gpuReserve,
		weights:      14_970_000_000,
		kvPerToken:   32 * 2 * 1024 * 2,
		graphBase:    256 * (4*14336 + 8*4096) * 4,
		graphPerSlot: 128256 * 12,
		contextSize:  2048,
	}
}

func TestSlotsThatFit(t *testing.T) {
	p := llama8BPlan()
	got := p.slotsThatFit(0.9)
	// 79 GiB × 0.9 less the reserve, the weights and the graph leave about
	// 60 GB; one slot's cache is 256 MiB.
	if got < 215 || got > 230 {
		t.Fatalf("slotsThatFit = %d, want about 223", got)
	}
	if need := p.need(got); need > p.budget(0.9) {
		t.Fatalf("%d slots need %d bytes, over the budget %d", got, need, p.budget(0.9))
	}
	if need := p.need(got + 1); need <= p.budget(0.9) {
		t.Fatalf("%d slots would fit too", got+1)
	}
	small := p
	small.free = 16 << 30
	if n := small.slotsThatFit(0.9); n != 0 {
		t.Fatalf("weights alone overflow 16 GiB, yet %d slots fit", n)
	}
	roomy := p
	roomy.free = 1 << 40
	if n := roomy.slotsThatFit(0.9); n != maxAutoSlots {
		t.Fatalf("a huge card gives %d slots, want the cap %d", n, maxAutoSlots)
	}
}

func TestDoesNotFitIsOneSentence(t *testing.T) {
	p := llama8BPlan()
	msg := p.doesNotFit(256, 0.9).Error()
	for _, want := range []string{"256 slots of 2048 tokens", "NVIDIA H100", "SLOTS=", "TEXT_CONTEXT_SIZE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "{") {
		t.Errorf("message is not one plain line: %s", msg)
	}
}

// TestPlanSize: the context is the trained one, lowered only to what
// memory holds with the slots asked for; an explicit context wins; slots
// left to the plan are sized from free memory on a GPU at that context.
func TestPlanSize(t *testing.T) {
	gpu := func(free uint64) *memoryPlan {
		p := llama8BPlan()
		p.free = free
		return &p
	}
	// The tiny test model on a 24 GB host: 256 bytes a token.
	host := func(free uint64) *memoryPlan {
		return &memoryPlan{device: "this machine's memory", free: free, reserve: cpuReserve, weights: 4 << 20, kvPerToken: 256,
			graphBase: 512 * (4*128 + 8*64) * 4, graphPerSlot: 300 * 8}
	}
	capped := func(free, perToken uint64, share float64) *memoryPlan {
		p := host(free)
		p.kvPerToken, p.kvCap = perToken, uint64(float64(free)*share)
		return p
	}
	const trained = 131072
	tests := []struct {
		name        string
		cfg         Config
		plan        *memoryPlan
		gpu         bool
		wantSlots   int
		wantContext int
		why         string // part of the reason given
		err         string // part of the refusal, "" when it starts
	}{
		{"no plan: the trained context", Config{}, nil, false, defaultCPUSlots, trained, "trained", ""},
		{"no plan, no trained context: the fallback", Config{Slots: 2}, nil, false, 2, fallbackContext, "names no trained context", ""},
		{"explicit context wins", Config{ContextSize: 2048, Slots: 2}, host(20 << 30), false, 2, 2048, "TEXT_CONTEXT_SIZE", ""},
		{"tiny model, many slots, roomy host: trained", Config{Slots: 64}, host(20 << 30), false, 64, trained, "trained", ""},
		{"tiny model, many slots, small host: lowered", Config{Slots: 64}, host(2 << 30), false, 64, 83456, "lowered to what this machine's memory holds for 64 slots", ""},
		{"host too small for one step", Config{Slots: 64}, host(500 << 20), false, 0, 0, "", "does not fit"},
		// 40% of 24 GiB for the KV cache of 17 sequences at 40 KiB a token,
		// as the mid model's 16 slots on this machine.
		{"KV cache capped on the CPU", Config{Slots: 16}, capped(24<<30, 40<<10, 0.4), false, 16, 14592, "the KV cache at most 9.6 GiB", ""},
		{"KV cap above the budget: the budget", Config{Slots: 64}, capped(2<<30, 256, 0.9), false, 64, 83456, "lowered", ""},
		{"8B on an H100, slots sized: two of the trained context fit", Config{}, gpu(79 << 30), true, 2, trained, "trained", ""},
		{"8B on a 24 GiB card, slots sized: the context lowered for one", Config{}, gpu(24 << 30), true, 1, 27904, "for 1 slots", ""},
		{"8B on an H100, 8 slots asked: lowered for them", Config{Slots: 8}, gpu(79 << 30), true, 8, 51200, "for 8 slots", ""},
		{"8B on an H100, explicit context and slots that do not fit", Config{Slots: 256, ContextSize: 8192}, gpu(79 << 30), true, 0, 0, "", "does not fit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trained
			if strings.Contains(tt.name, "no trained") {
				tr = 0
			}
			got, err := planSize(tt.cfg, tt.plan, tt.gpu, 0.9, tr)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got.slots != tt.wantSlots || got.context != tt.wantContext || !strings.Contains(got.why, tt.why) {
				t.Fatalf("got %+v, %v; want %d slots of %d tokens, why %q", got, err, tt.wantSlots, tt.wantContext, tt.why)
			}
			if got.context%contextStep != 0 && got.asked == 0 && tt.plan != nil {
				t.Fatalf("context %d is not a multiple of %d", got.context, contextStep)
			}
			if tt.plan != nil {
				p := *tt.plan
				p.contextSize = got.context
				if need := p.need(got.slots); need > p.budget(0.9) {
					t.Fatalf("%d slots of %d tokens need %s, over the budget %s", got.slots, got.context, gib(need), gib(p.budget(0.9)))
				}
			}
		})
	}
}
