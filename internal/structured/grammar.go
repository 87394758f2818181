// Package structured constrains decoding to a JSON schema: a schema compiles
// to a grammar over bytes (a recursive transition network: one small NFA per
// rule, with calls between rules for nesting and recursion), a Matcher follows
// the bytes generated so far, and Mask tells which tokens of a model's
// vocabulary may come next.
//
// The package is pure Go and knows nothing of models, HTTP or queues: the
// sampler owns one Matcher per constrained sequence and a Vocab per model.
package structured

import (
	"slices"
	"sort"
	"sync"

	"github.com/genq/genq/internal/genq"
)

// Limits on what one grammar may cost. A schema over them is refused as
// too large rather than compiled slowly or held in memory: MaxNodes bounds
// the compile's work (a grammar at the bound compiles in about 0.1 s of one
// core; docs/benchmarks.md), whatever the machine's load.
const (
	MaxNodes  = 200_000 // automaton nodes once compiled
	maxRepeat = 1024    // minItems, maxItems, minLength, maxLength
)

// edge is a byte transition: any byte in [lo, hi] leads to node to.
type edge struct {
	lo, hi byte
	to     int32
}

// node is a state of one rule's NFA. A node may have byte edges, epsilon
// edges, a call (enter rule call, come back at ret) and be the rule's end.
type node struct {
	edges []edge
	eps   []int32
	call  int32 // rule entered from here, or -1
	ret   int32 // where the call comes back
	final bool  // the rule may end here
	// sorted says edges are in byte order and disjoint: a step finds its
	// edge by bisection (a product's states have tens of edges).
	sorted bool
	// counted, when set, makes the call a counted repeat of rule call
	// (counter.go): its count rides on the stack, not in unrolled states.
	counted *countSpec
}

// minSortedEdges is the fewest edges worth a bisection.
const minSortedEdges = 6

// sortEdges orders n's edges by byte and marks them sorted when no two
// overlap; overlapping edges (an NFA's) stay as they are.
func (n *node) sortEdges() {
	if len(n.edges) < minSortedEdges {
		return
	}
	sorted := slices.SortedFunc(slices.Values(n.edges), func(a, b edge) int { return int(a.lo) - int(b.lo) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].lo <= sorted[i-1].hi {
			return
		}
	}
	n.edges, n.sorted = sorted, true
}

// edgeFor is the edge of sorted n that byte c takes, if any.
func (n *node) edgeFor(c byte) (edge, bool) {
	lo, hi := 0, len(n.edges)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if n.edges[mid].hi < c {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(n.edges) && n.edges[lo].lo <= c {
		return n.edges[lo], true
	}
	return edge{}, false
}

type rule struct {
	start int32
	name  string
}

// Grammar is a compiled schema: rules of byte NFAs. It is immutable once
// compiled and safe for concurrent use; Matchers hold the per-sequence state.
type Grammar struct {
	nodes []node
	rules []rule
	top   int32 // the rule a whole answer must match
	// builtinNodes counts the nodes every grammar starts with, identical
	// in all grammars, so that their token masks are shared per Vocab.
	builtinNodes int32
	// sharedRules are the rules whose masks are kept per Vocab by key
	// (strings with bounds or patterns), in node order.
	sharedRules []sharedRange
	tables      tableSet
	// repeats are the bounded repeats whose copies share masks (canon),
	// in node order.
	repeats []repeatRun
	// relaxed are the tools whose schemas were relaxed to compile
	// (relax.go), by name; nil when every schema is held to exactly.
	relaxed map[string]*RelaxedTool
	// order is the nodes in the order Prepare works their masks out.
	orderOnce sync.Once
	order     []int32
	// tail marks the nodes from which a rule can only end (endsRule).
	tailOnce sync.Once
	tail     []bool
}

// sharedRange is a rule built alone on nodes [first, end).
type sharedRange struct {
	key        string
	first, end int32
}

// sharedRule returns the shared rule that node n belongs to, if any.
func (g *Grammar) sharedRule(n int32) (sharedRange, bool) {
	i := sort.Search(len(g.sharedRules), func(i int) bool { return g.sharedRules[i].end > n })
	if i < len(g.sharedRules) && g.sharedRules[i].first <= n {
		return g.sharedRules[i], true
	}
	return sharedRange{}, false
}

// frag is a piece of a rule under construction: enter at start, leave
// through end (which gets epsilon edges to whatever follows).
type frag struct{ start, end int32 }

type builder struct {
	g   *Grammar
	err error
}

func (b *builder) node() int32 {
	if len(b.g.nodes) >= MaxNodes {
		if b.err == nil {
			b.err = genq.Errorf(genq.Invalid, "%s: it compiles to more than %d states", errTooLarge, MaxNodes)
		}
		// Keep building on a dummy node; the error ends the compile.
		return 0
	}
	b.g.nodes = append(b.g.nodes, node{call: -1, ret: -1})
	return int32(len(b.g.nodes) - 1)
}

func (b *builder) failed() bool { return b.err != nil }

func (b *builder) eps(from, to int32) {
	if b.err != nil {
		return
	}
	b.g.nodes[from].eps = append(b.g.nodes[from].eps, to)
}

func (b *builder) byteEdge(from int32, lo, hi byte, to int32) {
	if b.err != nil {
		return
	}
	b.g.nodes[from].edges = append(b.g.nodes[from].edges, edge{lo, hi, to})
}

// empty matches nothing (the empty string).
func (b *builder) empty() frag {
	n := b.node()
	return frag{n, n}
}

// lit matches exactly s.
func (b *builder) lit(s string) frag {
	start := b.node()
	cur := start
	for i := 0; i < len(s); i++ {
		next := b.node()
		b.byteEdge(cur, s[i], s[i], next)
		cur = next
	}
	return frag{start, cur}
}

// ranges matches one byte in any of the [lo,hi] pairs.
func (b *builder) ranges(r ...byte) frag {
	start, end := b.node(), b.node()
	for i := 0; i+1 < len(r); i += 2 {
		b.byteEdge(start, r[i], r[i+1], end)
	}
	return frag{start, end}
}

func (b *builder) seq(fs ...frag) frag {
	if len(fs) == 0 {
		return b.empty()
	}
	for i := 1; i < len(fs); i++ {
		b.eps(fs[i-1].end, fs[i].start)
	}
	return frag{fs[0].start, fs[len(fs)-1].end}
}

// alt matches any of fs; with none it matches nothing at all.
func (b *builder) alt(fs ...frag) frag {
	start, end := b.node(), b.node()
	for _, f := range fs {
		b.eps(start, f.start)
		b.eps(f.end, end)
	}
	return frag{start, end}
}

func (b *builder) opt(f frag) frag {
	b.eps(f.start, f.end)
	return f
}

// star matches f zero or more times. f must not match the empty string.
func (b *builder) star(f frag) frag {
	start := b.node()
	b.eps(start, f.start)
	b.eps(f.end, start)
	return frag{start, start}
}

// repeat matches between min and max copies of what mk builds; max < 0 is
// unbounded. Optional copies nest (a(b(c)?)?)?, so that each count has one path.
func (b *builder) repeat(min, max int, mk func() frag) frag {
	parts := make([]frag, 0, min+1)
	run := repeatRun{first: int32(len(b.g.nodes)), min: int32(min), max: int32(max)}
	recorded := len(b.g.repeats)
	var shape copyShape
	alike := true
	// next builds one more copy, checked against the first.
	next := func() frag {
		base := int32(len(b.g.nodes))
		f := mk()
		if !alike || b.failed() {
			return f
		}
		if len(run.bases) == 0 {
			shape = b.snapshot(base)
			run.size = int32(len(b.g.nodes)) - base
			alike = shape.consumes(f)
		} else {
			alike = b.sameShape(shape, base)
		}
		run.bases = append(run.bases, base)
		return f
	}
	for i := 0; i < min; i++ {
		parts = append(parts, next())
	}
	switch {
	case max < 0:
		parts = append(parts, b.star(mk()))
	case max > min:
		// Each optional copy is entered through its own choice node, which
		// may jump to the end instead.
		end := b.node()
		var prev int32 = -1
		first := int32(-1)
		for i := min; i < max && !b.failed(); i++ {
			f := next()
			choice := b.node()
			b.eps(choice, f.start)
			b.eps(choice, end)
			if first < 0 {
				first = choice
			}
			if prev >= 0 {
				b.eps(prev, choice)
			}
			prev = f.end
		}
		if prev >= 0 {
			b.eps(prev, end)
		}
		if first < 0 {
			first = end
		}
		parts = append(parts, frag{first, end})
	}
	run.last = int32(len(b.g.nodes))
	b.recordRepeat(run, alike, len(b.g.repeats) != recorded)
	return b.seq(parts...)
}

// newRule reserves a rule whose body is defined later (for recursion).
func (b *builder) newRule(name string) int32 {
	b.g.rules = append(b.g.rules, rule{start: -1, name: name})
	return int32(len(b.g.rules) - 1)
}

func (b *builder) define(r int32, f frag) {
	if b.err != nil {
		return
	}
	b.g.rules[r].start = f.start
	b.g.nodes[f.end].final = true
}

// call matches whatever rule r matches.
func (b *builder) call(r int32) frag {
	n, ret := b.node(), b.node()
	if b.err == nil {
		b.g.nodes[n].call = r
		b.g.nodes[n].ret = ret
	}
	return frag{n, ret}
}

// finish checks and trims a built grammar: a top rule that can match no
// string at all is an unsatisfiable schema; paths that can never complete
// (a required property whose schema is unsatisfiable, say) are cut, so that
// every state a Matcher reaches can still be completed; and a rule that can
// enter itself without consuming a byte (a $ref loop with nothing between)
// is refused, since no matcher could follow it.
func (b *builder) finish() error {
	if b.err != nil {
		return b.err
	}
	g := b.g
	// A node is productive when some path from it reaches a final node,
	// through productive calls; a rule when its start is. Worked out
	// backwards from the final nodes, each node and edge once.
	prod := make([]bool, len(g.nodes))
	ruleProd := make([]bool, len(g.rules))
	direct := make([][]int32, len(g.nodes))  // the nodes with an edge or ε to a node
	returns := make([][]int32, len(g.nodes)) // the call nodes that return to a node
	callers := make([][]int32, len(g.rules))
	starts := map[int32][]int32{} // the rules that start at a node
	var queue []int32
	for i := range g.nodes {
		n := &g.nodes[i]
		for _, e := range n.edges {
			direct[e.to] = append(direct[e.to], int32(i))
		}
		for _, t := range n.eps {
			direct[t] = append(direct[t], int32(i))
		}
		if n.call >= 0 {
			returns[n.ret] = append(returns[n.ret], int32(i))
			callers[n.call] = append(callers[n.call], int32(i))
		}
		if n.counted != nil && n.counted.min == 0 {
			// Zero copies are a way through: ret reached without the call.
			direct[n.ret] = append(direct[n.ret], int32(i))
		}
		if n.final {
			prod[i] = true
			queue = append(queue, int32(i))
		}
	}
	for r := range g.rules {
		if st := g.rules[r].start; st >= 0 {
			starts[st] = append(starts[st], int32(r))
		}
	}
	mark := func(i int32) {
		if !prod[i] {
			prod[i] = true
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		j := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, r := range starts[j] {
			if ruleProd[r] {
				continue
			}
			ruleProd[r] = true
			for _, i := range callers[r] {
				if prod[g.nodes[i].ret] {
					mark(i)
				}
			}
		}
		for _, i := range direct[j] {
			mark(i)
		}
		for _, i := range returns[j] {
			if ruleProd[g.nodes[i].call] {
				mark(i)
			}
		}
	}
	if !ruleProd[g.top] {
		return genq.Errorf(genq.Invalid, "the schema can never be satisfied: no JSON value matches it")
	}
	for i := range g.nodes {
		n := &g.nodes[i]
		edges := n.edges[:0]
		for _, e := range n.edges {
			if prod[e.to] {
				edges = append(edges, e)
			}
		}
		n.edges = edges
		eps := n.eps[:0]
		for _, t := range n.eps {
			if prod[t] {
				eps = append(eps, t)
			}
		}
		n.eps = eps
		if n.call >= 0 && !(ruleProd[n.call] && prod[n.ret]) {
			if n.counted != nil && n.counted.min == 0 && prod[n.ret] {
				n.eps = append(n.eps, n.ret) // only zero copies remain
			}
			n.call, n.ret, n.counted = -1, -1, nil
		}
		n.sortEdges()
	}
	return b.checkLeftRecursion()
}

// checkLeftRecursion refuses a rule that reaches a call of itself before
// any byte. Every rule matches at least one byte (a JSON value is never
// empty), so following epsilon edges and calls from each start is enough.
func (b *builder) checkLeftRecursion() error {
	g := b.g
	firstCalls := make([][]int32, len(g.rules))
	for r := range g.rules {
		seen := map[int32]bool{}
		stack := []int32{g.rules[r].start}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n < 0 || seen[n] {
				continue
			}
			seen[n] = true
			if g.nodes[n].final {
				return genq.Errorf(genq.Invalid, "the schema matches an empty value at %s", g.rules[r].name)
			}
			if c := g.nodes[n].call; c >= 0 {
				firstCalls[r] = append(firstCalls[r], c)
				if cs := g.nodes[n].counted; cs != nil && cs.min == 0 {
					stack = append(stack, g.nodes[n].ret)
				}
			}
			stack = append(stack, g.nodes[n].eps...)
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(g.rules))
	var visit func(r int32) error
	visit = func(r int32) error {
		color[r] = grey
		for _, c := range firstCalls[r] {
			switch color[c] {
			case grey:
				return genq.Errorf(genq.Invalid, "$ref %s refers back to itself before any value is written", g.rules[c].name)
			case white:
				if err := visit(c); err != nil {
					return err
				}
			}
		}
		color[r] = black
		return nil
	}
	for r := range g.rules {
		if color[r] == white {
			if err := visit(int32(r)); err != nil {
				return err
			}
		}
	}
	return nil
}
