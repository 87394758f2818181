package textgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestIdleSlotsBetweenBusyOnesArePadded: a step whose sequences sit in
// slots with idle ones between them carries a pad in each of those, and
// the pads change nothing: the answers are the ones alone, and a slot's
// cached cells are what they were.
func TestIdleSlotsBetweenBusyOnesArePadded(t *testing.T) {
	// The four jobs of the first round must share its steps. At the tiny
	// model's trained context, 131,072 cells a slot, llama.cpp copies a
	// slot's whole stream when a prompt starts from another slot's cells,
	// which splits them often enough to fail the test; pads do not depend
	// on the context.
	b := openTiny(t, genq.VariantA, Config{MaxNewTokens: 16, Slots: 4, ContextSize: 8192})
	zero := 0.0
	// Each prompt long enough that its own cells beat any other slot's
	// by more than reuseSlack: the second round goes back to them.
	job := func(text string) genq.Job {
		return genq.Job{Envelope: genq.Envelope{Text: strings.Repeat(text+" and ", 12)}, TextRequest: genq.TextRequest{Temperature: &zero, Logprobs: true, TopLogprobs: 2}}
	}
	// Fill the four slots, so that each holds a conversation's cells.
	first, errs := jobsTogether(t, b, []genq.Job{job("one"), job("two"), job("three"), job("four")})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	held := map[int]int{}
	slotOf := map[int]int{} // job → the slot its cells are in
	for slot := range b.slots {
		held[slot] = b.ctx.LastPosition(slot)
		for j, text := range []string{"one", "two", "three", "four"} {
			prompt, err := b.jobPrompt(job(text))
			if err != nil {
				t.Fatal(err)
			}
			if cells := b.sched.cache.held[slot]; len(cells) >= len(prompt) && slices.Equal(cells[:len(prompt)], prompt) {
				slotOf[j] = slot
			}
		}
	}
	// The jobs of slots 0 and 3 again: each starts from its own cells, and
	// the steps pad slots 1 and 2.
	var outer []int
	for j, slot := range slotOf {
		if slot == 0 || slot == 3 {
			outer = append(outer, j)
		}
	}
	if len(outer) != 2 {
		t.Fatalf("slots of the jobs: %v", slotOf)
	}
	texts := []string{"one", "two", "three", "four"}
	var pads int
	b.sched.fault = func(st *step) error {
		pads += len(st.pads)
		// llama.cpp takes a sequence into a pass only when its id is one
		// more than the last one taken, walking the batch in order: a
		// step's slots must run on without a gap, in the batch's order.
		for i := 1; i < b.batch.Len(); i++ {
			if prev, seq := b.batch.Seq(i-1), b.batch.Seq(i); seq != prev && seq != prev+1 {
				t.Errorf("batch runs from slot %d to %d (pads %v): the step runs in parts", prev, seq, st.pads)
			}
		}
		return nil
	}
	again, errs := jobsTogether(t, b, []genq.Job{job(texts[outer[0]]), job(texts[outer[1]])})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b.sched.fault = nil
	if pads == 0 {
		t.Fatal("no step carried a pad: the check below proves nothing")
	}
	for i, j := range outer {
		if d := greedyDiff(again[i], first[j]); d != "" {
			t.Errorf("%q again: %s", texts[j], d)
		}
	}
	for slot, last := range held {
		if got := b.ctx.LastPosition(slot); got < last && b.sched.cache.held[slot] != nil {
			t.Errorf("slot %d held cells up to %d, now %d", slot, last, got)
		}
	}
	t.Logf("%d pads", pads)
}
