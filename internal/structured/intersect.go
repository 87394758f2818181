package structured

import (
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// maxProductStates bounds the automaton of a string's constraints taken
// together; a product over it is refused as too large.
const maxProductStates = 4096

// scratchNFA is one constraint's automaton, built alone.
type scratchNFA struct {
	nodes      []node
	start, end int32
}

// intersect matches the JSON strings that every fragment of parts
// matches: a string with a pattern and a format, or a length bound, is
// held to all of them at once. Each part is built alone, in a grammar of
// its own, and the product of their automata is built by subset
// construction over bytes, so its states are tuples of the parts' state
// sets. Parts make no calls: string constraints never do.
func (c *compiler) intersect(parts []func() (frag, error)) (frag, error) {
	return c.product(parts, nil)
}

// product matches the JSON strings that every fragment of accept matches
// and no fragment of reject does: intersect, where a reject part's
// automaton may die (its string cannot match) and must not end where the
// string does. Reject parts are what tells a name that matches none of an
// object's patterns from one that matches some.
func (c *compiler) product(accept, reject []func() (frag, error)) (frag, error) {
	parts := append(slices.Clip(accept), reject...)
	machines := make([]scratchNFA, 0, len(parts))
	main := c.b
	for _, build := range parts {
		c.b = &builder{g: &Grammar{}}
		f, err := build()
		scratch := c.b
		c.b = main
		if err == nil {
			err = scratch.err
		}
		if err != nil {
			return frag{}, err
		}
		for _, n := range scratch.g.nodes {
			if n.call >= 0 {
				return frag{}, genq.Errorf(genq.Internal, "a string constraint calls a rule")
			}
		}
		machines = append(machines, scratchNFA{scratch.g.nodes, f.start, f.end})
	}

	type state struct {
		sets [][]int32
		node int32
	}
	key := func(sets [][]int32) string {
		var sb strings.Builder
		for _, s := range sets {
			for _, n := range s {
				sb.WriteString(strconv.Itoa(int(n)))
				sb.WriteByte(',')
			}
			sb.WriteByte('|')
		}
		return sb.String()
	}
	b := c.b
	end := b.node()
	byKey := map[string]*state{}
	var queue []*state
	add := func(sets [][]int32) *state {
		k := key(sets)
		if st, ok := byKey[k]; ok {
			return st
		}
		st := &state{sets: sets, node: b.node()}
		byKey[k] = st
		queue = append(queue, st)
		accepting := true
		for i, m := range machines {
			accepting = accepting && slices.Contains(sets[i], m.end) == (i < len(accept))
		}
		if accepting {
			b.eps(st.node, end)
		}
		return st
	}
	first := make([][]int32, len(machines))
	for i, m := range machines {
		first[i] = m.closure([]int32{m.start})
	}
	start := add(first)
	for len(queue) > 0 && !b.failed() {
		if len(byKey) > maxProductStates {
			return frag{}, genq.Errorf(genq.Invalid, "the string's pattern, format and length bounds together make an automaton of over %d states: drop one", maxProductStates)
		}
		st := queue[0]
		queue = queue[1:]
		var target *state // of the run of bytes being gathered
		lo := 0
		flush := func(hi int) {
			if target != nil {
				b.byteEdge(st.node, byte(lo), byte(hi), target.node)
			}
		}
		for ch := 0; ch < 256; ch++ {
			var next *state
			sets := make([][]int32, len(machines))
			for i, m := range machines {
				if sets[i] = m.step(st.sets[i], byte(ch)); len(sets[i]) == 0 && i < len(accept) {
					sets = nil
					break
				}
			}
			if sets != nil {
				next = add(sets)
			}
			if next != target {
				flush(ch - 1)
				target, lo = next, ch
			}
		}
		flush(255)
	}
	return frag{start.node, end}, b.err
}

// closure is the sorted set of nodes set reaches by epsilon edges.
func (m scratchNFA) closure(set []int32) []int32 {
	seen := map[int32]bool{}
	stack := append([]int32(nil), set...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, m.nodes[n].eps...)
	}
	out := make([]int32, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// step is the set the nodes of set reach on byte c.
func (m scratchNFA) step(set []int32, c byte) []int32 {
	var next []int32
	for _, n := range set {
		for _, e := range m.nodes[n].edges {
			if e.lo <= c && c <= e.hi {
				next = append(next, e.to)
			}
		}
	}
	if len(next) == 0 {
		return nil
	}
	return m.closure(next)
}
