package natsqueue

import (
	"strings"
	"testing"
	"time"
)

// roomStep is one event at a worker's headroom, at a tick of its clock.
type roomStep struct {
	// op: "took", "settled", "saw" or "claim" tenant, then "tick" n: the
	// clock moves n ticks (a tick is window/10).
	op, tenant string
	ticks      int
	// waiting: the tenants with jobs waiting, for claim.
	waiting string
	// want: what claim answers.
	want bool
}

func TestHeadroom(t *testing.T) {
	tests := []struct {
		name  string
		slots int
		steps []roomStep
	}{
		{"a tenant alone takes every slot", 2, []roomStep{
			{op: "claim", tenant: "heavy", want: true},
			{op: "claim", tenant: "heavy", want: true},
		}},
		{"the last slot is kept for a tenant seen lately", 2, []roomStep{
			{op: "took", tenant: "light"}, {op: "settled", tenant: "light"},
			{op: "claim", tenant: "heavy", want: true},
			{op: "claim", tenant: "heavy", want: false},
			// The kept slot is light's as soon as its job comes.
			{op: "claim", tenant: "light", waiting: "light heavy", want: true},
		}},
		{"kept only for the window", 2, []roomStep{
			{op: "took", tenant: "light"}, {op: "settled", tenant: "light"},
			{op: "took", tenant: "heavy"},
			{op: "tick", ticks: 9},
			{op: "claim", tenant: "heavy", want: false},
			{op: "tick", ticks: 1},
			{op: "claim", tenant: "heavy", want: true},
		}},
		{"a ring starts the window again", 2, []roomStep{
			{op: "took", tenant: "heavy"},
			{op: "saw", tenant: "light"},
			{op: "tick", ticks: 9},
			{op: "claim", tenant: "heavy", want: false},
		}},
		{"not kept for a tenant with a job waiting: fair share orders it", 2, []roomStep{
			{op: "saw", tenant: "light"},
			{op: "took", tenant: "heavy"},
			{op: "claim", tenant: "heavy", waiting: "light heavy", want: true},
		}},
		{"not kept for a tenant that holds a slot", 2, []roomStep{
			{op: "took", tenant: "light"},
			{op: "claim", tenant: "heavy", want: true},
		}},
		{"a tenant holding no slot may take the last", 2, []roomStep{
			{op: "saw", tenant: "other"},
			{op: "took", tenant: "light"},
			{op: "claim", tenant: "heavy", want: true},
		}},
		{"with slots to spare, any tenant takes one", 4, []roomStep{
			{op: "saw", tenant: "light"},
			{op: "took", tenant: "heavy"}, {op: "took", tenant: "heavy"},
			{op: "claim", tenant: "heavy", want: true},
			{op: "claim", tenant: "heavy", want: false},
		}},
		{"a settled slot is free again", 2, []roomStep{
			{op: "saw", tenant: "light"},
			{op: "took", tenant: "heavy"},
			{op: "claim", tenant: "heavy", want: false},
			{op: "settled", tenant: "heavy"},
			{op: "claim", tenant: "heavy", want: true},
		}},
		{"a claim counts at once", 2, []roomStep{
			{op: "saw", tenant: "light"},
			{op: "claim", tenant: "heavy", want: true},
			{op: "claim", tenant: "heavy", want: false},
			{op: "unclaim", tenant: "heavy"},
			{op: "claim", tenant: "heavy", want: true},
		}},
		{"a claim that found nothing does not count as seen", 2, []roomStep{
			{op: "claim", tenant: "", want: true}, {op: "unclaim", tenant: ""},
			{op: "took", tenant: "heavy"},
			{op: "claim", tenant: "heavy", want: true},
		}},
		{"off without slots", 0, []roomStep{
			{op: "saw", tenant: "light"},
			{op: "took", tenant: "heavy"}, {op: "took", tenant: "heavy"},
			{op: "claim", tenant: "heavy", want: true},
		}},
	}
	const window = 10 * time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			h := newHeadroom()
			h.now = func() time.Time { return now }
			h.keep(tt.slots, window)
			for i, s := range tt.steps {
				switch s.op {
				case "took":
					h.took(s.tenant)
				case "settled":
					h.settled(s.tenant)
				case "saw":
					h.saw(s.tenant)
				case "unclaim":
					h.unclaim(s.tenant)
				case "tick":
					now = now.Add(time.Duration(s.ticks) * window / 10)
				case "claim":
					waiting := map[string]bool{}
					for _, w := range strings.Fields(s.waiting) {
						waiting[w] = true
					}
					if got := h.claim(s.tenant, waiting); got != s.want {
						t.Fatalf("step %d: claim(%q) with %q waiting = %t, want %t", i, s.tenant, s.waiting, got, s.want)
					}
				default:
					t.Fatalf("step %d: no op %q", i, s.op)
				}
			}
		})
	}
}
