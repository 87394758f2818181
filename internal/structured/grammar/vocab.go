package grammar

import (
	"bytes"
	"container/list"
	"context"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Vocab is a model's vocabulary analysed for masking: its tokens in a byte
// trie, so that tokens sharing a prefix are checked once, and the token
// masks of the nodes every grammar shares. Build one per model; it is safe
// for concurrent use.
type Vocab struct {
	size   int
	words  int
	eos    []int32
	maxLen int // bytes of the longest token: how far a mask looks ahead

	nodes     []trieNode
	childByte []byte
	childNode []int32
	toks      []int32 // token ids in trie order

	builtinOnce sync.Once
	builtin     *nodeTable

	sharedMu sync.Mutex
	shared   map[string]*nodeTable // by SharedRange.Key

	// memo is the walks below first bytes into the builtin nodes alone,
	// the same in every grammar (a plain string's rest): Warm fills it.
	memo tableMemo

	// store bounds the masks of grammars' nodes and shared rules.
	store maskStore

	// quoted is the tokens that may end a checked string (check.go).
	quoted []quotedToken
}

// sharedTable returns the table of shared rule r's masks, made anew when
// the store emptied and dropped the last one.
func (v *Vocab) sharedTable(r SharedRange) *nodeTable {
	v.sharedMu.Lock()
	defer v.sharedMu.Unlock()
	if v.shared == nil {
		v.shared = map[string]*nodeTable{}
	}
	t := v.shared[r.Key]
	if t == nil {
		t = &nodeTable{masks: make([]atomic.Pointer[nodeMask], r.End-r.First)}
		t.drop = func() { v.dropShared(r.Key, t) }
		v.shared[r.Key] = t
	}
	return t
}

// dropShared forgets the emptied table t of shared rule key, so that the
// rules a worker no longer sees hold no memory.
func (v *Vocab) dropShared(key string, t *nodeTable) {
	v.sharedMu.Lock()
	defer v.sharedMu.Unlock()
	if v.shared[key] == t {
		delete(v.shared, key)
	}
}

type trieNode struct {
	child0, nchild int32 // children in childByte/childNode
	tok0, ntok     int32 // tokens that end here, in toks
	end            int32 // the node's tokens and its children's are toks[tok0:end]
	height         int32 // bytes below the node to the end of its longest token
}

// NewVocab analyses a vocabulary: tokens[i] is token i's bytes. Tokens with
// no bytes (control tokens) are never allowed; the eos tokens are allowed
// only where the grammar accepts.
func NewVocab(tokens [][]byte, eos []int32) *Vocab {
	v := &Vocab{size: len(tokens), words: (len(tokens) + 63) / 64, eos: append([]int32(nil), eos...)}
	isEOS := map[int32]bool{}
	for _, e := range eos {
		isEOS[e] = true
	}
	order := make([]int32, 0, len(tokens))
	for i, t := range tokens {
		if len(t) > 0 && !isEOS[int32(i)] {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := bytes.Compare(tokens[a], tokens[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	v.toks = order
	v.nodes = append(v.nodes, trieNode{})
	v.build(tokens, 0, 0, len(order), 0)
	v.maxLen = int(v.nodes[0].height)
	v.quoted = quotedTokens(tokens, func(id int32) bool { return isEOS[id] })
	return v
}

// build fills trie node n from order[lo:hi], whose tokens all share their
// first depth bytes.
func (v *Vocab) build(tokens [][]byte, n int32, lo, hi, depth int) {
	i := lo
	for i < hi && len(tokens[v.toks[i]]) == depth {
		i++
	}
	v.nodes[n].tok0, v.nodes[n].ntok, v.nodes[n].end = int32(lo), int32(i-lo), int32(hi)
	type group struct{ lo, hi int }
	var groups []group
	for i < hi {
		c := tokens[v.toks[i]][depth]
		j := i
		for j < hi && tokens[v.toks[j]][depth] == c {
			j++
		}
		groups = append(groups, group{i, j})
		i = j
	}
	v.nodes[n].child0, v.nodes[n].nchild = int32(len(v.childByte)), int32(len(groups))
	first := int32(len(v.nodes))
	for _, gr := range groups {
		v.childByte = append(v.childByte, tokens[v.toks[gr.lo]][depth])
		v.childNode = append(v.childNode, int32(len(v.nodes)))
		v.nodes = append(v.nodes, trieNode{})
	}
	for k, gr := range groups {
		v.build(tokens, first+int32(k), gr.lo, gr.hi, depth+1)
		v.nodes[n].height = max(v.nodes[n].height, v.nodes[first+int32(k)].height+1)
	}
}

// Size is the number of tokens; a mask holds (Size+63)/64 words.
func (v *Vocab) Size() int { return v.size }

// nodeMask is what a grammar node allows whatever the stack below it: the
// tokens accepted outright, and the trie nodes at which the node's rule may
// end with bytes of the token left, whose fate depends on the caller.
type nodeMask struct {
	bits    []uint64 // accepted tokens, or nil when ids holds them
	ids     []int32
	escapes []int32
}

// nodeTable is the masks of a grammar's nodes, or of a shared rule's, for
// one vocabulary. The fields after masks belong to the Vocab's store.
type nodeTable struct {
	masks  []atomic.Pointer[nodeMask]
	memo   tableMemo
	pinned bool          // the Vocab's own shared nodes: never emptied
	drop   func()        // forgets the table once emptied, or nil
	el     *list.Element // in the store's order, or nil when empty
	bytes  int64
}

// tableSet holds a grammar's node masks per vocabulary, filled lazily.
type tableSet struct {
	mu      sync.Mutex
	byVocab map[*Vocab]*nodeTable
}

func (g *Grammar) table(v *Vocab) *nodeTable {
	g.tables.mu.Lock()
	defer g.tables.mu.Unlock()
	if g.tables.byVocab == nil {
		g.tables.byVocab = map[*Vocab]*nodeTable{}
	}
	t := g.tables.byVocab[v]
	if t == nil {
		t = &nodeTable{masks: make([]atomic.Pointer[nodeMask], len(g.Nodes))}
		g.tables.byVocab[v] = t
	}
	return t
}

// ReleaseMasks empties g's masks in every vocabulary's store.
func (g *Grammar) ReleaseMasks() {
	g.tables.mu.Lock()
	defer g.tables.mu.Unlock()
	for v, t := range g.tables.byVocab {
		v.store.release(t)
	}
}

// walker walks the vocabulary trie with a set of configs.
type walker struct {
	st   *stepper
	v    *Vocab
	bufs [][]config
	// accepted collects what a walk allows: bits of the mask being built.
	accepted []uint64
	escapes  []int32
	// deadline, when set, ends a walk that runs past it (aborted): a
	// preparation within a budget gives up a mask rather than overrun.
	deadline time.Time
	steps    int
	aborted  bool
	// table and memo are the grammar's own, for a walk from one of its
	// nodes; nil for the shared nodes' walks, whose numbers differ
	// between grammars.
	table *nodeTable
	memo  *tableMemo
}

// late tells whether the walk ran past its deadline, looking at the clock
// every few thousand trie nodes.
func (w *walker) late() bool {
	if w.aborted || w.deadline.IsZero() {
		return w.aborted
	}
	if w.steps++; w.steps%2048 == 0 && time.Now().After(w.deadline) {
		w.aborted = true
	}
	return w.aborted
}

func (w *walker) buf(depth int) []config {
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, nil)
	}
	return w.bufs[depth][:0]
}

// walk marks every token below trie node t that cur can take. With
// record set (cur stands on the bottom frame) it also records where the
// rule escapes to its unknown caller.
func (w *walker) walk(t int32, cur []config, depth int, record bool) {
	w.walkFrom(t, cur, w.st.dfa.state(cur), depth, record)
}

// walkFrom is walk where cur is the stepper's DFA state sid (-1: none,
// the DFA being full).
func (w *walker) walkFrom(t int32, cur []config, sid int32, depth int, record bool) {
	tn := &w.v.nodes[t]
	// The state's moves, read in place: most trie nodes are a move
	// worked out before, and a call per node was a good part of a walk.
	var moves *[256]uint32
	if sid >= 0 {
		moves = &w.st.dfa.states[sid].next
	}
	timed := !w.deadline.IsZero()
	for k := tn.child0; k < tn.child0+tn.nchild; k++ {
		w.st.walked++
		if timed && w.late() {
			return
		}
		c, child := w.v.childByte[k], w.v.childNode[k]
		var next []config
		var took, escaped bool
		nid := int32(-1)
		if moves != nil {
			// Coded as dfa.go says.
			if code := moves[c]; code > dfaDead {
				nid, took, escaped = int32(code>>1)-2, true, code&1 != 0
				next = w.st.dfa.states[nid].configs
			} else if code == dfaDead {
				continue
			} else {
				next, nid, took, escaped = w.st.trans(sid, c, w.buf(depth))
			}
		} else {
			next, took = w.st.step(w.buf(depth), cur, c)
			escaped = w.st.escaped
		}
		if nid < 0 {
			w.bufs[depth] = next
		}
		if !took {
			continue
		}
		cn := &w.v.nodes[child]
		for _, id := range w.v.toks[cn.tok0 : cn.tok0+cn.ntok] {
			w.accepted[id>>6] |= 1 << (id & 63)
		}
		if cn.nchild == 0 {
			continue
		}
		if escaped && record {
			w.escapes = append(w.escapes, child)
		}
		if len(next) > 0 {
			if depth == 0 {
				w.walkFirst(child, next, nid, record)
			} else {
				w.walkFrom(child, next, nid, depth+1, record)
			}
		}
	}
}

// subtree is what a walk below one of the trie's first bytes allowed:
// the tokens below it, as bits over their places in the trie's order
// (a sixteenth of a list of ids where most are allowed), and the escapes.
type subtree struct {
	bits    []uint64
	escapes []int32
}

// subtreeKey is a walk below a first byte: the trie node and the configs
// after that byte (at most sixteen: a plain string's rest is nine).
type subtreeKey struct {
	child  int32
	record bool
	n      int8
	c      [16]config
}

// Bounds of a stepper's memo of subtrees: below memoMinTokens a walk is
// cheap; past memoMaxTokens (2 MB of bits) the memo starts over.
const (
	memoMinTokens = 64
	memoMaxTokens = 1 << 24
)

// walkFirst is walk below a first byte, child, remembered per stepper:
// the nodes of a grammar's key tries, and of strings that leave to the
// same rest, reach the same configs after most first bytes, and below
// each, tens of thousands of tokens walk the same way. Remembering that
// walk once makes such a node's mask a fraction of a millisecond, not
// twenty.
func (w *walker) walkFirst(child int32, next []config, sid int32, record bool) {
	if len(next) > len(subtreeKey{}.c) {
		w.walkFrom(child, next, sid, 1, record)
		return
	}
	st := w.st
	k := subtreeKey{child: child, record: record, n: int8(len(next))}
	memo := w.memo
	builtin := true
	for i, c := range next {
		// A return to a node that only ends the rule escapes where the
		// bottom frame does: each object's other keys call the one plain
		// string rest, each from its own node, and walk alike.
		if c.st != st.bottom && c.st.up == st.bottom && st.g.endsRule(c.st.ret) {
			c.st = st.bottom
		}
		if c.st != st.bottom {
			memo = nil // this stepper's frame: its walk is its own
		} else {
			// A copy of a bounded repeat walks below child as the first
			// copy that the bytes left below it cannot tell apart.
			c.node = st.g.canon(c.node, int(w.v.nodes[child].height))
			c.st = memoBottom
		}
		builtin = builtin && c.node < st.g.BuiltinNodes
		k.c[i] = c
	}
	// Configs on the bottom frame are the grammar's own, not the
	// stepper's: their walks serve every matcher of the grammar, and
	// where they are the builtin nodes', every grammar (Vocab.memo).
	table := w.table
	if builtin && allBottom(k) {
		memo, table = &w.v.memo, nil
	}
	if memo == nil {
		for i := range k.c[:k.n] {
			if k.c[i].st == memoBottom {
				k.c[i].st = st.bottom
			}
		}
	}
	cn := &w.v.nodes[child]
	first := cn.tok0 + cn.ntok
	below := w.v.toks[first:cn.end]
	var m *subtree
	if memo != nil {
		m = memo.get(k)
	} else {
		m = st.memo[k]
	}
	if m != nil {
		for i, x := range m.bits {
			for x != 0 {
				id := below[i*64+bits.TrailingZeros64(x)]
				w.accepted[id>>6] |= 1 << (id & 63)
				x &= x - 1
			}
		}
		w.escapes = append(w.escapes, m.escapes...)
		return
	}
	if len(below) < memoMinTokens {
		w.walkFrom(child, next, sid, 1, record)
		return
	}
	// What the walk sets below child is new: the trie is a tree, and the
	// tokens below child are reached through it only.
	before := len(w.escapes)
	w.walkFrom(child, next, sid, 1, record)
	if w.aborted {
		return // what it set is partial: not for the memo
	}
	m = &subtree{bits: make([]uint64, (len(below)+63)/64), escapes: slices.Clone(w.escapes[before:])}
	for i, id := range below {
		if w.accepted[id>>6]&(1<<(id&63)) != 0 {
			m.bits[i>>6] |= 1 << (i & 63)
		}
	}
	if memo != nil {
		if memo.put(k, m, len(below)) && table != nil {
			w.v.store.added(table, m.size())
		}
		return
	}
	if st.memoTokens+len(below) > memoMaxTokens {
		st.memo, st.memoTokens = nil, 0
	}
	if st.memo == nil {
		st.memo = map[subtreeKey]*subtree{}
	}
	st.memo[k] = m
	st.memoTokens += len(below)
}

// memoBottom stands for a stepper's bottom frame in the keys of a shared
// memo (tableMemo). It is never changed.
var memoBottom = &frame{ret: -1}

// allBottom tells a key whose configs all stand on the bottom frame.
func allBottom(k subtreeKey) bool {
	for _, c := range k.c[:k.n] {
		if c.st != memoBottom {
			return false
		}
	}
	return true
}

// tableMemo is a grammar's walks below first bytes for one vocabulary,
// shared by its matchers and its preparation: a node a step reaches
// first often walks as a node worked out before did (the same string
// rest after its first byte), and finds that walk here. It is emptied
// with its table (maskStore.remove).
type tableMemo struct {
	mu     sync.Mutex
	byKey  map[subtreeKey]*subtree
	tokens int
	// sets is what sets of nodes allow together, by their places in the
	// table (Matcher.groupMask).
	sets map[string]*nodeMask
	// counted is nodes' masks on a loop frame, per count class
	// (Matcher.countedMask).
	counted map[countKey]*nodeMask
}

func (tm *tableMemo) set(key string) *nodeMask {
	return memoLoad(&tm.mu, &tm.sets, key)
}

// putSet keeps nm unless a walk of the same set got there first.
func (tm *tableMemo) putSet(key string, nm *nodeMask) bool {
	return memoStore(&tm.mu, &tm.sets, key, nm)
}

// memoLoad is the mask *m keeps under k, read under mu; *m is read under
// mu too, as clear may drop it meanwhile.
func memoLoad[K comparable](mu *sync.Mutex, m *map[K]*nodeMask, k K) *nodeMask {
	mu.Lock()
	defer mu.Unlock()
	return (*m)[k]
}

// memoStore keeps nm under k in *m unless a walk of the same key got
// there first, under mu.
func memoStore[K comparable](mu *sync.Mutex, m *map[K]*nodeMask, k K, nm *nodeMask) bool {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := (*m)[k]; ok {
		return false
	}
	if *m == nil {
		*m = map[K]*nodeMask{}
	}
	(*m)[k] = nm
	return true
}

func (tm *tableMemo) get(k subtreeKey) *subtree {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.byKey[k]
}

// put keeps m unless a walk of the same key got there first; past
// memoMaxTokens the memo starts over.
func (tm *tableMemo) put(k subtreeKey, m *subtree, tokens int) bool {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if _, ok := tm.byKey[k]; ok {
		return false
	}
	if tm.tokens+tokens > memoMaxTokens || tm.byKey == nil {
		tm.byKey, tm.tokens = map[subtreeKey]*subtree{}, 0
	}
	tm.byKey[k] = m
	tm.tokens += tokens
	return true
}

func (tm *tableMemo) clear() {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.byKey, tm.tokens, tm.sets, tm.counted = nil, 0, nil, nil
}

// size is the bytes a memo entry holds, its key included.
func (m *subtree) size() int64 {
	return int64(unsafe.Sizeof(subtreeKey{})+unsafe.Sizeof(*m)) + int64(cap(m.bits))*8 + int64(cap(m.escapes))*4
}

// maskFor returns node n's context-free mask, computing it on first use.
// Copies of a bounded repeat that no token tells apart share one (canon).
func (m *Matcher) maskFor(v *Vocab, t *nodeTable, n int32) *nodeMask {
	nm, _ := m.maskWithin(v, t, n, time.Time{})
	return nm
}

// maskWithin is maskFor, giving up (nil, false) once deadline, when set,
// has passed.
func (m *Matcher) maskWithin(v *Vocab, t *nodeTable, n int32, deadline time.Time) (*nodeMask, bool) {
	n = m.st.g.canon(n, v.maxLen)
	t, rel, own := m.slotOf(v, t, n)
	slot := &t.masks[rel]
	if nm := slot.Load(); nm != nil {
		if !own {
			v.store.touch(t)
		}
		return nm, true
	}
	nm := m.walkMask(v, []config{{n, m.st.bottom}}, t, own, deadline)
	if nm == nil {
		return nil, false
	}
	if slot.CompareAndSwap(nil, nm) {
		v.store.added(t, nm.size())
		return nm, true
	}
	if got := slot.Load(); got != nil {
		return got, true
	}
	return nm, true // emptied meanwhile: this mask serves the caller, unkept
}

// slotOf is the table that keeps node n's mask (n canonical): the Vocab's
// builtin nodes', a shared rule's, or t, the grammar's own (own); rel is
// n's place in it.
func (m *Matcher) slotOf(v *Vocab, t *nodeTable, n int32) (*nodeTable, int32, bool) {
	g := m.st.g
	if n < g.BuiltinNodes {
		v.builtinOnce.Do(func() {
			v.builtin = &nodeTable{masks: make([]atomic.Pointer[nodeMask], g.BuiltinNodes), pinned: true}
		})
		return v.builtin, n, false
	}
	if r, ok := g.sharedRule(n); ok {
		return v.sharedTable(r), n - r.First, false
	}
	return t, n, true
}

// walkMask walks the vocabulary from configs, each on the bottom frame
// or on frames over it (stackMask), and returns what they allow
// together, escaping where the bottom frame pops; nil when deadline
// passed first.
// t is the table the mask goes to: its memo serves the walk when it is
// the grammar's own.
func (m *Matcher) walkMask(v *Vocab, configs []config, t *nodeTable, own bool, deadline time.Time) *nodeMask {
	// The bits are the stepper's scratch unless the mask keeps them: most
	// masks allow a few tokens and keep ids, and sixteen kilobytes of
	// garbage a mask was most of what the collector had to sweep.
	scratch := m.st.scratch
	if len(scratch) != v.words {
		scratch = make([]uint64, v.words)
	} else {
		clear(scratch)
	}
	m.st.scratch = scratch
	w := &walker{st: m.st, v: v, accepted: scratch, deadline: deadline}
	if own {
		w.table, w.memo = t, &t.memo
	}
	m.st.dfa.reset()
	w.walk(0, configs, 0, true)
	if w.aborted {
		return nil
	}
	nm := &nodeMask{escapes: w.escapes}
	count := 0
	for _, x := range w.accepted {
		count += bits.OnesCount64(x)
	}
	if count*2 < v.words {
		nm.ids = make([]int32, 0, count)
		for i, x := range w.accepted {
			for x != 0 {
				b := bits.TrailingZeros64(x)
				nm.ids = append(nm.ids, int32(i*64+b))
				x &= x - 1
			}
		}
	} else {
		nm.bits, m.st.scratch = w.accepted, nil
	}
	return nm
}

// Mask sets in dst, a bitset of at least (v.Size()+63)/64 words, the tokens that may
// come next, and clears the rest. End-of-sequence tokens are set only where
// the answer may end.
func (m *Matcher) Mask(v *Vocab, dst []uint64) {
	dst = dst[:v.words]
	clear(dst)
	if m.st.tableVocab != v {
		m.st.table, m.st.tableVocab = m.st.g.table(v), v
	}
	t := m.st.table
	v.store.touch(t)
	w := &m.st.walker
	w.st, w.v, w.accepted, w.escapes = m.st, v, dst, nil
	done := m.maskGroups(v, t, dst)
	for i, cf := range m.cur {
		if done != nil && done[i] {
			continue
		}
		if nm, up, ok := m.countedMask(v, t, cf); ok {
			m.apply(v, nm, up, dst)
			continue
		}
		m.apply(v, m.maskFor(v, t, cf.node), cf.st, dst)
	}
	if m.accepting {
		for _, e := range v.eos {
			dst[e>>6] |= 1 << (e & 63)
		}
	}
	if m.st.g.checked {
		m.filterChecked(v, dst)
	}
}

// Warm works out the masks of the nodes every grammar shares (strings,
// numbers, any value) now rather than on the first answer that reaches
// them: call it once when the model loads, so that no sequence's step pays
// for them. Any grammar g has those nodes first; only they are worked out.
func (v *Vocab) Warm(g *Grammar) {
	m := g.NewMatcher()
	t := g.table(v)
	for n := int32(0); n < g.BuiltinNodes; n++ {
		if len(g.Nodes[n].Edges) > 0 {
			m.maskFor(v, t, n)
		}
	}
}

// Prepare works out the token masks of g's nodes for v ahead of their
// first use, those an answer reaches first first (breadth first from the
// start), so that no step of decoding pays for them. It returns true once
// every node has its mask; it stops early when ctx ends (with its error)
// or, budget > 0, once budget has passed. A node left without its mask
// (the first node is always worked out) has it worked out on its first
// use (Matcher.Mask) or by a later Prepare: masks are kept per grammar and
// vocabulary, so each is worked out once. A grammar of thousands of nodes
// whose strings accept most of the vocabulary takes seconds to prepare
// whole: the worker gives a job a budget before its first token and
// leaves the rest to the background.
func (g *Grammar) Prepare(ctx context.Context, v *Vocab, budget time.Duration) (bool, error) {
	start := time.Now()
	m := g.NewMatcher()
	t := g.table(v)
	order := g.prepareOrder()
	var deadline time.Time
	for i, n := range order {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if !m.prepareNode(v, t, n, deadline) {
			return false, nil
		}
		if budget > 0 && i < len(order)-1 {
			// The first node is always worked out; a later one is
			// given up where the budget ends, mid-walk.
			deadline = start.Add(budget)
			if time.Now().After(deadline) {
				return false, nil
			}
		}
	}
	return true, nil
}

// prepareNode works out node n's mask, or, in a length region, its mask
// at the region's first count (all counts far from the bounds share it);
// false when deadline passed first.
func (m *Matcher) prepareNode(v *Vocab, t *nodeTable, n int32, deadline time.Time) bool {
	call, ok := m.st.g.regionOf[n]
	if !ok {
		_, ok := m.maskWithin(v, t, n, deadline)
		return ok
	}
	nm, _, _ := m.countedMaskWithin(v, t, config{n, m.st.pushCount(call, 0, m.st.bottom)}, deadline)
	return nm != nil
}

// endsRule tells a node from which the rule can only end: no bytes, no
// call, and every epsilon leads to such a node or it is final.
func (g *Grammar) endsRule(n int32) bool {
	g.tailOnce.Do(func() {
		const unknown, busy, yes, no = 0, 1, 2, 3
		state := make([]uint8, len(g.Nodes))
		var tail func(n int32) bool
		tail = func(n int32) bool {
			switch state[n] {
			case yes:
				return true
			case no, busy:
				return false
			}
			state[n] = busy
			nd := &g.Nodes[n]
			ok := len(nd.Edges) == 0 && nd.Call < 0 && (nd.final || len(nd.Eps) > 0)
			for _, e := range nd.Eps {
				ok = ok && tail(e)
			}
			state[n] = no
			if ok {
				state[n] = yes
			}
			return ok
		}
		g.tail = make([]bool, len(g.Nodes))
		for n := range g.Nodes {
			g.tail[n] = tail(int32(n))
		}
	})
	return g.tail[n]
}

// prepareOrder is g's nodes with edges, breadth first from the top rule's
// start through edges, epsilons, calls and returns, then any others: the
// order in which answers tend to reach them.
func (g *Grammar) prepareOrder() []int32 {
	g.orderOnce.Do(func() {
		seen := make([]bool, len(g.Nodes))
		queue := []int32{g.Rules[g.Top].start}
		seen[queue[0]] = true
		push := func(n int32) {
			if n >= 0 && !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
		for i := 0; i < len(queue); i++ {
			nd := &g.Nodes[queue[i]]
			for _, e := range nd.Edges {
				push(e.To)
			}
			for _, e := range nd.Eps {
				push(e)
			}
			if nd.Call >= 0 {
				push(g.Rules[nd.Call].start)
				push(nd.ret)
			}
		}
		for n := range g.Nodes {
			push(int32(n))
		}
		g.regionOf = map[int32]int32{}
		for i := range g.Nodes {
			if r := g.Nodes[i].region; r != nil {
				for k := range r.need {
					g.regionOf[r.first+int32(k)] = int32(i)
				}
			}
		}
		order := make([]int32, 0, len(queue))
		for _, n := range queue {
			if len(g.Nodes[n].Edges) > 0 {
				order = append(order, n)
			}
		}
		g.order = order
	})
	return g.order
}
