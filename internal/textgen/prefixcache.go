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
// any slot gets by copy), and reuse, the length it may skip; or else the
// slot nearest the busy ones (busy), an empty one before one that holds
// cells, the least recently stored of those. Reuse always leaves the
// prompt's last token to compute, whose row is sampled.
//
// Busy slots that follow one another run as one forward pass where each
// slot has a stream of its own (padGaps says why); a step across idle
// slots that hold long conversations runs in as many passes as it has
// runs of busy slots, each reading every weight. So a prompt that reuses
// nothing takes a slot next to the busy ones, even one whose cells were
// stored more recently than another's across a gap.
func (c *prefixCache) pick(free []int, busy []int, prompt []int32, lookup bool, beyond int) (slot int, reuse int) {
	lo, hi := math.MaxInt, math.MinInt
	for _, s := range busy {
		lo, hi = min(lo, s), max(hi, s)
	}
	// span is how wide the busy slots would spread with slot among them.
	span := func(slot int) int {
		if len(busy) == 0 {
			return 0
		}
		return max(hi, slot) - min(lo, slot)
	}
	// Nearest the busy slots first; then an empty slot over one whose
	// cells would be lost; then the least recently stored.
	better := func(a, b int) bool {
		if sa, sb := span(a), span(b); sa != sb {
			return sa < sb
		}
		if ea, eb := c.held[a] == nil, c.held[b] == nil; ea != eb {
			return ea
		}
		if c.held[a] == nil {
			return a < b
		}
		return c.used[a] < c.used[b]
	}
	if c.enabled && lookup {
		// Slots that share about as long a start (every conversation with
		// the same system prompt shares it, and a word or two more is
		// luck) are told apart as any: a few tokens more to compute cost
		// less than a step split across a gap.
		match := make(map[int]int, len(free))
		most := beyond
		for _, s := range free {
			match[s] = commonPrefix(c.held[s], prompt[:max(0, len(prompt)-1)])
			most = max(most, match[s])
		}
		best := -1
		for _, s := range free {
			if n := match[s]; n > beyond && n+reuseSlack >= most && (best < 0 || better(s, best)) {
				best = s
			}
		}
		if best >= 0 {
			return best, match[best]
		}
	}
	slot = -1
	for _, s := range free {
		if slot < 0 || better(s, slot) {
			slot = s
		}
	}
	return slot, 0
}

// reuseSlack is how many fewer tokens a slot may share with a prompt than
// the best one and still be taken for being nearer the busy slots.
const reuseSlack = 32

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
	var busy []int
	for _, seq := range s.active {
		if !seq.finished {
			busy = append(busy, seq.slot)
		}
	}
	slot, reuse := c.pick(s.free, busy, req.prompt, lookup, shared)
	var src *sequence
	if lookup {
		// A busy slot may hold a longer start: copy it into this one.
		if a, n := s.busyMatch(req.prompt, max(reuse, shared)); a != nil {
			src, reuse = a, n
		}
	}
	s.free = slices.DeleteFunc(s.free, func(f int) bool { return f == slot })
	held := len(c.held[slot])
	if held > reuse {
		c.evictions.Add(1) // what it held past reuse is overwritten
	}
	c.take(slot)
	seq := &sequence{req: req, slot: slot}
	if src != nil {
		if err := tm.copyPrefix(src.slot, slot, reuse); err == nil {
			seq.pending, seq.pos, seq.cached = req.prompt[reuse:], int32(reuse), reuse
			c.count(reuse, len(req.prompt))
			c.copies.Add(1)
			return seq
		}
		reuse = 0
	}
	if reuse > shared {
		if err := tm.trimSlot(slot, reuse); err == nil {
			seq.pending, seq.pos, seq.cached, seq.inPlace = req.prompt[reuse:], int32(reuse), reuse, true
			c.count(reuse, len(req.prompt))
			return seq
		}
	}
	if held > 0 {
		// Another conversation's cells: the shared prefix replaces them.
		if err := tm.clearSlot(slot); err != nil {
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
// its answer. It never writes below them; when it starts over it forgets
// them, and a copy made before that keeps them (the engine's copies share
// cells, or copy them before the next step writes any).
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
		return s.model.clearSlot(seq.slot)
	}
	if err := s.model.trimSlot(seq.slot, len(tokens)); err != nil {
		s.cache.take(seq.slot)
		return s.model.clearSlot(seq.slot)
	}
	s.cache.store(seq.slot, tokens)
	return nil
}
