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
// It is safe for concurrent use.
type headroom struct {
	// slots is the worker's; 0 keeps no headroom.
	slots int
	// window is how long a tenant counts as coming back after a job of its
	// was last seen.
	window time.Duration
	now    func() time.Time

	mu sync.Mutex
	// held is the slots each tenant's jobs hold: pulled, not yet settled.
	held map[string]int
	// seen is when a job of each tenant was last queued (the bell),
	// listed, pulled or settled here.
	seen map[string]time.Time
}

func newHeadroom() *headroom {
	return &headroom{now: time.Now, held: map[string]int{}, seen: map[string]time.Time{}}
}

// keep turns the headroom on for a worker of slots slots.
func (h *headroom) keep(slots int, window time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slots, h.window = slots, window
}

// saw notes that a job of tenant was just queued or listed.
func (h *headroom) saw(tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[tenant] = h.now()
}

// took counts a slot taken by a job of tenant.
func (h *headroom) took(tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[tenant]++
	h.seen[tenant] = h.now()
}

// claim counts a slot for a job of tenant about to be pulled, when
// allows says so: checked and counted at once, so that two slots that
// free together do not both take the last one. unclaim undoes it when the
// pull found nothing.
func (h *headroom) claim(tenant string, waiting map[string]bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.allows(tenant, waiting) {
		return false
	}
	// Not seen yet: the pull may find nothing (the shared consumer is
	// tried at every look).
	h.held[tenant]++
	return true
}

func (h *headroom) unclaim(tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release(tenant)
}

// release frees one of tenant's slots; mu held.
func (h *headroom) release(tenant string) {
	if h.held[tenant]--; h.held[tenant] <= 0 {
		delete(h.held, tenant)
	}
}

// settled frees a slot that took counted.
func (h *headroom) settled(tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release(tenant)
	h.seen[tenant] = h.now()
}

// refuses reports whether a free slot would not take a job of tenant now.
func (h *headroom) refuses(tenant string, waiting map[string]bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.allows(tenant, waiting)
}

// allows reports whether a free slot may take a job of tenant, waiting
// being the tenants with jobs waiting as this worker sees them; mu held.
func (h *headroom) allows(tenant string, waiting map[string]bool) bool {
	if h.slots <= 0 || h.held[tenant] == 0 {
		return true
	}
	inUse := 0
	for _, n := range h.held {
		inUse += n
	}
	if h.slots-inUse > 1 {
		return true
	}
	return !h.keptForOther(tenant, waiting)
}

// keptForOther reports whether the last free slot is kept for a tenant
// other than tenant: one seen within the window that holds no slot and
// has no job waiting. mu held.
func (h *headroom) keptForOther(tenant string, waiting map[string]bool) bool {
	now := h.now()
	for u, at := range h.seen {
		switch {
		case u == tenant || h.held[u] > 0 || waiting[u]:
		case now.Sub(at) < h.window:
			return true
		default:
			delete(h.seen, u) // long gone: forget it
		}
	}
	return false
}
