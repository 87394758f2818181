package grammar

import (
	"slices"

	"github.com/genq/genq/internal/genq"
)

// frame is one return address on a Matcher's stack. Frames are immutable and
// interned, so equal stacks are the same pointer and a state compares, copies
// and deduplicates by pointer.
type frame struct {
	ret int32
	// count is the copies of a counted repeat begun, where ret is the
	// repeat's node (a loop frame); 0 otherwise.
	count int32
	up    *frame
}

// config is one thread of the NFA: a node with byte edges and the stack it
// returns through.
type config struct {
	node int32
	st   *frame
}

// stepper holds the scratch space of byte steps: interned frames and the
// marks that keep an epsilon closure from visiting a (node, stack) twice.
// One stepper serves a Matcher and its clones, on one goroutine.
type stepper struct {
	g      *Grammar
	intern map[frame]*frame
	// bottom stands for "whatever stack lies below" when a token's fate is
	// worked out for a node alone (the vocabulary cache).
	bottom *frame

	gen    uint32
	mark   []uint32
	markSt []*frame
	extra  map[config]struct{}

	// The mask's scratch: the table of the vocabulary last masked over,
	// and a walker whose buffers are kept between masks.
	table      *nodeTable
	tableVocab *Vocab
	walker     walker
	scratch    []uint64 // a mask's bits while it is worked out (walkMask)
	// memo is the walks below the trie's first bytes (walker.walkFirst),
	// and memoTokens the tokens it covers.
	memo       map[subtreeKey]*subtree
	memoTokens int
	// dfa is the sets of configs walks met, and their steps (dfa.go).
	dfa dfa
	// walked counts the trie nodes this stepper's walks stepped into: a
	// mask's work, which tests bound where time would be the machine's.
	walked int

	// checking says a Matcher's own step is under way: checked calls
	// test their bytes, hist[pos-histBase] being the byte stepped (pos
	// is -1 before the first).
	checking bool
	hist     []byte
	histBase int
	pos      int

	accepting bool // the last closure reached the top rule's end
	escaped   bool // the last closure popped the bottom frame
	overflow  bool // the last step made more than maxThreads threads
}

// maxThreads bounds the threads of one state. Schemas whose branches
// overlap through recursion (an anyOf of two arrays of the same $ref, say)
// can read one answer in exponentially many ways; past the bound the byte
// is refused and the matcher reports why, rather than slowing every step.
const maxThreads = 4096

func newStepper(g *Grammar) *stepper {
	return &stepper{
		g:      g,
		intern: make(map[frame]*frame),
		bottom: &frame{ret: -1},
		mark:   make([]uint32, len(g.Nodes)),
		markSt: make([]*frame, len(g.Nodes)),
	}
}

func (st *stepper) push(ret int32, up *frame) *frame {
	return st.pushCount(ret, 0, up)
}

func (st *stepper) pushCount(ret, count int32, up *frame) *frame {
	k := frame{ret, count, up}
	if f, ok := st.intern[k]; ok {
		return f
	}
	f := &frame{ret, count, up}
	st.intern[k] = f
	return f
}

// begin starts a new closure batch: marks from earlier batches no longer count.
func (st *stepper) begin() {
	st.gen++
	if st.gen == 0 {
		clear(st.mark)
		st.gen = 1
	}
	if len(st.extra) > 0 {
		clear(st.extra)
	}
	st.accepting, st.escaped, st.overflow = false, false, false
}

func (st *stepper) firstVisit(n int32, s *frame) bool {
	if st.mark[n] != st.gen {
		st.mark[n] = st.gen
		st.markSt[n] = s
		return true
	}
	if st.markSt[n] == s {
		return false
	}
	if st.extra == nil {
		st.extra = make(map[config]struct{})
	}
	k := config{n, s}
	if _, ok := st.extra[k]; ok {
		return false
	}
	st.extra[k] = struct{}{}
	return true
}

// closure adds to dst every config reachable from (n, s) without a byte.
func (st *stepper) closure(dst []config, n int32, s *frame) []config {
	if !st.firstVisit(n, s) {
		return dst
	}
	nd := &st.g.Nodes[n]
	if len(nd.Edges) > 0 {
		if len(dst) >= maxThreads {
			st.overflow = true
			return dst
		}
		dst = append(dst, config{n, s})
	}
	for _, t := range nd.Eps {
		dst = st.closure(dst, t, s)
	}
	switch {
	case nd.counted != nil:
		dst = st.loop(dst, n, 0, s)
	case nd.region != nil:
		dst = st.closure(dst, st.g.Rules[nd.Call].start, st.pushCount(n, 0, s))
	case nd.checked:
		// The frame's count is where the call's bytes begin.
		dst = st.closure(dst, st.g.Rules[nd.Call].start, st.pushCount(nd.ret, int32(st.pos+1), s))
	case nd.Call >= 0:
		dst = st.closure(dst, st.g.Rules[nd.Call].start, st.push(nd.ret, s))
	}
	if nd.final {
		switch s {
		case nil:
			st.accepting = true
		case st.bottom:
			st.escaped = true
		default:
			dst = st.pop(dst, s)
		}
	}
	return dst
}

// step moves every config of src over byte c into dst. It reports whether
// any config took the byte.
func (st *stepper) step(dst, src []config, c byte) ([]config, bool) {
	st.begin()
	took := false
	for _, cf := range src {
		nd := &st.g.Nodes[cf.node]
		if nd.inRegion {
			var ok bool
			dst, ok = st.stepRegion(dst, cf, nd, c)
			took = took || ok
			continue
		}
		if nd.sorted {
			if e, ok := nd.edgeFor(c); ok {
				took = true
				dst = st.closure(dst, e.To, cf.st)
			}
			continue
		}
		for _, e := range nd.Edges {
			if c >= e.Lo && c <= e.Hi {
				took = true
				dst = st.closure(dst, e.To, cf.st)
			}
		}
	}
	return dst, took && !st.overflow
}

// Matcher follows one sequence through a Grammar. The zero value is not
// usable: get one from Grammar.NewMatcher. A Matcher and its clones share
// scratch space and must stay on one goroutine; Matchers from separate
// NewMatcher calls are independent.
type Matcher struct {
	st        *stepper
	cur       []config
	accepting bool
	buf       [2][]config
	err       error
	// hist is the bytes since histBase, kept while a checked call is
	// open (inCheck) for its test.
	hist     []byte
	histBase int
	inCheck  bool
}

// NewMatcher returns a matcher at the start of an answer.
func (g *Grammar) NewMatcher() *Matcher {
	st := newStepper(g)
	st.begin()
	m := &Matcher{st: st}
	st.pos = -1
	m.cur = st.closure(nil, g.Rules[g.Top].start, nil)
	m.accepting = st.accepting
	m.inCheck = g.checked && m.openCheck()
	return m
}

// Advance consumes b if the grammar allows it next and reports whether it
// did; a refused b leaves the matcher as it was.
func (m *Matcher) Advance(b []byte) bool {
	return m.run(b, true)
}

// run steps b, and keeps where it led if commit; it reports whether every
// byte was taken.
func (m *Matcher) run(b []byte, commit bool) bool {
	if len(b) == 0 {
		return true
	}
	st := m.st
	checks := st.g.checked
	n0 := len(m.hist)
	if checks {
		m.hist = append(m.hist, b...)
		st.checking, st.hist, st.histBase = true, m.hist, m.histBase
		defer func() { st.checking, st.hist = false, nil }()
	}
	src := m.cur
	accepting := m.accepting
	for i, c := range b {
		st.pos = m.histBase + n0 + i
		dst := m.buf[i&1][:0]
		var took bool
		dst, took = st.step(dst, src, c)
		m.buf[i&1] = dst
		if st.overflow && commit {
			m.err = genq.Errorf(genq.Invalid, "the schema is too ambiguous to follow: its branches read this answer in more than %d ways at once", maxThreads)
		}
		// A byte a thread took can still leave none: a checked call whose
		// test refused its bytes ends there (check.go).
		if !took || len(dst) == 0 && !st.accepting {
			m.hist = m.hist[:n0]
			return false
		}
		src, accepting = dst, st.accepting
	}
	if !commit {
		m.hist = m.hist[:n0]
		return true
	}
	m.cur = append(m.cur[:0], src...)
	m.accepting = accepting
	if checks {
		if m.inCheck = m.openCheck(); !m.inCheck {
			m.histBase += len(m.hist)
			m.hist = m.hist[:0]
		}
	}
	return true
}

// Err is set when an Advance was refused because the schema's branches
// overlap too much to follow (a *genq.Error, Invalid): the sequence cannot
// go on under this grammar. A refusal for any other reason leaves it nil.
func (m *Matcher) Err() error { return m.err }

// Accepting reports whether the answer may end here: end-of-sequence is
// allowed only then.
func (m *Matcher) Accepting() bool { return m.accepting }

// Done reports whether nothing but the end may follow.
func (m *Matcher) Done() bool { return m.accepting && len(m.cur) == 0 }

// Clone returns a copy that advances independently (same goroutine).
func (m *Matcher) Clone() *Matcher {
	return &Matcher{st: m.st, cur: append([]config(nil), m.cur...), accepting: m.accepting,
		hist: slices.Clone(m.hist), histBase: m.histBase, inCheck: m.inCheck}
}
