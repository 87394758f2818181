package grammar

import (
	"iter"
	"slices"
)

// Length regions. A string with a format or pattern and a minLength or
// maxLength was the product of the format's automaton with a counter of
// characters: a state per character and format state, 195,809 nodes for
// a uri of at most 255. A region is the format's automaton once, called
// as a rule whose frame counts the characters its edges begin (Edge.Tick),
// as a counted repeat's frame counts copies: a step refuses a character
// past max, or one after which no way to the string's end fits the
// bounds, and the end refuses a count below min. A node's mask depends on
// the count only within a token's length (and the format's own) of a
// bound, so masks stay few (regionSpec.canon).
//
// Refusing dead counts exactly asks, of every node, whether some way from
// it to the end takes a number of characters within the bounds left. Where
// the numbers a node's ways take have no gap as wide as the bounds' window,
// "the fewest fits under max and the most reaches min" is that test.
// LengthRegion checks it and reports false where it fails (a date-time
// takes 20 or 22 characters, not 21: minLength and maxLength 21): the
// caller builds the product instead.

// regionSpec is a length region's bounds (max < 0: unbounded) and, per
// node of its body from first, the fewest and most characters to the
// body's end (need < 0: the end cannot be reached; long < 0: no most).
type regionSpec struct {
	min, max         int32
	first            int32
	need, long       []int32
	maxNeed, maxLong int32 // over the nodes, long's finite values only
}

// unbounded marks a long with no most.
const unbounded = -1

// LengthRegion adds f, a JSON string's automaton built alone in body
// (byte edges and epsilons, no calls), as a rule whose characters are
// counted between min and max (max < 0: no max). A character begins at
// each byte a node of boundary takes (the string's content between
// characters), but its closing quote. ok is false where the counts cannot
// be followed exactly (lengthGap).
func (b *Builder) LengthRegion(min, max int, body *Grammar, f Frag, boundary []bool) (Frag, bool) {
	nodes := body.Nodes
	ticks, ok := tickEdges(nodes, boundary)
	if !ok || zeroCycle(nodes, ticks) {
		return Frag{}, false
	}
	need, long := regionLengths(nodes, ticks, f.End)
	if gap := lengthGap(nodes, ticks, f.End, need, long); max >= 0 && int(gap) > max-min {
		return Frag{}, false
	}
	spec := &regionSpec{min: int32(min), max: int32(max), need: need, long: long}
	for i := range nodes {
		spec.maxNeed = max32(spec.maxNeed, need[i])
		spec.maxLong = max32(spec.maxLong, long[i])
	}
	if !spec.live(f.Start, 0, 0) {
		return Frag{b.Node(), b.Node()}, true // no string fits: a dead end Finish cuts
	}
	r := b.NewRule(lengthName(min, max))
	first := b.copyNodes(nodes, ticks)
	spec.first = first
	b.Define(r, Frag{first + f.Start, first + f.End})
	n, ret := b.Node(), b.Node()
	if b.Err == nil {
		nd := &b.Grammar.Nodes[n]
		nd.Call, nd.ret, nd.region = r, ret, spec
	}
	return Frag{n, ret}, true
}

func lengthName(min, max int) string {
	if max < 0 {
		return "a string of at least " + itoa(min) + " characters"
	}
	return "a string of " + itoa(min) + " to " + itoa(max) + " characters"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf []byte
	for ; n > 0; n /= 10 {
		buf = append(buf, byte('0'+n%10))
	}
	slices.Reverse(buf)
	return string(buf)
}

func max32(a, b int32) int32 {
	if b > a {
		return b
	}
	return a
}

// tickEdges marks, per node and edge, the edges that begin a character:
// those of boundary nodes but the closing quote. An edge that takes the
// quote and other bytes at once cannot be told apart: not ok.
func tickEdges(nodes []Node, boundary []bool) ([][]bool, bool) {
	ticks := make([][]bool, len(nodes))
	for i := range nodes {
		if i >= len(boundary) || !boundary[i] {
			continue
		}
		ticks[i] = make([]bool, len(nodes[i].Edges))
		for j, e := range nodes[i].Edges {
			quote := e.Lo <= '"' && '"' <= e.Hi
			if quote && e.Lo != e.Hi {
				return nil, false
			}
			ticks[i][j] = !quote
		}
	}
	for i := range nodes {
		if nodes[i].Call >= 0 {
			return nil, false
		}
	}
	return ticks, true
}

// zeroCycle tells whether some cycle begins no character (epsilons of a
// starred empty group, say): regionLengths takes every cycle for a way to
// any number of characters.
func zeroCycle(nodes []Node, ticks [][]bool) bool {
	return cycleAt(len(nodes), func(n int32) iter.Seq[int32] {
		return func(yield func(int32) bool) {
			for j, e := range nodes[n].Edges {
				if tickOf(ticks, int(n), j) == 0 && !yield(e.To) {
					return
				}
			}
			for _, t := range nodes[n].Eps {
				if !yield(t) {
					return
				}
			}
		}
	}) >= 0
}

func tickOf(ticks [][]bool, n, j int) int32 {
	if ticks[n] != nil && ticks[n][j] {
		return 1
	}
	return 0
}

// regionLengths is, per node, the fewest and the most characters on its
// ways to end: the fewest by a breadth-first search backwards (edges cost
// 0 or 1), the most by a depth-first search forwards, where a cycle on a
// way to end (every cycle begins a character: zeroCycle) has no most.
func regionLengths(nodes []Node, ticks [][]bool, end int32) (need, long []int32) {
	type arc struct {
		from int32
		cost int32
	}
	back := make([][]arc, len(nodes))
	for i := range nodes {
		for j, e := range nodes[i].Edges {
			back[e.To] = append(back[e.To], arc{int32(i), tickOf(ticks, i, j)})
		}
		for _, t := range nodes[i].Eps {
			back[t] = append(back[t], arc{int32(i), 0})
		}
	}
	need = make([]int32, len(nodes))
	for i := range need {
		need[i] = -1
	}
	// A 0-1 breadth-first search, a level of cost at a time: arcs of
	// cost 0 add to the level at hand, of cost 1 to the next.
	need[end] = 0
	level := []int32{end}
	for d := int32(0); len(level) > 0; d++ {
		var next []int32
		for k := 0; k < len(level); k++ {
			n := level[k]
			if need[n] != d {
				continue // reached more cheaply since
			}
			for _, a := range back[n] {
				c := d + a.cost
				if need[a.from] >= 0 && need[a.from] <= c {
					continue
				}
				need[a.from] = c
				if a.cost == 0 {
					level = append(level, a.from)
				} else {
					next = append(next, a.from)
				}
			}
		}
		level = next
	}
	long = make([]int32, len(nodes))
	mark := make([]walkMark, len(nodes))
	var visit func(n int32) int32
	visit = func(n int32) int32 {
		switch mark[n] {
		case onPath:
			return unbounded
		case walked:
			return long[n]
		}
		mark[n] = onPath
		best := int32(0)
		step := func(to, cost int32) {
			if need[to] < 0 || best == unbounded {
				return
			}
			l := visit(to)
			if l == unbounded {
				best = unbounded
				return
			}
			best = max32(best, l+cost)
		}
		for j, e := range nodes[n].Edges {
			step(e.To, tickOf(ticks, int(n), j))
		}
		for _, t := range nodes[n].Eps {
			step(t, 0)
		}
		mark[n], long[n] = walked, best
		return best
	}
	for i := range nodes {
		if need[i] >= 0 {
			visit(int32(i))
		} else {
			long[i] = 0
		}
	}
	return need, long
}

// lengthGap is the widest gap in the numbers of characters a node's
// ways to end may take, between its fewest and its most, as its
// successors' spans (moved by the character an edge begins) leave it.
// With gaps of at most G, every G+1 numbers from a node's fewest to its
// most hold one some way takes (by induction on the characters left, and
// the bytes within a character; a span's ends are always taken): a
// window of bounds wider than G meets a node's ways exactly when it
// meets [fewest, most], which is all a step asks (regionSpec.live).
func lengthGap(nodes []Node, ticks [][]bool, end int32, need, long []int32) int32 {
	var spans []span
	gap := int32(0)
	for i := range nodes {
		if need[i] < 0 {
			continue
		}
		spans = spans[:0]
		if int32(i) == end {
			spans = append(spans, span{0, 0})
		}
		add := func(to, cost int32) {
			if need[to] < 0 {
				return
			}
			hi := long[to]
			if hi != unbounded {
				hi += cost
			}
			spans = append(spans, span{need[to] + cost, hi})
		}
		for j, e := range nodes[i].Edges {
			add(e.To, tickOf(ticks, i, j))
		}
		for _, t := range nodes[i].Eps {
			add(t, 0)
		}
		gap = max32(gap, widestGap(spans))
	}
	return gap
}

// span is the numbers of characters from lo to hi (hi < 0: no most).
type span struct{ lo, hi int32 }

// widestGap is the most numbers in a row between spans' lowest and
// highest that none of them holds.
func widestGap(spans []span) int32 {
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	reach, gap := spans[0].hi, int32(0)
	for _, s := range spans[1:] {
		if reach == unbounded {
			break
		}
		gap = max32(gap, s.lo-reach-1)
		if s.hi == unbounded {
			reach = unbounded
		} else {
			reach = max32(reach, s.hi)
		}
	}
	return gap
}

// copyNodes adds nodes, built alone, to b's grammar, their edges marked
// with ticks, and returns where they begin.
func (b *Builder) copyNodes(nodes []Node, ticks [][]bool) int32 {
	first := int32(len(b.Grammar.Nodes))
	for range nodes {
		b.Node()
	}
	if b.Err != nil {
		return first
	}
	for i, n := range nodes {
		nd := &b.Grammar.Nodes[first+int32(i)]
		nd.inRegion, nd.final = true, false
		nd.Edges = make([]Edge, len(n.Edges))
		for j, e := range n.Edges {
			nd.Edges[j] = Edge{Lo: e.Lo, Hi: e.Hi, Tick: tickOf(ticks, i, j) == 1, To: first + e.To}
		}
		for _, t := range n.Eps {
			nd.Eps = append(nd.Eps, first+t)
		}
	}
	return first
}

// live tells whether node n (of the grammar) may stand at count: some
// way from it to the end fits the bounds.
func (r *regionSpec) live(n, count int32, first int32) bool {
	i := n - first
	need := r.need[i]
	if need < 0 || r.max >= 0 && count+need > r.max {
		return false
	}
	return r.long[i] == unbounded || count+r.long[i] >= r.min
}

// next is the count after one more character. Past min with no max every
// count is alike: it stays at min, so that frames stay few.
func (r *regionSpec) next(count int32) int32 {
	count++
	if r.max < 0 && count > r.min {
		count = r.min
	}
	return count
}

// canon is a count that no token of at most maxLen bytes tells apart from
// count: a token begins at most maxLen characters, and what it may do
// depends on the count only through count+k+need ≤ max and
// count+k+long ≥ min, k ≤ maxLen.
func (r *regionSpec) canon(count int32, maxLen int) int32 {
	nearMax := int32(maxLen) + r.maxNeed
	nearMin := int32(maxLen) + r.maxLong
	switch {
	case r.max >= 0 && r.max-count <= nearMax:
		return count
	case count >= r.min:
		return r.min
	case r.min-count > nearMin:
		c := r.min - nearMin - 1
		if r.max >= 0 && r.max-c <= nearMax {
			return count
		}
		return c
	}
	return count
}

// stepRegion moves config cf, on node nd of a region's body, over byte
// c: a character past the bounds, or into a node no way from which fits
// them, is refused. On the bottom frame (a mask worked out for the node
// alone) the count is unknown and nothing is counted.
func (st *stepper) stepRegion(dst []config, cf config, nd *Node, c byte) ([]config, bool) {
	f := cf.st
	var spec *regionSpec
	if f != nil && f != st.bottom {
		spec = st.g.Nodes[f.ret].region
	}
	took := false
	for _, e := range nd.Edges {
		if c < e.Lo || c > e.Hi {
			continue
		}
		s := f
		if spec != nil {
			count := f.count
			if e.Tick {
				count = spec.next(count)
			}
			if !spec.live(e.To, count, spec.first) {
				continue
			}
			s = st.pushCount(f.ret, count, f.up)
		}
		took = true
		dst = st.closure(dst, e.To, s)
	}
	return dst, took
}
