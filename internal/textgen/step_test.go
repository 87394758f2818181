package textgen

import (
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestLongPromptsShareAStepWithinABudget: prompts that arrive together
// share a step while their tokens add up to sharedPrompts at most; a
// longer one waits for the next step, and a short one rides beside any.
func TestLongPromptsShareAStepWithinABudget(t *testing.T) {
	prompt := func(n int, salt int32) []int32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = 10 + (salt*7+int32(i)*3)%90
		}
		return ids
	}
	for _, tt := range []struct {
		name    string
		lengths []int
		first   int // prompts in the first step
	}{
		{"three of 100: two share", []int{100, 100, 100}, 2},
		{"two of 200: one at a time", []int{200, 200}, 1},
		{"a short one beside a long one", []int{200, 40}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := openTiny(t, genq.VariantA, Config{MaxNewTokens: 2, Slots: 4})
			first := -1
			b.sched.fault = func(st *step) error {
				if first >= 0 {
					return nil
				}
				perSlot := map[int]int{}
				for i := range b.batch.Len() {
					perSlot[b.batch.Seq(i)]++
				}
				first = 0
				for _, n := range perSlot {
					if n > 1 {
						first++
					}
				}
				return nil
			}
			var jobs []genq.Job
			for i, n := range tt.lengths {
				jobs = append(jobs, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt(n, int32(i))}})
			}
			_, errs := jobsTogether(t, b, jobs)
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if first != tt.first {
				t.Fatalf("the first step took %d prompts, want %d", first, tt.first)
			}
		})
	}
}
