package grammar

import (
	"encoding/binary"
	"slices"
	"strings"
	"time"
)

// A state may stand on many nodes whose masks are not worked out yet: a
// pattern's "." is alternatives of characters (plain, UTF-8, escaped), a
// trie of keys branches at once. Each node's mask alone is a walk of
// the vocabulary, tens of them a tenth of a second. The nodes of one
// table on one frame are walked together instead, once: the threads of
// all of them share the trie's nodes, and most die at the first byte.
// What they allow together is kept with their table under the set of
// their nodes (tableMemo.sets), so the next step in the same state finds
// it; the nodes' own masks come later, from Prepare or the background.

// groupKey is a table and a frame: masks that may be walked together.
type groupKey struct {
	tab *nodeTable
	st  *frame
}

// maskGroups works out and applies to dst, together, the masks not yet
// known of m's configs that share a table and a frame, then those of the
// configs left alone in theirs (stackMask), and reports which configs it
// did (nil: none).
func (m *Matcher) maskGroups(v *Vocab, t *nodeTable, dst []uint64) []bool {
	if len(m.cur) < 2 {
		return nil
	}
	var groups map[groupKey][]int
	for i, cf := range m.cur {
		if m.isLoop(cf) {
			continue // its mask depends on the count (countedMask)
		}
		tab, rel, _ := m.slotOf(v, t, m.st.g.canon(cf.node, v.maxLen))
		if tab.pinned || tab.masks[rel].Load() != nil {
			continue
		}
		if groups == nil {
			groups = map[groupKey][]int{}
		}
		k := groupKey{tab, cf.st}
		groups[k] = append(groups[k], i)
	}
	var done []bool
	mark := func(idx []int) {
		if done == nil {
			done = make([]bool, len(m.cur))
		}
		for _, i := range idx {
			done[i] = true
		}
	}
	// Configs alone in their table and frame, walked together below
	// (stackMask keys them in an order of its own, so the map's order,
	// which differs from run to run, does not matter).
	var rest []int
	for k, idx := range groups {
		if len(idx) < 2 {
			if m.st.g.wide(m.cur[idx[0]].node) {
				rest = append(rest, idx[0])
			}
			continue
		}
		m.apply(v, m.groupMask(v, t, k.tab, idx), k.st, dst)
		mark(idx)
	}
	if len(rest) >= 2 {
		nm, below := m.stackMask(v, t, rest)
		m.apply(v, nm, below, dst)
		mark(rest)
	}
	return done
}

// wideBytes is the first bytes a node takes from which its walk covers
// most of the trie: a string's character takes some 150.
const wideBytes = 128

// wide tells a node that takes at least wideBytes first bytes. Only such
// nodes are walked down their stacks together (stackMask): there the
// walks of each would cover the same trie nodes, while a narrow node's
// walk is short, and alone on its frame it finds what walks of the same
// rule kept (walker.walkFirst), which a walk down a stack cannot.
func (g *Grammar) wide(n int32) bool {
	taken := 0
	for _, e := range g.Nodes[n].Edges {
		taken += int(e.Hi) - int(e.Lo) + 1
	}
	return taken >= wideBytes
}

// stackMask is what the configs idx of m.cur, each alone in its table
// and frame, allow together, and the frame below all of their stacks
// that the mask's escapes return through. Such configs are the rules an
// object's name may begin: one per patternProperties pattern for the
// names it alone matches, one for those no pattern matches, each a
// shared rule with a table of its own, called from a member of its own;
// every one of them takes most of the vocabulary. Walked one at a time
// they cost a walk of the vocabulary each; walked together, each on its
// stack down to the frame they share, one. What they allow together is
// kept with the grammar's own table (the frames' returns are its
// nodes), under their nodes and stacks.
func (m *Matcher) stackMask(v *Vocab, t *nodeTable, idx []int) (*nodeMask, *frame) {
	below := m.cur[idx[0]].st
	for _, i := range idx[1:] {
		below = commonFrame(below, m.cur[i].st)
	}
	rebased := map[*frame]*frame{below: m.st.bottom}
	// Each config's key: its node and the returns and counts of its
	// frames. Walked in the keys' order, the same configs make the same
	// sets after each byte, which the walks' memo and DFA key on.
	type keyed struct {
		key string
		c   config
	}
	var cs []keyed
	for _, i := range idx {
		cf := m.cur[i]
		c := config{m.st.g.canon(cf.node, v.maxLen), m.st.rebase(cf.st, rebased)}
		k := binary.LittleEndian.AppendUint32(nil, uint32(c.node))
		for f := c.st; f != m.st.bottom; f = f.up {
			k = binary.LittleEndian.AppendUint32(k, uint32(f.ret))
			k = binary.LittleEndian.AppendUint32(k, uint32(f.count))
		}
		cs = append(cs, keyed{string(binary.LittleEndian.AppendUint32(k, ^uint32(0))), c})
	}
	slices.SortFunc(cs, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	cs = slices.CompactFunc(cs, func(a, b keyed) bool { return a.key == b.key })
	var key strings.Builder
	key.WriteByte('s') // apart from sets' keys, 4 bytes a node
	configs := make([]config, len(cs))
	for i, c := range cs {
		key.WriteString(c.key)
		configs[i] = c.c
	}
	return m.keptMask(v, t, key.String(), configs), below
}

// keptMask is what configs allow together, kept in t's memo under key.
func (m *Matcher) keptMask(v *Vocab, t *nodeTable, key string, configs []config) *nodeMask {
	if nm := t.memo.set(key); nm != nil {
		return nm
	}
	nm := m.walkMask(v, configs, t, true, time.Time{})
	if t.memo.putSet(key, nm) {
		v.store.added(t, nm.size()+int64(len(key)))
	}
	return nm
}

// commonFrame is the deepest frame that stacks a and b both stand on
// (nil: none but the top rule's).
func commonFrame(a, b *frame) *frame {
	da, db := frameDepth(a), frameDepth(b)
	for ; da > db; da-- {
		a = a.up
	}
	for ; db > da; db-- {
		b = b.up
	}
	for a != b {
		a, b = a.up, b.up
	}
	return a
}

func frameDepth(f *frame) int {
	d := 0
	for ; f != nil; f = f.up {
		d++
	}
	return d
}

// rebase is stack f with the frame that done maps to the bottom frame
// replaced by it, the frames above copied; done keeps what it did.
func (st *stepper) rebase(f *frame, done map[*frame]*frame) *frame {
	if r, ok := done[f]; ok {
		return r
	}
	r := st.pushCount(f.ret, f.count, st.rebase(f.up, done))
	done[f] = r
	return r
}

// groupMask is what the configs idx of m.cur, whose masks tab keeps,
// allow together.
func (m *Matcher) groupMask(v *Vocab, t, tab *nodeTable, idx []int) *nodeMask {
	g := m.st.g
	var rels, nodes []int32
	for _, i := range idx {
		n := g.canon(m.cur[i].node, v.maxLen)
		_, rel, _ := m.slotOf(v, t, n)
		if !slices.Contains(rels, rel) {
			rels, nodes = append(rels, rel), append(nodes, n)
		}
	}
	if len(nodes) == 1 {
		return m.maskFor(v, t, nodes[0])
	}
	slices.Sort(rels)
	key := make([]byte, 0, 4*len(rels))
	for _, r := range rels {
		key = binary.LittleEndian.AppendUint32(key, uint32(r))
	}
	if nm := tab.memo.set(string(key)); nm != nil {
		return nm
	}
	configs := make([]config, len(nodes))
	for i, n := range nodes {
		configs[i] = config{n, m.st.bottom}
	}
	nm := m.walkMask(v, configs, tab, tab == t, time.Time{})
	if tab.memo.putSet(string(key), nm) {
		v.store.added(tab, nm.size()+int64(len(key)))
	}
	return nm
}

// apply ORs nm into dst and, where the rule may end inside a token,
// walks those tokens from where frame st returns.
func (m *Matcher) apply(v *Vocab, nm *nodeMask, st *frame, dst []uint64) {
	if nm.bits != nil {
		for i, x := range nm.bits {
			dst[i] |= x
		}
	} else {
		for _, id := range nm.ids {
			dst[id>>6] |= 1 << (id & 63)
		}
	}
	if len(nm.escapes) == 0 || st == nil {
		return
	}
	w := &m.st.walker
	m.st.dfa.reset()
	m.st.begin()
	after := m.st.pop(w.buf(0), st)
	w.bufs[0] = after
	for _, e := range nm.escapes {
		w.walk(e, after, 1, false)
	}
}
