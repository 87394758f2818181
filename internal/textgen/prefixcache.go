package textgen

import (
	"math"
	"slices"
	"sync/atomic"

	"github.com/genq/genq/internal/genq"
)

// prefixCache remembers what the cells of each free slot hold. A sequence
// that ends with its answer leaves its cells in its slot: its prompt and
// every answer token that was fed back (the last sampled one never is).
// A new request takes the free slot whose cells share the longest start
// with its prompt and prefills only the rest, in place; when none shares
// more than the fixed shared prefix, it takes an empty slot, or else the
// least recently used one, whose cells it overwrites (eviction).
//
// The key is the token sequence itself, compared token by token against
// at most one entry per slot: a scan of the free slots stops at the first
// differing token and costs less than hashing the prompt into blocks.
//
// Only the loop goroutine calls its methods; the counters are read by the
// worker's metrics while it runs.
type prefixCache struct {
	enabled bool
	// held[slot] are the tokens whose cells slot holds, from position 0,
	// while the slot is free; nil once a sequence takes the slot, so cells
	// a sequence is writing, or wrote before it failed or was cancelled,
	// are never offered again.
	held [][]int32
	used []uint64 // when each slot's cells were last stored, for eviction
	tick uint64

	hitTokens, missTokens atomic.Int64 // prompt tokens reused and computed
	heldTokens            atomic.Int64 // tokens kept in free slots
	evictions             atomic.Int64 // entries overwritten, wholly or past the start a prompt reused
	copies                atomic.Int64 // starts copied from a busy slot
	capacity              int64        // cells of every request slot
}

func newPrefixCache(enabled bool, slots, contextSize int) *prefixCache {
	return &prefixCache{enabled: enabled, held: make([][]int32, slots), used: make([]uint64, slots),
		capacity: int64(slots) * int64(contextSize)}
}

// pick chooses the free slot for prompt: the one whose held tokens share
// the longest start with it, longer than beyond (the shared prefix, which
// any slot gets by copy), and reuse, the length it may skip; or else an
// empty slot, the lowest, or else the least recently stored. Reuse always
// leaves the prompt's last token to compute, whose row is sampled.
func (c *prefixCache) pick(free []int, prompt []int32, lookup bool, beyond int) (slot int, reuse int) {
	best, bestLen := -1, beyond
	if c.enabled && lookup {
		for _, s := range free {
			n := commonPrefix(c.held[s], prompt[:max(0, len(prompt)-1)])
			if n > bestLen {
				best, bestLen = s, n
			}
		}
	}
	if best >= 0 {
		return best, bestLen
	}
	empty, oldest := -1, -1
	for _, s := range free {
		switch {
		case c.held[s] == nil:
			if empty < 0 || s < empty {
				empty = s
			}
		case oldest < 0 || c.used[s] < c.used[oldest]:
			oldest = s
		}
	}
	if empty >= 0 {
		return empty, 0
	}
	return oldest, 0
}

// take hands slot to a sequence: its entry leaves the cache.
func (c *prefixCache) take(slot int) {
	c.heldTokens.Add(-int64(len(c.held[slot])))
	c.held[slot] = nil
}

// store records that slot's cells hold tokens, from position 0.
func (c *prefixCache) store(slot int, tokens []int32) {
	c.take(slot)
	if !c.enabled || len(tokens) == 0 {
		return
	}
	c.tick++
	c.held[slot], c.used[slot] = tokens, c.tick
	c.heldTokens.Add(int64(len(tokens)))
}

// count adds a started prompt's reused and computed tokens to the counters.
func (c *prefixCache) count(reused, prompt int) {
	c.hitTokens.Add(int64(reused))
	c.missTokens.Add(int64(prompt - reused))
}

func (c *prefixCache) stats() genq.PrefixCacheStats {
	return genq.PrefixCacheStats{HitTokens: c.hitTokens.Load(), MissTokens: c.missTokens.Load(),
		HeldTokens: c.heldTokens.Load(), CapacityTokens: c.capacity}
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// admitSlot gives seq a slot: in place over the longest cached start of
// its prompt when there is one, else after the shared prefix. A request
// whose prompt is scored computes every token itself, as it does with the
// shared prefix: cached cells come with no logits.
func (s *scheduler) admitSlot(req *request) *sequence {
	tm, c := s.model, s.cache
	// The shared prefix, when the prompt starts with it, comes by copy to
	// any slot: a slot is worth taking for its cells only beyond it.
	shared := 0
	if n := len(tm.prefix); n < len(req.prompt) && slices.Equal(req.prompt[:n], tm.prefix) {
		shared = n
	}
	lookup := c.enabled && !req.scorePrompt()
	slot, reuse := c.pick(s.free, req.prompt, lookup, shared)
	var src *sequence
	if lookup {
		// A busy slot may hold a longer start: copy it into this one.
		if a, n := s.busyMatch(req.prompt, max(reuse, shared)); a != nil {
			src, reuse = a, n
		}
	}
	s.forgetCopiesFrom(slot)
	s.free = slices.DeleteFunc(s.free, func(f int) bool { return f == slot })
	held := len(c.held[slot])
	if held > reuse {
		c.evictions.Add(1) // what it held past reuse is overwritten
	}
	c.take(slot)
	seq := &sequence{req: req, slot: slot}
	if src != nil {
		if held > 0 {
			if err := tm.graph.clear(slot); err != nil {
				tm.log.Error("evict cached prefix", "slot", slot, "err", err)
			}
		}
		if err := tm.graph.copyPrefix(src.slot, slot, int32(reuse)); err == nil {
			seq.pending, seq.pos, seq.cached = req.prompt[reuse:], int32(reuse), reuse
			c.count(reuse, len(req.prompt))
			c.copies.Add(1)
			return seq
		}
		reuse = 0
	}
	if reuse > shared {
		if err := tm.graph.trim(slot, int32(reuse)); err == nil {
			seq.pending, seq.pos, seq.cached, seq.inPlace = req.prompt[reuse:], int32(reuse), reuse, true
			c.count(reuse, len(req.prompt))
			return seq
		}
	}
	if held > 0 {
		// Another conversation's cells: the shared prefix replaces them.
		if err := tm.graph.clear(slot); err != nil {
			tm.log.Error("evict cached prefix", "slot", slot, "err", err)
		}
	}
	seq.startFromPrefix(tm)
	c.count(seq.cached, len(req.prompt))
	return seq
}

// busyMatch finds the active sequence whose slot holds the longest start
// of prompt, longer than beyond, among cells that stay as they are while
// it runs: those it reused in place, written by a sequence that ended with
// its answer, so already there whatever becomes of the steps in flight.
// It never writes below them unless it starts over, and then
// forgetCopiesFrom cancels the copies not yet made.
func (s *scheduler) busyMatch(prompt []int32, beyond int) (*sequence, int) {
	var best *sequence
	bestLen := beyond
	for _, a := range s.active {
		if a.finished || a.redo || !a.inPlace {
			continue
		}
		if n := commonPrefix(a.req.prompt[:a.cached], prompt[:max(0, len(prompt)-1)]); n > bestLen {
			best, bestLen = a, n
		}
	}
	return best, bestLen
}

// forgetCopiesFrom is called before slot's cells change (a sequence takes
// it, or its own starts over): copies from it that no step has made yet
// are dropped, and their sequences, which have run no step, start after
// the shared prefix instead.
func (s *scheduler) forgetCopiesFrom(slot int) {
	for _, dst := range s.model.graph.dropCopiesFrom(slot) {
		for _, seq := range s.active {
			if seq.slot == dst && !seq.finished {
				copied := seq.cached
				seq.startFromPrefix(s.model)
				s.cache.hitTokens.Add(int64(seq.cached - copied))
				s.cache.missTokens.Add(int64(copied - seq.cached))
			}
		}
	}
}

// keepCells is what a sequence leaving its slot leaves in the cache: the
// tokens its cells hold when it ended with its answer, or nothing when it
// failed, was cancelled or was set to start over, whose cells may be half
// written.
func (seq *sequence) keepCells() []int32 {
	req := seq.req
	if !seq.answered || seq.redo || req.cancelled.Load() || req.err != nil || req.scorePrompt() {
		return nil
	}
	tokens := make([]int32, 0, len(req.prompt)+len(seq.fed))
	return append(append(tokens, req.prompt...), seq.fed...)
}

// leave frees seq's slot, keeping its cells when they may be reused.
func (s *scheduler) leave(seq *sequence) error {
	tokens := seq.keepCells()
	if !s.cache.enabled || len(tokens) == 0 {
		s.cache.take(seq.slot)
		return s.model.graph.clear(seq.slot)
	}
	if err := s.model.graph.trim(seq.slot, int32(len(tokens))); err != nil {
		s.cache.take(seq.slot)
		return s.model.graph.clear(seq.slot)
	}
	s.cache.store(seq.slot, tokens)
	return nil
}

// trim forgets the cells of slot from position n on, in the engine's
// unified cache; the cells before n stay for the slot's next sequence.
func (g *engineGraph) trim(slot int, n int32) error {
	return g.cache.Remove(slot, n, math.MaxInt32)
}

// dropCopiesFrom: the engine's cache shares cells at once (copyPrefix), so
// no copy is ever pending.
func (g *engineGraph) dropCopiesFrom(int) []int { return nil }

// dropCopiesFrom drops the pending copies that read from src and returns
// the slots they were for.
func (g *streamGraph) dropCopiesFrom(src int) []int {
	var dsts []int
	g.pendingCopies = slices.DeleteFunc(g.pendingCopies, func(c prefixCopy) bool {
		if c.src == src {
			dsts = append(dsts, c.dst)
			return true
		}
		return false
	})
	return dsts
}

// trim has nothing to free in a stream (clear says why); a copy still
// pending into the slot is dropped, as clear drops it.
func (g *streamGraph) trim(slot int, n int32) error { return g.clear(slot) }
