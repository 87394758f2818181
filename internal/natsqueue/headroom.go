package natsqueue

import (
	"sync"
	"time"
)

// DefaultHeadroomFor is how long a worker keeps a slot for a tenant after
// it last saw one of its jobs (Puller.KeepHeadroom).
const DefaultHeadroomFor = time.Second

// headroom keeps a worker's last free slot for a tenant that comes back.
// Fair share picks who takes a slot that frees; it cannot help a tenant
// whose job arrives while another tenant's jobs hold every slot: that job
// waits for one of them to end, since a running job is not pre-empted.
// A tenant that sends one request at a time is in that position at each
// request, as its queue is empty between them. So the last free slot goes
// only to a tenant that holds none here, unless no other tenant that holds
// none was seen within the window: a tenant alone gets every slot, and a
// slot is left idle at most the window after the other tenant's last job.
// A tenant with a job waiting is not kept for: fair share orders it.
//
// Each class keeps its own last slot: batch jobs may take only the
// worker's batch slots (those not kept for interactive jobs), so the last
// of those is the one a returning batch tenant needs, though an
// interactive slot is still free. Interactive jobs may take any slot, so
// every job held counts against theirs. A tenant counts as holding, and
// as seen, in the class of its jobs.
// It is safe for concurrent use.
type headroom struct {
	// slots is the worker's, and batchSlots those of them batch jobs may
	// take; 0 slots keeps no headroom.
	slots, batchSlots int
	// window is how long a tenant counts as coming back after a job of its
	// was last seen.
	window time.Duration
	now    func() time.Time

	mu sync.Mutex
	// held is the slots each tenant's jobs of each class hold: pulled,
	// not yet settled.
	held [2]map[string]int
	// seen is when a job of each tenant and class was last queued (the
	// bell), listed, pulled or settled here.
	seen [2]map[string]time.Time
}

func newHeadroom() *headroom {
	h := &headroom{now: time.Now}
	for c := range h.held {
		h.held[c], h.seen[c] = map[string]int{}, map[string]time.Time{}
	}
	return h
}

// keep turns the headroom on for a worker of slots slots, batchSlots of
// which may take batch jobs.
func (h *headroom) keep(slots, batchSlots int, window time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slots, h.batchSlots, h.window = slots, batchSlots, window
}

// saw notes that a job of tenant in class was just queued or listed.
func (h *headroom) saw(c Class, tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[c][tenant] = h.now()
}

// took counts a slot taken by a job of tenant in class c.
func (h *headroom) took(c Class, tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[c][tenant]++
	h.seen[c][tenant] = h.now()
}

// claim counts a slot for a job of tenant about to be pulled, when
// allows says so: checked and counted at once, so that two slots that
// free together do not both take the last one. unclaim undoes it when the
// pull found nothing.
func (h *headroom) claim(c Class, tenant string, waiting map[string]bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.allows(c, tenant, waiting) {
		return false
	}
	// Not seen yet: the pull may find nothing (the shared consumer is
	// tried at every look).
	h.held[c][tenant]++
	return true
}

func (h *headroom) unclaim(c Class, tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release(c, tenant)
}

// release frees one of tenant's slots of class c; mu held.
func (h *headroom) release(c Class, tenant string) {
	if h.held[c][tenant]--; h.held[c][tenant] <= 0 {
		delete(h.held[c], tenant)
	}
}

// settled frees a slot that took counted.
func (h *headroom) settled(c Class, tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release(c, tenant)
	h.seen[c][tenant] = h.now()
}

// holding is how many slots the jobs of every class and tenant hold.
func (h *headroom) holding() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sum(h.held[Interactive]) + sum(h.held[Batch])
}

// refuses reports whether a free slot would not take a job of tenant in
// class c now.
func (h *headroom) refuses(c Class, tenant string, waiting map[string]bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.allows(c, tenant, waiting)
}

// allows reports whether a free slot may take a job of tenant in class
// c, waiting being the tenants with jobs of c waiting as this worker sees
// them; mu held.
func (h *headroom) allows(c Class, tenant string, waiting map[string]bool) bool {
	if h.slots <= 0 || h.held[c][tenant] == 0 {
		return true
	}
	if h.free(c) > 1 {
		return true
	}
	return !h.keptForOther(c, tenant, waiting)
}

// free is how many of the slots class c may take are free; mu held.
func (h *headroom) free(c Class) int {
	if c == Batch {
		return h.batchSlots - sum(h.held[Batch])
	}
	return h.slots - sum(h.held[Interactive]) - sum(h.held[Batch])
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// keptForOther reports whether the last free slot of class c is kept for
// a tenant other than tenant: one seen in c within the window that holds
// no slot of c and has no job of c waiting. mu held.
func (h *headroom) keptForOther(c Class, tenant string, waiting map[string]bool) bool {
	now := h.now()
	for u, at := range h.seen[c] {
		switch {
		case u == tenant || h.held[c][u] > 0 || waiting[u]:
		case now.Sub(at) < h.window:
			return true
		default:
			delete(h.seen[c], u) // long gone: forget it
		}
	}
	return false
}
