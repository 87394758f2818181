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
		weights:      14_970_000_000,
		kvPerSlot:    32 * 2 * 1024 * 2048 * 2,
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
