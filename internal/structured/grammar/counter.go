package grammar

import (
	"fmt"
	"time"
)

// Counted repeats. A bound up to MaxRepeat unrolls into copies (repeat),
// whose states tell every count apart. Past it, copies would cost a state
// per byte of every copy: a counted repeat is one node that calls its body
// as a rule, and the count of copies begun rides on the frame the call
// pushes (a loop frame). The language is the same, exactly; a node's mask
// depends on the count only within a token's length of a bound, so masks
// stay few (canonCount).

// countSpec is a counted repeat's bounds; max < 0 is unbounded.
type countSpec struct {
	min, max int32
}

// Counted matches between min and max copies of what mk builds (max < 0:
// unbounded). Within MaxRepeat it is repeat; past it the copies are one
// rule called through a counter, so what mk builds must not match the
// empty string (a JSON value or character never does).
func (b *Builder) Counted(min, max int, mk func() Frag) Frag {
	if min <= MaxRepeat && max <= MaxRepeat {
		return b.Repeat(min, max, mk)
	}
	body := b.NewRule(fmt.Sprintf("a repeat of %d to %d", min, max))
	b.Define(body, mk())
	n, ret := b.Node(), b.Node()
	if b.Err == nil {
		nd := &b.Grammar.Nodes[n]
		nd.Call, nd.ret = body, ret
		nd.counted = &countSpec{min: int32(min), max: int32(max)}
	}
	return Frag{n, ret}
}

// loop is the closure of counted node n with count copies done, on s:
// leave once there are enough, begin another while there may be more.
// Past an unbounded repeat's min the count stays at min: more copies are
// all alike.
func (st *stepper) loop(dst []config, n, count int32, s *frame) []config {
	nd := &st.g.Nodes[n]
	cs := nd.counted
	if count >= cs.min {
		dst = st.closure(dst, nd.ret, s)
	}
	if cs.max < 0 || count < cs.max {
		next := count + 1
		if cs.max < 0 && next > cs.min {
			next = cs.min
		}
		dst = st.closure(dst, st.g.Rules[nd.Call].start, st.pushCount(n, next, s))
	}
	return dst
}

// pop is the closure of returning through frame s: to its return node,
// or, for a loop frame, to its counted node's choice.
func (st *stepper) pop(dst []config, s *frame) []config {
	nd := &st.g.Nodes[s.ret]
	switch {
	case nd.counted != nil:
		return st.loop(dst, s.ret, s.count, s.up)
	case nd.region != nil:
		if s.count < nd.region.min {
			return dst
		}
		return st.closure(dst, nd.ret, s.up)
	case nd.check != nil && !st.checkPasses(s, nd.check):
		return dst
	}
	return st.closure(dst, s.ret, s.up)
}

// canonCount is a count that no token of at most maxLen bytes tells apart
// from count: each copy takes a byte at least, so a token sees the next
// maxLen+1 counts only, and where none of them is a bound, all such counts
// mask alike.
func canonCount(cs *countSpec, count int32, maxLen int) int32 {
	reach := int32(maxLen) + 1
	switch {
	case cs.max >= 0 && cs.max-count <= reach:
		return count
	case count < cs.min && cs.min-count > reach:
		return cs.min - reach - 1
	case count < cs.min:
		return count
	default:
		return cs.min
	}
}

// countKey names the mask of a node under a loop frame, by places in the
// table that keeps the node's mask.
type countKey struct {
	node, loop, count int32
}

// countedMask is the mask of config cf when it stands on a loop frame
// whose counted node the same table keeps: the node's walk goes on
// through the counter with a canonical count, and is kept per count
// class. It returns the frame the mask's escapes return through; ok is
// false where the config is not such.
func (m *Matcher) countedMask(v *Vocab, t *nodeTable, cf config) (nm *nodeMask, up *frame, ok bool) {
	return m.countedMaskWithin(v, t, cf, time.Time{})
}

// countedMaskWithin is countedMask, giving up (a nil mask) once
// deadline, when set, has passed.
func (m *Matcher) countedMaskWithin(v *Vocab, t *nodeTable, cf config, deadline time.Time) (nm *nodeMask, up *frame, ok bool) {
	f := cf.st
	g := m.st.g
	if f == nil || f == m.st.bottom {
		return nil, nil, false
	}
	var count int32
	loop := &g.Nodes[f.ret]
	switch {
	case loop.counted != nil:
		count = canonCount(loop.counted, f.count, v.maxLen)
	case loop.region != nil:
		count = loop.region.canon(f.count, v.maxLen)
	default:
		return nil, nil, false
	}
	n := g.canon(cf.node, v.maxLen)
	tab, rel, own := m.slotOf(v, t, n)
	ltab, lrel, _ := m.slotOf(v, t, f.ret)
	start := config{n, m.st.pushCount(f.ret, count, m.st.bottom)}
	if tab.pinned || ltab != tab {
		if loop.region == nil {
			return nil, nil, false
		}
		// A region's node has no mask of its own, whatever its count:
		// walked each time where no table keeps it with its region.
		return m.walkMask(v, []config{start}, t, false, deadline), f.up, true
	}
	k := countKey{rel, lrel, count}
	if nm := tab.memo.countedMask(k); nm != nil {
		return nm, f.up, true
	}
	nm = m.walkMask(v, []config{start}, tab, own, deadline)
	if nm == nil {
		return nil, f.up, true
	}
	if tab.memo.putCounted(k, nm) {
		v.store.added(tab, nm.size())
	}
	return nm, f.up, true
}

func (tm *tableMemo) countedMask(k countKey) *nodeMask {
	return memoLoad(&tm.mu, &tm.counted, k)
}

// putCounted keeps nm unless a walk of the same key got there first.
func (tm *tableMemo) putCounted(k countKey, nm *nodeMask) bool {
	return memoStore(&tm.mu, &tm.counted, k, nm)
}

// isLoop tells a config that stands on a loop or region frame.
func (m *Matcher) isLoop(cf config) bool {
	f := cf.st
	if f == nil || f == m.st.bottom {
		return false
	}
	nd := &m.st.g.Nodes[f.ret]
	return nd.counted != nil || nd.region != nil
}
