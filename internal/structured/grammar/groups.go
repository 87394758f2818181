package grammar

import (
	"encoding/binary"
	"slices"
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
// known of m's configs that share a table and a frame, and reports which
// configs it did (nil: none).
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
	for k, idx := range groups {
		if len(idx) < 2 {
			continue
		}
		nm := m.groupMask(v, t, k.tab, idx)
		if done == nil {
			done = make([]bool, len(m.cur))
		}
		for _, i := range idx {
			done[i] = true
		}
		m.apply(v, nm, k.st, dst)
	}
	return done
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
