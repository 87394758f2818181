package grammar

import "sort"

// A bounded repeat (a string's maxLength, an array's maxItems) builds one
// copy of its body per count, and each copy's nodes would need masks of
// their own: a thousand characters of a string are a thousand walks of
// the vocabulary, each as costly as the last. But a mask only looks as far
// ahead as a token is long. Two copies whose counts of copies still
// required and still allowed after them agree up to that depth (or both
// exceed it) have nodes no token can tell apart, so one copy's masks
// serve both: a string's characters far from its bounds share a single
// set of masks.

// repeatRun records a repeat's copies: copy k's nodes are
// [bases[k], bases[k]+size), laid out alike. Copies after copy k: at
// least max(min-1-k, 0), at most max-1-k (any number when max < 0).
type repeatRun struct {
	first, last int32 // the copies' nodes, the nodes between them included
	bases       []int32
	size        int32
	min, max    int32
}

// minAliasedCopies is the fewest copies worth recording: below it there is
// little to share.
const minAliasedCopies = 8

// copyShape is what repeat needs to know of copy 0 to check the others
// against it: its nodes as mk built them, before repeat links the copies.
type copyShape struct {
	base  int32
	nodes []Node
}

// snapshot keeps copy 0 of a repeat: the nodes from base on.
func (b *Builder) snapshot(base int32) copyShape {
	s := copyShape{base: base, nodes: make([]Node, len(b.Grammar.Nodes)-int(base))}
	for i, n := range b.Grammar.Nodes[base:] {
		n.Edges = append([]Edge(nil), n.Edges...)
		n.Eps = append([]int32(nil), n.Eps...)
		s.nodes[i] = n
	}
	return s
}

// sameShape tells whether the nodes from base on, as mk just built them,
// are copy 0's moved by base-s.base: same edges, epsilons, calls and
// ends, links inside the copy moved alike, links out of it the same.
func (b *Builder) sameShape(s copyShape, base int32) bool {
	nodes := b.Grammar.Nodes[base:]
	if len(nodes) != len(s.nodes) {
		return false
	}
	size, shift := int32(len(s.nodes)), base-s.base
	moved := func(t0, t int32) bool {
		if t0 >= s.base && t0 < s.base+size {
			return t == t0+shift
		}
		return t == t0
	}
	for i, n := range nodes {
		n0 := &s.nodes[i]
		if n.final != n0.final || n.Call != n0.Call || len(n.Edges) != len(n0.Edges) || len(n.Eps) != len(n0.Eps) {
			return false
		}
		if n.Call >= 0 && !moved(n0.ret, n.ret) {
			return false
		}
		for j, e := range n.Edges {
			if e.Lo != n0.Edges[j].Lo || e.Hi != n0.Edges[j].Hi || !moved(n0.Edges[j].To, e.To) {
				return false
			}
		}
		for j, t := range n.Eps {
			if !moved(n0.Eps[j], t) {
				return false
			}
		}
	}
	return true
}

// consumes tells whether every way through copy s, from start to end,
// reads a byte: the argument for sharing masks counts a byte per copy.
func (s copyShape) consumes(f Frag) bool {
	seen := map[int32]bool{}
	stack := []int32{f.Start}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == f.End {
			return false
		}
		i := n - s.base
		if seen[n] || i < 0 || int(i) >= len(s.nodes) {
			continue
		}
		seen[n] = true
		stack = append(stack, s.nodes[i].Eps...) // a call reads a value: never empty
	}
	return true
}

// recordRepeat keeps a repeat's copies for canon, when there are enough
// of them, built alike, none empty, and no repeat recorded within them.
func (b *Builder) recordRepeat(r repeatRun, ok bool, nested bool) {
	if !ok || nested || b.Err != nil || len(r.bases) < minAliasedCopies {
		return
	}
	b.Grammar.repeats = append(b.Grammar.repeats, r)
}

// canon is the node whose mask serves node n for walks of at most depth
// bytes: n itself, or the same node of the first copy of its repeat that
// no such walk tells apart from n's.
func (g *Grammar) canon(n int32, depth int) int32 {
	i := sort.Search(len(g.repeats), func(i int) bool { return g.repeats[i].last > n })
	if i == len(g.repeats) || g.repeats[i].first > n {
		return n
	}
	r := &g.repeats[i]
	k := sort.Search(len(r.bases), func(k int) bool { return r.bases[k] > n }) - 1
	if k < 0 || n-r.bases[k] >= r.size {
		return n // a node between copies
	}
	d := int32(min(depth, 1<<30))
	need, allow := max(r.min-1-int32(k), 0), r.max-1-int32(k)
	if r.max < 0 {
		allow = d // unbounded: never pins a copy
	}
	// The first copy with the same counts once clipped to depth: the
	// counts fall by one a copy, so that copy is the latest that any
	// count below depth pins.
	first := int32(0)
	if need < d {
		if need > 0 {
			first = r.min - 1 - need
		} else {
			first = max(r.min-1, 0)
		}
	}
	if allow < d {
		first = max(first, r.max-1-allow)
	}
	if first >= int32(k) {
		return n
	}
	return r.bases[first] + (n - r.bases[k])
}
