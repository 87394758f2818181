// Package grammar is the runtime of constrained decoding: a grammar over
// bytes (a recursive transition network: one small NFA per rule, with calls
// between rules for nesting and recursion) that a compiler builds through
// Builder, a Matcher that follows the bytes generated so far, and Mask,
// which tells which tokens of a model's vocabulary may come next.
//
// The package is pure Go and knows nothing of models, HTTP, queues or JSON
// Schema: internal/structured compiles schemas to grammars, and the sampler
// owns one Matcher per constrained sequence and a Vocab per model.
package grammar

import (
	"iter"
	"slices"
	"sort"
	"sync"

	"github.com/genq/genq/internal/genq"
)

// Limits on what one grammar may cost. A schema over them is refused as
// too large rather than compiled slowly or held in memory: MaxNodes bounds
// the compile's work, whatever the machine's load (its time at the bound:
// docs/text.md, "Compile time is bounded by work").
const (
	MaxNodes  = 100_000 // automaton nodes once compiled
	MaxRepeat = 1024    // minItems, maxItems, minLength, maxLength
)

// Edge is a byte transition: any byte in [Lo, Hi] leads to node To.
type Edge struct {
	Lo, Hi byte
	// Tick says the byte begins a character that the length region
	// around the edge counts (region.go).
	Tick bool
	To   int32
}

// Node is a state of one rule's NFA. A node may have byte edges, epsilon
// edges, a call (enter rule call, come back at ret) and be the rule's end.
type Node struct {
	Edges []Edge
	Eps   []int32
	Call  int32 // rule entered from here, or -1
	ret   int32 // where the call comes back
	final bool  // the rule may end here
	// sorted says edges are in byte order and disjoint: a step finds its
	// edge by bisection (a product's states have tens of edges).
	sorted bool
	// counted, when set, makes the call a counted repeat of rule call
	// (counter.go): its count rides on the stack, not in unrolled states.
	counted *countSpec
	// region, when set, makes the call a length region over rule call
	// (region.go); inRegion marks the nodes of such a rule's body.
	region   *regionSpec
	inRegion bool
	// checked makes the call a checked call (check.go); check marks a
	// checked call's return node with its test.
	checked bool
	check   *checkSpec
}

// minSortedEdges is the fewest edges worth a bisection.
const minSortedEdges = 6

// sortEdges orders n's edges by byte and marks them sorted when no two
// overlap; overlapping edges (an NFA's) stay as they are. The order is
// worked out in scratch, which it returns for the next node.
func (n *Node) sortEdges(scratch []Edge) []Edge {
	if len(n.Edges) < minSortedEdges {
		return scratch
	}
	sorted := append(scratch[:0], n.Edges...)
	slices.SortFunc(sorted, func(a, b Edge) int { return int(a.Lo) - int(b.Lo) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Lo <= sorted[i-1].Hi {
			return sorted
		}
	}
	copy(n.Edges, sorted)
	n.sorted = true
	return sorted
}

// edgeFor is the edge of sorted n that byte c takes, if any.
func (n *Node) edgeFor(c byte) (Edge, bool) {
	lo, hi := 0, len(n.Edges)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if n.Edges[mid].Hi < c {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(n.Edges) && n.Edges[lo].Lo <= c {
		return n.Edges[lo], true
	}
	return Edge{}, false
}

type rule struct {
	start int32
	name  string
}

// Grammar is a compiled schema: rules of byte NFAs. It is immutable once
// compiled and safe for concurrent use; Matchers hold the per-sequence state.
type Grammar struct {
	Nodes []Node
	Rules []rule
	Top   int32 // the rule a whole answer must match
	// BuiltinNodes counts the nodes every grammar starts with, identical
	// in all grammars, so that their token masks are shared per Vocab.
	BuiltinNodes int32
	// SharedRules are the rules whose masks are kept per Vocab by key
	// (strings with bounds or patterns), in node order.
	SharedRules []SharedRange
	tables      tableSet
	// repeats are the bounded repeats whose copies share masks (canon),
	// in node order.
	repeats []repeatRun
	// RelaxedTools are the tools whose schemas were relaxed to compile
	// (internal/structured's relax.go), by name; nil when every schema is
	// held to exactly.
	RelaxedTools map[string]*RelaxedTool
	// order is the nodes in the order Prepare works their masks out.
	orderOnce sync.Once
	order     []int32
	regionOf  map[int32]int32 // a length region's nodes: its call node
	// tail marks the nodes from which a rule can only end (endsRule).
	tailOnce sync.Once
	tail     []bool
	// checked says some call is checked (check.go): matchers keep the
	// bytes of open checked calls, and masks are filtered.
	checked bool
}

// SharedRange is a rule built alone on nodes [first, end).
type SharedRange struct {
	Key        string
	First, End int32
}

// sharedRule returns the shared rule that node n belongs to, if any.
func (g *Grammar) sharedRule(n int32) (SharedRange, bool) {
	i := sort.Search(len(g.SharedRules), func(i int) bool { return g.SharedRules[i].End > n })
	if i < len(g.SharedRules) && g.SharedRules[i].First <= n {
		return g.SharedRules[i], true
	}
	return SharedRange{}, false
}

// Frag is a piece of a rule under construction: enter at Start, leave
// through End (which gets epsilon edges to whatever follows).
type Frag struct{ Start, End int32 }

// Builder builds a Grammar's rules for a compiler. Its first error (a
// grammar past MaxNodes) is kept in Err and makes later steps no-ops,
// so that a compiler checks once, at Finish.
type Builder struct {
	Grammar *Grammar
	Err     error
	// edges and eps are slabs the first edge and epsilon of each node are
	// cut from: most nodes have one or two of each, and one small
	// allocation apiece was most of a large schema's compile.
	edges []Edge
	eps   []int32
}

// slabSize is how many edges or epsilons one slab holds.
const slabSize = 1024

// Node adds a node with no edges.
func (b *Builder) Node() int32 {
	g := b.Grammar
	if len(g.Nodes) >= MaxNodes {
		if b.Err == nil {
			b.Err = genq.Errorf(genq.Invalid, "%s: it compiles to more than %d states", TooLarge, MaxNodes)
		}
		// Keep building on a dummy node; the error ends the compile.
		return 0
	}
	if len(g.Nodes) == cap(g.Nodes) {
		// Doubling: append grows a large slice by a quarter, which copied
		// (and had the collector scan) a large grammar's nodes many times.
		grown := make([]Node, len(g.Nodes), min(max(2*cap(g.Nodes), 256), MaxNodes))
		copy(grown, g.Nodes)
		g.Nodes = grown
	}
	g.Nodes = append(g.Nodes, Node{Call: -1, ret: -1})
	return int32(len(g.Nodes) - 1)
}

// slabSlot is room for a node's first two edges or epsilons, cut from
// *slab (a new slab when it is full); a third grows the node's own slice
// as append does.
func slabSlot[T any](slab *[]T) []T {
	if cap(*slab)-len(*slab) < 2 {
		*slab = make([]T, 0, slabSize)
	}
	i := len(*slab)
	*slab = (*slab)[:i+2]
	return (*slab)[i : i : i+2]
}

// Failed says the build has failed: what follows is wasted work.
func (b *Builder) Failed() bool { return b.Err != nil }

// Eps adds an epsilon edge.
func (b *Builder) Eps(from, to int32) {
	if b.Err != nil {
		return
	}
	n := &b.Grammar.Nodes[from]
	if n.Eps == nil {
		n.Eps = slabSlot(&b.eps)
	}
	n.Eps = append(n.Eps, to)
}

// ByteEdge adds an edge on the bytes lo to hi.
func (b *Builder) ByteEdge(from int32, lo, hi byte, to int32) {
	if b.Err != nil {
		return
	}
	n := &b.Grammar.Nodes[from]
	if n.Edges == nil {
		n.Edges = slabSlot(&b.edges)
	}
	n.Edges = append(n.Edges, Edge{Lo: lo, Hi: hi, To: to})
}

// Empty matches nothing (the empty string).
func (b *Builder) Empty() Frag {
	n := b.Node()
	return Frag{n, n}
}

// Lit matches exactly s.
func (b *Builder) Lit(s string) Frag {
	start := b.Node()
	cur := start
	for i := 0; i < len(s); i++ {
		next := b.Node()
		b.ByteEdge(cur, s[i], s[i], next)
		cur = next
	}
	return Frag{start, cur}
}

// Ranges matches one byte in any of the [lo,hi] pairs.
func (b *Builder) Ranges(r ...byte) Frag {
	start, end := b.Node(), b.Node()
	for i := 0; i+1 < len(r); i += 2 {
		b.ByteEdge(start, r[i], r[i+1], end)
	}
	return Frag{start, end}
}

// Seq matches fs one after another.
func (b *Builder) Seq(fs ...Frag) Frag {
	if len(fs) == 0 {
		return b.Empty()
	}
	for i := 1; i < len(fs); i++ {
		b.Eps(fs[i-1].End, fs[i].Start)
	}
	return Frag{fs[0].Start, fs[len(fs)-1].End}
}

// Alt matches any of fs; with none it matches nothing at all.
func (b *Builder) Alt(fs ...Frag) Frag {
	start, end := b.Node(), b.Node()
	for _, f := range fs {
		b.Eps(start, f.Start)
		b.Eps(f.End, end)
	}
	return Frag{start, end}
}

// Opt matches f or nothing.
func (b *Builder) Opt(f Frag) Frag {
	b.Eps(f.Start, f.End)
	return f
}

// Star matches f zero or more times. f must not match the empty string.
func (b *Builder) Star(f Frag) Frag {
	start := b.Node()
	b.Eps(start, f.Start)
	b.Eps(f.End, start)
	return Frag{start, start}
}

// Repeat matches between min and max copies of what mk builds; max < 0 is
// unbounded. Optional copies nest (a(b(c)?)?)?, so that each count has one path.
func (b *Builder) Repeat(min, max int, mk func() Frag) Frag {
	parts := make([]Frag, 0, min+1)
	run := repeatRun{first: int32(len(b.Grammar.Nodes)), min: int32(min), max: int32(max)}
	recorded := len(b.Grammar.repeats)
	var shape copyShape
	alike := true
	// next builds one more copy, checked against the first.
	next := func() Frag {
		base := int32(len(b.Grammar.Nodes))
		f := mk()
		if !alike || b.Failed() {
			return f
		}
		if len(run.bases) == 0 {
			shape = b.snapshot(base)
			run.size = int32(len(b.Grammar.Nodes)) - base
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
		parts = append(parts, b.Star(mk()))
	case max > min:
		// Each optional copy is entered through its own choice node, which
		// may jump to the end instead.
		end := b.Node()
		var prev int32 = -1
		first := int32(-1)
		for i := min; i < max && !b.Failed(); i++ {
			f := next()
			choice := b.Node()
			b.Eps(choice, f.Start)
			b.Eps(choice, end)
			if first < 0 {
				first = choice
			}
			if prev >= 0 {
				b.Eps(prev, choice)
			}
			prev = f.End
		}
		if prev >= 0 {
			b.Eps(prev, end)
		}
		if first < 0 {
			first = end
		}
		parts = append(parts, Frag{first, end})
	}
	run.last = int32(len(b.Grammar.Nodes))
	b.recordRepeat(run, alike, len(b.Grammar.repeats) != recorded)
	return b.Seq(parts...)
}

// NewRule reserves a rule whose body is defined later (for recursion).
func (b *Builder) NewRule(name string) int32 {
	b.Grammar.Rules = append(b.Grammar.Rules, rule{start: -1, name: name})
	return int32(len(b.Grammar.Rules) - 1)
}

// Define makes f the body of rule r.
func (b *Builder) Define(r int32, f Frag) {
	if b.Err != nil {
		return
	}
	b.Grammar.Rules[r].start = f.Start
	b.Grammar.Nodes[f.End].final = true
}

// Call matches whatever rule r matches.
func (b *Builder) Call(r int32) Frag {
	n, ret := b.Node(), b.Node()
	if b.Err == nil {
		b.Grammar.Nodes[n].Call = r
		b.Grammar.Nodes[n].ret = ret
	}
	return Frag{n, ret}
}

// Finish checks and trims a built grammar: a top rule that can match no
// string at all is an unsatisfiable schema; paths that can never complete
// (a required property whose schema is unsatisfiable, say) are cut, so that
// every state a Matcher reaches can still be completed; and a rule that can
// enter itself without consuming a byte (a $ref loop with nothing between)
// is refused, since no matcher could follow it.
func (b *Builder) Finish() error {
	if b.Err != nil {
		return b.Err
	}
	g := b.Grammar
	if cap(g.Nodes) > len(g.Nodes)+len(g.Nodes)/4 {
		g.Nodes = slices.Clone(g.Nodes) // give back what doubling left unused
	}
	// A node is productive when some path from it reaches a final node,
	// through productive calls; a rule when its start is. Worked out
	// backwards from the final nodes, each node and edge once.
	prod := make([]bool, len(g.Nodes))
	ruleProd := make([]bool, len(g.Rules))
	// direct: the nodes with an edge or ε to a node; returns: the call
	// nodes that return to a node.
	direct := invert(len(g.Nodes), func(add func(to, from int32)) {
		for i := range g.Nodes {
			n := &g.Nodes[i]
			for _, e := range n.Edges {
				add(e.To, int32(i))
			}
			for _, t := range n.Eps {
				add(t, int32(i))
			}
			if n.counted != nil && n.counted.min == 0 {
				// Zero copies are a way through: ret reached without the call.
				add(n.ret, int32(i))
			}
		}
	})
	returns := invert(len(g.Nodes), func(add func(to, from int32)) {
		for i := range g.Nodes {
			if n := &g.Nodes[i]; n.Call >= 0 {
				add(n.ret, int32(i))
			}
		}
	})
	callers := make([][]int32, len(g.Rules))
	starts := invert(len(g.Nodes), func(add func(to, from int32)) { // the rules that start at a node
		for r := range g.Rules {
			if st := g.Rules[r].start; st >= 0 {
				add(st, int32(r))
			}
		}
	})
	var queue []int32
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Call >= 0 {
			callers[n.Call] = append(callers[n.Call], int32(i))
		}
		if n.final {
			prod[i] = true
			queue = append(queue, int32(i))
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
		for _, r := range starts.of(j) {
			if ruleProd[r] {
				continue
			}
			ruleProd[r] = true
			for _, i := range callers[r] {
				if prod[g.Nodes[i].ret] {
					mark(i)
				}
			}
		}
		for _, i := range direct.of(j) {
			mark(i)
		}
		for _, i := range returns.of(j) {
			if ruleProd[g.Nodes[i].Call] {
				mark(i)
			}
		}
	}
	if !ruleProd[g.Top] {
		return genq.Errorf(genq.Invalid, "the schema can never be satisfied: no JSON value matches it")
	}
	var scratch []Edge
	for i := range g.Nodes {
		n := &g.Nodes[i]
		edges := n.Edges[:0]
		for _, e := range n.Edges {
			if prod[e.To] {
				edges = append(edges, e)
			}
		}
		n.Edges = edges
		eps := n.Eps[:0]
		for _, t := range n.Eps {
			if prod[t] {
				eps = append(eps, t)
			}
		}
		n.Eps = eps
		if n.Call >= 0 && !(ruleProd[n.Call] && prod[n.ret]) {
			if n.counted != nil && n.counted.min == 0 && prod[n.ret] {
				n.Eps = append(n.Eps, n.ret) // only zero copies remain
			}
			n.Call, n.ret, n.counted, n.region, n.checked = -1, -1, nil, nil, false
		}
		scratch = n.sortEdges(scratch)
	}
	return b.checkLeftRecursion()
}

// adjacency lists, for each node, the nodes of a relation to it: one
// array and offsets into it, not a slice per node.
type adjacency struct{ off, list []int32 }

func (a adjacency) of(n int32) []int32 { return a.list[a.off[n]:a.off[n+1]] }

// invert builds the adjacency of the pairs visit adds, in two passes
// over them: counting, then filling.
func invert(n int, visit func(add func(to, from int32))) adjacency {
	off := make([]int32, n+2)
	visit(func(to, _ int32) { off[to+2]++ })
	for i := 2; i < len(off); i++ {
		off[i] += off[i-1]
	}
	list := make([]int32, off[n+1])
	visit(func(to, from int32) {
		list[off[to+1]] = from
		off[to+1]++
	})
	return adjacency{off[:n+1], list}
}

// checkLeftRecursion refuses a rule that reaches a call of itself before
// any byte. Every rule matches at least one byte (a JSON value is never
// empty), so following epsilon edges and calls from each start is enough.
func (b *Builder) checkLeftRecursion() error {
	g := b.Grammar
	firstCalls := make([][]int32, len(g.Rules))
	for r := range g.Rules {
		seen := map[int32]bool{}
		stack := []int32{g.Rules[r].start}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n < 0 || seen[n] {
				continue
			}
			seen[n] = true
			if g.Nodes[n].final {
				return genq.Errorf(genq.Invalid, "the schema matches an empty value at %s", g.Rules[r].name)
			}
			if c := g.Nodes[n].Call; c >= 0 {
				firstCalls[r] = append(firstCalls[r], c)
				if cs := g.Nodes[n].counted; cs != nil && cs.min == 0 {
					stack = append(stack, g.Nodes[n].ret)
				}
			}
			stack = append(stack, g.Nodes[n].Eps...)
		}
	}
	if c := cycleAt(len(g.Rules), func(r int32) iter.Seq[int32] { return slices.Values(firstCalls[r]) }); c >= 0 {
		return genq.Errorf(genq.Invalid, "$ref %s refers back to itself before any value is written", g.Rules[c].name)
	}
	return nil
}
