package natsqueue

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// roomStep is one event at a worker's headroom, at a tick of its clock.
type roomStep struct {
	// op: "took", "settled", "saw" or "claim" tenant, then "tick" n: the
	// clock moves n ticks (a tick is window/10).
	op, tenant string
	// class is the class of the job or slot (Interactive unless set).
	class Class
	ticks int
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runRoom(t, tt.slots, tt.slots, tt.steps) })
	}
}

// A worker's batch jobs may take only its batch slots: the last of those
// is kept for a returning batch tenant though an interactive slot is
// free, and interactive jobs count every slot held.
func TestHeadroomByClass(t *testing.T) {
	tests := []struct {
		name              string
		slots, batchSlots int
		steps             []roomStep
	}{
		{"the last batch slot is kept, an interactive one free beside it", 4, 3, []roomStep{
			{op: "took", tenant: "light", class: Batch}, {op: "settled", tenant: "light", class: Batch},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
			{op: "claim", tenant: "heavy", class: Batch, want: false},
			{op: "claim", tenant: "light", class: Batch, waiting: "light heavy", want: true},
		}},
		{"a batch tenant alone takes every batch slot", 4, 3, []roomStep{
			{op: "claim", tenant: "heavy", class: Batch, want: true},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
		}},
		{"one batch slot is never kept", 2, 1, []roomStep{
			{op: "saw", tenant: "light", class: Batch},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
		}},
		{"interactive jobs count the batch jobs' slots", 4, 3, []roomStep{
			{op: "saw", tenant: "light"},
			{op: "took", tenant: "heavy", class: Batch}, {op: "took", tenant: "heavy", class: Batch},
			{op: "claim", tenant: "heavy", want: true},
			{op: "claim", tenant: "heavy", want: false},
		}},
		{"a tenant seen in one class keeps no slot of the other", 4, 3, []roomStep{
			{op: "saw", tenant: "light"},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
			{op: "claim", tenant: "heavy", class: Batch, want: true},
		}},
		{"a tenant holding an interactive slot is kept for in batch", 4, 3, []roomStep{
			{op: "took", tenant: "light"},
			{op: "saw", tenant: "light", class: Batch},
			{op: "took", tenant: "heavy", class: Batch}, {op: "took", tenant: "heavy", class: Batch},
			{op: "claim", tenant: "heavy", class: Batch, want: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runRoom(t, tt.slots, tt.batchSlots, tt.steps) })
	}
}

// runRoom plays steps on the headroom of a worker of slots slots,
// batchSlots of which take batch jobs.
func runRoom(t *testing.T, slots, batchSlots int, steps []roomStep) {
	t.Helper()
	const window = 10 * time.Second
	now := time.Unix(0, 0)
	h := newHeadroom()
	h.now = func() time.Time { return now }
	h.keep(slots, batchSlots, window)
	for i, s := range steps {
		switch s.op {
		case "took":
			h.took(s.class, s.tenant)
		case "settled":
			h.settled(s.class, s.tenant)
		case "saw":
			h.saw(s.class, s.tenant)
		case "unclaim":
			h.unclaim(s.class, s.tenant)
		case "tick":
			now = now.Add(time.Duration(s.ticks) * window / 10)
		case "claim":
			waiting := map[string]bool{}
			for _, w := range strings.Fields(s.waiting) {
				waiting[w] = true
			}
			if got := h.claim(s.class, s.tenant, waiting); got != s.want {
				t.Fatalf("step %d: claim(%s, %q) with %q waiting = %t, want %t", i, s.class, s.tenant, s.waiting, got, s.want)
			}
		default:
			t.Fatalf("step %d: no op %q", i, s.op)
		}
	}
}

// The headroom's view of who waits counts only jobs listed or rung as
// waiting. A consumer listed with a job delivered and unacked is tried
// for a job due again, but its listing may predate the ack of the job
// this worker just ran: counted as waiting, its tenant lost the slot kept
// for it to the heavy tenant's next job (TestHeadroomThroughWorker, once
// in CI).
func TestHeadroomCountsOnlyQueuedJobs(t *testing.T) {
	tq := newTenantQueues(nil, Interactive, "B", nil, newHeadroom())
	tq.queues[TenantConsumerName(Interactive, "B", "light")] = &tenantQueue{tenant: "light", weight: 1, ackPending: 1}
	tq.queues[TenantConsumerName(Interactive, "B", "heavy")] = &tenantQueue{tenant: "heavy", weight: 1, pending: 2}
	var tried []string
	for _, c := range tq.waiting() {
		tried = append(tried, c.tenant)
	}
	if !slices.Contains(tried, "light") {
		t.Fatalf("waiting() = %q: light's unacked job is not tried for a redelivery", tried)
	}
	if got := tq.queued(); !maps.Equal(got, map[string]bool{"heavy": true}) {
		t.Fatalf("queued() = %v, want heavy alone", got)
	}
	tq.rang("light")
	if got := tq.queued(); !got["light"] {
		t.Fatalf("queued() = %v after light's bell, want light in it", got)
	}
}
