package structured

// An object's members in order: their count (minProperties,
// maxProperties), what dependentRequired asks of them, and small objects
// whose members may come in any order.

import (
	"maps"
	"slices"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// memberChain builds an object's members in order, counting them up to
// what minProperties and maxProperties need, and remembering which
// properties dependentRequired ties to later ones were written: at holds
// the node of each state, a count k (the last count meaning that many or
// more where only a minimum is set; without either, 0 and 1 tell the first
// member, written without a comma, from the others) and a set of presence
// bits.
type memberChain struct {
	c        *compiler
	open     grammar.Frag
	at       map[chainKey]int32
	top      int
	min      int
	saturate bool
}

type chainKey struct {
	k    int
	bits uint64
}

// maxPresenceStates bounds the sets of written properties an object's
// automaton tells apart at one place for dependentRequired.
const maxPresenceStates = 64

func newMemberChain(c *compiler, min, max int) *memberChain {
	top, saturate := 1, true
	switch {
	case max >= 0:
		top, saturate = max, false
	case min > 1:
		top = min
	}
	ch := &memberChain{c: c, open: c.b.Seq(c.b.Lit("{"), c.ws()), at: map[chainKey]int32{}, top: top, min: min, saturate: saturate}
	ch.at[chainKey{}] = ch.open.End
	return ch
}

// next is the count after one more member; -1 where the maximum forbids it.
func (ch *memberChain) next(k int) int {
	switch {
	case k+1 <= ch.top:
		return k + 1
	case ch.saturate:
		return ch.top
	}
	return -1
}

// keys are the states in a fixed order, so that a schema always compiles
// to the same nodes.
func (ch *memberChain) keys() []chainKey {
	keys := make([]chainKey, 0, len(ch.at))
	for k := range ch.at {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y chainKey) int {
		if x.k != y.k {
			return x.k - y.k
		}
		return cmpUint64(x.bits, y.bits)
	})
	return keys
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// presence is what dependentRequired asks of one member: it may be
// written only where the bits need are all set (properties it depends on,
// written before it), and left out only where none of forbidSkip is set
// (properties written before it that depend on it). Written, it sets bit
// (none where negative); after it, only the bits of keep are remembered.
type presence struct {
	bit              int
	need, forbidSkip uint64
	keep             uint64
}

// step adds, from every state, one member r (after a comma but for the
// first), and keeps the states where optional.
func (ch *memberChain) step(r int32, optional bool, p presence) error {
	b := ch.c.b
	at := map[chainKey]int32{}
	node := func(k chainKey) int32 {
		k.bits &= p.keep
		if n, ok := at[k]; ok {
			return n
		}
		at[k] = b.Node()
		return at[k]
	}
	for _, key := range ch.keys() {
		n := ch.at[key]
		if optional && key.bits&p.forbidSkip == 0 {
			b.Eps(n, node(key))
		}
		k2 := ch.next(key.k)
		if k2 < 0 || key.bits&p.need != p.need {
			continue
		}
		f := b.Call(r)
		if key.k > 0 {
			f = b.Seq(ch.c.ws(), b.Lit(","), ch.c.ws(), f)
		}
		b.Eps(n, f.Start)
		to := chainKey{k2, key.bits}
		if p.bit >= 0 {
			to.bits |= 1 << p.bit
		}
		b.Eps(f.End, node(to))
	}
	ch.at = at
	sets := map[uint64]bool{}
	for k := range at {
		sets[k.bits] = true
	}
	if len(sets) > maxPresenceStates {
		return genq.Errorf(genq.Invalid, "dependentRequired ties together more properties than genq tells apart (%d sets of them at once)", maxPresenceStates)
	}
	return nil
}

// maxAnyOrder bounds the properties an object lists for them to be written
// in any order: the automaton tells apart every set of them written so
// far. An object that lists more writes them in the schema's order.
const maxAnyOrder = 6

// anyOrder adds, from the chain's start, the members of rules in any order,
// each at most once, and keeps the states where the set written is one
// closable allows, their sets forgotten: after them come other properties
// or the object's end.
func (ch *memberChain) anyOrder(rules []int32, closable func(set uint64) bool) {
	b := ch.c.b
	at := maps.Clone(ch.at)
	queue := ch.keys()
	for i := 0; i < len(queue) && !b.Failed(); i++ {
		key := queue[i]
		k2 := ch.next(key.k)
		if k2 < 0 || key.bits == 1<<len(rules)-1 {
			continue
		}
		from := at[key]
		if key.k > 0 {
			f := b.Call(ch.c.comma())
			b.Eps(from, f.Start)
			from = f.End
		}
		for j, r := range rules {
			if key.bits&(1<<j) != 0 {
				continue
			}
			to := chainKey{k2, key.bits | 1<<j}
			if _, ok := at[to]; !ok {
				at[to] = b.Node()
				queue = append(queue, to)
			}
			f := b.Call(r)
			b.Eps(from, f.Start)
			b.Eps(f.End, at[to])
		}
	}
	ch.at = map[chainKey]int32{}
	for _, key := range queue {
		if !closable(key.bits) {
			continue
		}
		to := chainKey{k: key.k}
		if _, ok := ch.at[to]; !ok {
			ch.at[to] = b.Node()
		}
		b.Eps(at[key], ch.at[to])
	}
}

// closable tells the sets of props (bit i for props.obj[i]) an object may
// end with: every required property, and where a property is, those it
// depends on.
func closable(props *value, required map[string]bool, deps []dependency) func(uint64) bool {
	pos := map[string]int{}
	var need uint64
	for i, m := range props.obj {
		pos[m.key] = i
		if required[m.key] {
			need |= 1 << i
		}
	}
	return func(set uint64) bool {
		if set&need != need {
			return false
		}
		for _, d := range deps {
			if set&(1<<pos[d.a]) != 0 && set&(1<<pos[d.b]) == 0 {
				return false
			}
		}
		return true
	}
}

// comma is the rule of the separator between two members or items.
func (c *compiler) comma() int32 {
	if c.commaRule < 0 {
		c.commaRule = c.b.NewRule("comma")
		c.b.Define(c.commaRule, c.b.Seq(c.ws(), c.b.Lit(","), c.ws()))
	}
	return c.commaRule
}

// member adds a listed property's member rule.
func (ch *memberChain) member(r int32, optional bool, p presence) error {
	return ch.step(r, optional, p)
}

// others adds up to n members of rule r, each optional.
func (ch *memberChain) others(r int32, n int) {
	b := ch.c.b
	keepAll := presence{bit: -1, keep: ^uint64(0)}
	// ends: after some of the n members, a state's node; fresh nodes, or
	// a member could lead back to before itself.
	ends := map[chainKey]int32{}
	end := func(k chainKey) int32 {
		if _, ok := ends[k]; !ok {
			ends[k] = b.Node()
		}
		return ends[k]
	}
	for _, k := range ch.keys() {
		b.Eps(ch.at[k], end(k))
	}
	for range n {
		ch.step(r, false, keepAll)
		for _, k := range ch.keys() {
			b.Eps(ch.at[k], end(k))
		}
	}
	ch.at = ends
}

// close ends the object where its count holds minProperties.
func (ch *memberChain) close() grammar.Frag {
	b := ch.c.b
	end := b.Node()
	for _, key := range ch.keys() {
		if key.k < ch.min {
			continue
		}
		cl := b.Lit("}")
		if key.k > 0 {
			cl = b.Seq(ch.c.ws(), b.Lit("}"))
		}
		b.Eps(ch.at[key], cl.Start)
		b.Eps(cl.End, end)
	}
	return grammar.Frag{Start: ch.open.Start, End: end}
}
