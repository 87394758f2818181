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
// sets, then minimized (productDFA.minimize). Parts make no calls: string
// constraints never do.
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

	subs := make([]*subsets, len(machines))
	for i := range machines {
		subs[i] = newSubsets(&machines[i])
	}
	d, err := explore(subs, len(accept), byteClasses(machines))
	if err != nil {
		return grammar.Frag{}, err
	}
	return d.emit(c.b, d.minimize()), c.b.Err
}

// productDFA is a product's states as subset construction met them (the
// start first) and their moves over each byte class.
type productDFA struct {
	classes   []byteClass
	accepting []bool
	moves     [][]int32 // by state and class: the next state, or -1
}

// explore builds the product of subs' machines by subset construction
// over classes: a state is a tuple of the machines' sets of nodes, and
// accepts where each of the first nAccept machines ends and none of the
// others does.
func explore(subs []*subsets, nAccept int, classes []byteClass) (*productDFA, error) {
	d := &productDFA{classes: classes}
	byKey := map[string]int32{}
	var tuples [][]int32
	key := func(ids []int32) string {
		buf := make([]byte, 0, 4*len(ids))
		for _, id := range ids {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(id))
		}
		return string(buf)
	}
	add := func(ids []int32) int32 {
		k := key(ids)
		if st, ok := byKey[k]; ok {
			return st
		}
		st := int32(len(tuples))
		byKey[k] = st
		tuples = append(tuples, slices.Clone(ids))
		accepting := true
		for i, s := range subs {
			accepting = accepting && s.final[ids[i]] == (i < nAccept)
		}
		d.accepting = append(d.accepting, accepting)
		return st
	}
	first := make([]int32, len(subs))
	for i, s := range subs {
		first[i] = s.id(s.m.closure([]int32{s.m.start}))
	}
	add(first)
	next := make([]int32, len(subs))
	for st := 0; st < len(tuples); st++ {
		if len(tuples) > maxProductStates {
			return nil, genq.Errorf(genq.Invalid, "the string's pattern, format and length bounds together make an automaton of over %d states: drop one", maxProductStates)
		}
		moves := make([]int32, len(classes))
		for ci, cl := range classes {
			moves[ci] = -1
			alive := true
			for i, s := range subs {
				if next[i] = s.move(tuples[st][i], ci, cl.lo); next[i] == 0 && i < nAccept {
					alive = false
					break
				}
			}
			if alive {
				moves[ci] = add(next)
			}
		}
		d.moves = append(d.moves, moves)
		work := 0
		for _, s := range subs {
			work += s.work
		}
		if work > maxProductWork {
			return nil, genq.Errorf(genq.Invalid, "%s: the string's pattern, format and length bounds together take over %d steps to combine", grammar.TooLarge, maxProductWork)
		}
	}
	return d, nil
}

// minimize merges the states no string tells apart (Moore's partition
// refinement: states split while their moves lead to different blocks)
// and returns each state's block, numbered in the order of their first
// states, so the start's is 0. Subset construction leaves many such
// states (a name's start and the state after a letter that advances no
// pattern), and each would be a node of its own, its mask a walk of the
// vocabulary of its own. Past minimizeWork steps the states stay apart:
// the product is as exact, only larger.
func (d *productDFA) minimize() []int32 {
	n := len(d.moves)
	d.trim()
	block := make([]int32, n)
	for s := range block {
		if d.accepting[s] {
			block[s] = 1
		}
	}
	blocks := renumber(block)
	sig := make([]byte, 0, 4*(len(d.classes)+1))
	for work := 0; ; work += n * (len(d.classes) + 1) {
		if work > minimizeWork {
			return identity(n)
		}
		ids := map[string]int32{}
		next := make([]int32, n)
		for s := range n {
			sig = binary.LittleEndian.AppendUint32(sig[:0], uint32(block[s]))
			for _, t := range d.moves[s] {
				b := int32(-1)
				if t >= 0 {
					b = block[t]
				}
				sig = binary.LittleEndian.AppendUint32(sig, uint32(b))
			}
			id, ok := ids[string(sig)]
			if !ok {
				id = int32(len(ids))
				ids[string(sig)] = id
			}
			next[s] = id
		}
		block = next
		if len(ids) == blocks {
			return block
		}
		blocks = len(ids)
	}
}

// trim removes the moves into states from which no string is accepted
// (a name that matched a pattern it must not match): all of them accept
// the same nothing, as a move that is not there does, and left in they
// would tell apart states that no string does.
func (d *productDFA) trim() {
	n := len(d.moves)
	into := make([][]int32, n)
	for s, moves := range d.moves {
		for _, t := range moves {
			if t >= 0 {
				into[t] = append(into[t], int32(s))
			}
		}
	}
	live := slices.Clone(d.accepting)
	var queue []int32
	for s, ok := range live {
		if ok {
			queue = append(queue, int32(s))
		}
	}
	for len(queue) > 0 {
		t := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, s := range into[t] {
			if !live[s] {
				live[s] = true
				queue = append(queue, s)
			}
		}
	}
	for _, moves := range d.moves {
		for ci, t := range moves {
			if t >= 0 && !live[t] {
				moves[ci] = -1
			}
		}
	}
}

// minimizeWork bounds minimize's steps (states times classes, per round):
// a product whose states need more rounds to tell apart (a long chain of
// counted characters) is kept as built.
const minimizeWork = 4_000_000

// renumber numbers block's values in the order they first appear and
// returns how many there are.
func renumber(block []int32) int {
	ids := map[int32]int32{}
	for s, b := range block {
		id, ok := ids[b]
		if !ok {
			id = int32(len(ids))
			ids[b] = id
		}
		block[s] = id
	}
	return len(ids)
}

func identity(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// emit builds the product's blocks as nodes of b: a node per block, its
// edges runs of bytes that lead to one block, an epsilon to the end
// where it accepts.
func (d *productDFA) emit(b *grammar.Builder, block []int32) grammar.Frag {
	end := b.Node()
	var nodes []int32
	for s, bl := range block {
		if int(bl) < len(nodes) {
			continue // built from the block's first state
		}
		nodes = append(nodes, b.Node())
		if d.accepting[s] {
			b.Eps(nodes[bl], end)
		}
	}
	done := make([]bool, len(nodes))
	for s, bl := range block {
		if done[bl] {
			continue
		}
		done[bl] = true
		target, lo := int32(-1), 0
		flush := func(hi int) {
			if target >= 0 {
				b.ByteEdge(nodes[bl], byte(lo), byte(hi), nodes[block[target]])
			}
		}
		for ci, cl := range d.classes {
			to := d.moves[s][ci]
			if to >= 0 && target >= 0 && block[to] == block[target] {
				continue
			}
			if to != target {
				flush(int(cl.lo) - 1)
				target, lo = to, int(cl.lo)
			}
		}
		flush(255)
	}
	return grammar.Frag{Start: nodes[0], End: end}
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
