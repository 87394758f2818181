package structured

import (
	"encoding/binary"
	"slices"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// maxProductStates bounds the automaton of a string's constraints taken
// together; a product over it is refused as too large.
const maxProductStates = 4096

// scratchNFA is one constraint's automaton, built alone.
type scratchNFA struct {
	nodes      []grammar.Node
	start, end int32
	// The scratch space of closures: marks by generation, and buffers.
	seen                 []uint32
	gen                  uint32
	stack, scratch, next []int32
}

// intersect matches the JSON strings that every fragment of parts
// matches: a string with a pattern and a format, or a length bound, is
// held to all of them at once. Each part is built alone, in a grammar of
// its own, and the product of their automata is built by subset
// construction over bytes, so its states are tuples of the parts' state
// sets. Parts make no calls: string constraints never do.
func (c *compiler) intersect(parts []func() (grammar.Frag, error)) (grammar.Frag, error) {
	return c.product(parts, nil)
}

// product matches the JSON strings that every fragment of accept matches
// and no fragment of reject does: intersect, where a reject part's
// automaton may die (its string cannot match) and must not end where the
// string does. Reject parts are what tells a name that matches none of an
// object's patterns from one that matches some.
func (c *compiler) product(accept, reject []func() (grammar.Frag, error)) (grammar.Frag, error) {
	parts := append(slices.Clip(accept), reject...)
	machines := make([]scratchNFA, 0, len(parts))
	main := c.b
	for _, build := range parts {
		c.b = &grammar.Builder{Grammar: &grammar.Grammar{}}
		f, err := build()
		scratch := c.b
		c.b = main
		if err == nil {
			err = scratch.Err
		}
		if err != nil {
			return grammar.Frag{}, err
		}
		for _, n := range scratch.Grammar.Nodes {
			if n.Call >= 0 {
				return grammar.Frag{}, genq.Errorf(genq.Internal, "a string constraint calls a rule")
			}
		}
		machines = append(machines, scratchNFA{nodes: scratch.Grammar.Nodes, start: f.Start, end: f.End})
	}

	type state struct {
		ids  []int32 // each machine's set of nodes, interned
		node int32
	}
	subs := make([]*subsets, len(machines))
	for i := range machines {
		subs[i] = newSubsets(&machines[i])
	}
	key := func(ids []int32) string {
		buf := make([]byte, 0, 4*len(ids))
		for _, id := range ids {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(id))
		}
		return string(buf)
	}
	b := c.b
	end := b.Node()
	byKey := map[string]*state{}
	var queue []*state
	add := func(ids []int32) *state {
		k := key(ids)
		if st, ok := byKey[k]; ok {
			return st
		}
		st := &state{ids: slices.Clone(ids), node: b.Node()}
		byKey[k] = st
		queue = append(queue, st)
		accepting := true
		for i, s := range subs {
			accepting = accepting && s.final[ids[i]] == (i < len(accept))
		}
		if accepting {
			b.Eps(st.node, end)
		}
		return st
	}
	first := make([]int32, len(machines))
	for i, s := range subs {
		first[i] = s.id(machines[i].closure([]int32{machines[i].start}))
	}
	start := add(first)
	classes := byteClasses(machines)
	next := make([]int32, len(machines))
	for len(queue) > 0 && !b.Failed() {
		if len(byKey) > maxProductStates {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "the string's pattern, format and length bounds together make an automaton of over %d states: drop one", maxProductStates)
		}
		st := queue[0]
		queue = queue[1:]
		var target *state // of the run of bytes being gathered
		lo := 0
		flush := func(hi int) {
			if target != nil {
				b.ByteEdge(st.node, byte(lo), byte(hi), target.node)
			}
		}
		for ci, cl := range classes {
			var to *state
			alive := true
			for i, s := range subs {
				if next[i] = s.move(st.ids[i], ci, cl.lo); next[i] == 0 && i < len(accept) {
					alive = false
					break
				}
			}
			if alive {
				to = add(next)
			}
			if to != target {
				flush(int(cl.lo) - 1)
				target, lo = to, int(cl.lo)
			}
		}
		flush(255)
		work := 0
		for _, s := range subs {
			work += s.work
		}
		if work > maxProductWork {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "%s: the string's pattern, format and length bounds together take over %d steps to combine", grammar.TooLarge, maxProductWork)
		}
	}
	return grammar.Frag{Start: start.node, End: end}, b.Err
}

// subsets interns one machine's sets of nodes, as the product meets them,
// and their moves over each byte class: the product's states are tuples
// of a few sets each machine reaches over and over.
type subsets struct {
	m     *scratchNFA
	ids   map[string]int32
	sets  [][]int32
	final []bool    // by id: the set holds the machine's end
	moves [][]int32 // by id and byte class: the next set's id; -1 not yet known
	work  int       // nodes stepped: the product's bound counts them
}

func newSubsets(m *scratchNFA) *subsets {
	s := &subsets{m: m, ids: map[string]int32{}}
	s.id(nil) // id 0: the empty set, where the machine died
	return s
}

func (s *subsets) id(set []int32) int32 {
	buf := make([]byte, 0, 4*len(set))
	for _, n := range set {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(n))
	}
	if id, ok := s.ids[string(buf)]; ok {
		return id
	}
	id := int32(len(s.final))
	s.ids[string(buf)] = id
	s.final = append(s.final, slices.Contains(set, s.m.end))
	s.moves = append(s.moves, nil)
	s.sets = append(s.sets, set)
	return id
}

// move is the set that set id reaches over byte class ci, whose first
// byte is c.
func (s *subsets) move(id int32, ci int, c byte) int32 {
	if s.moves[id] == nil {
		s.moves[id] = make([]int32, 256)
		for i := range s.moves[id] {
			s.moves[id][i] = -1
		}
	}
	if to := s.moves[id][ci]; to >= 0 {
		return to
	}
	set := s.sets[id]
	s.work += len(set) + 1
	to := s.id(s.m.step(set, c))
	s.moves[id][ci] = to
	return to
}

// maxProductWork bounds a product's steps (a state's NFA nodes, times the
// byte classes it is stepped over), so that its compile stays within a
// bounded time whatever its states hold.
const maxProductWork = 4_000_000

// byteClass is a run of bytes that every machine's edges treat alike.
type byteClass struct{ lo, hi byte }

// byteClasses splits the bytes where some machine's edge starts or ends:
// stepping once per class is stepping once per byte, a fraction of the
// work (a JSON string's automata tell some 30 classes apart, not 256).
func byteClasses(machines []scratchNFA) []byteClass {
	var cut [257]bool
	cut[0], cut[256] = true, true
	for _, m := range machines {
		for _, n := range m.nodes {
			for _, e := range n.Edges {
				cut[e.Lo], cut[int(e.Hi)+1] = true, true
			}
		}
	}
	var out []byteClass
	lo := 0
	for c := 1; c <= 256; c++ {
		if cut[c] {
			out = append(out, byteClass{byte(lo), byte(c - 1)})
			lo = c
		}
	}
	return out
}

// closure is the sorted set of nodes set reaches by epsilon edges.
func (m *scratchNFA) closure(set []int32) []int32 {
	if len(m.seen) < len(m.nodes) {
		m.seen = make([]uint32, len(m.nodes))
	}
	m.gen++
	if m.gen == 0 {
		clear(m.seen)
		m.gen = 1
	}
	out := m.stack[:0]
	stack := append(m.scratch[:0], set...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if m.seen[n] == m.gen {
			continue
		}
		m.seen[n] = m.gen
		out = append(out, n)
		stack = append(stack, m.nodes[n].Eps...)
	}
	m.scratch, m.stack = stack, out
	slices.Sort(out)
	return slices.Clone(out)
}

// step is the set the nodes of set reach on byte c.
func (m *scratchNFA) step(set []int32, c byte) []int32 {
	next := m.next[:0]
	for _, n := range set {
		for _, e := range m.nodes[n].Edges {
			if e.Lo <= c && c <= e.Hi {
				next = append(next, e.To)
			}
		}
	}
	m.next = next
	if len(next) == 0 {
		return nil
	}
	return m.closure(next)
}
