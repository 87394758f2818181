package grammar

import "github.com/genq/genq/internal/structured/toolcall"

// Phase is where a tool-calling answer stands before its grammar binds.
type Phase uint8

const (
	// Waiting: nothing is decided yet. The answer so far is whitespace,
	// or the start of an opener or of a reasoning block; the next token is
	// masked by Opening.Mask.
	Waiting Phase = iota
	// Thinking: inside a leading reasoning block, which is free text;
	// its close brings the answer back to Waiting.
	Thinking
	// Calls: the calls began. The grammar is bound from the opener on.
	Calls
	// Prose: the answer is not calls (lazy only), and is free from here.
	Prose
)

func (p Phase) String() string {
	switch p {
	case Waiting:
		return "waiting"
	case Thinking:
		return "thinking"
	case Calls:
		return "calls"
	case Prose:
		return "prose"
	}
	return "?"
}

// Opening follows the start of a tool-calling answer up to its first call,
// for the worker, which knows the model's dialect. A lazy answer (tool_choice
// "auto") may be prose; once it opens a call (the format's Opener, after
// whitespace and a leading reasoning block), the grammar binds from the
// opener on. An answer that must be calls, in a dialect with reasoning, may
// still think first: it is free inside the reasoning block and bound from
// its first byte after it.
//
// The sampler feeds each token's bytes to Feed, and while the phase is
// Waiting draws the next token from Mask. An Opening is used by one
// sequence at a time.
type Opening struct {
	lazy      bool
	reasoning bool // a reasoning block may still open: nothing else came yet
	opener    string
	phase     Phase
	held      heldBytes // past leading whitespace: a prefix of the opener or of ThinkOpen
	closed    int       // Thinking: the bytes of ThinkClose matched so far
}

// heldBytes is the little an Opening holds: no opener is longer.
type heldBytes struct {
	b [16]byte
	n int
}

func (h heldBytes) bytes() []byte { return h.b[:h.n] }

// NewOpening starts following a tool-calling answer whose calls open with
// opener: lazy when the answer may be prose instead, reasoning when the
// dialect may think first.
func NewOpening(lazy, reasoning bool, opener string) *Opening {
	return &Opening{lazy: lazy, reasoning: reasoning, opener: opener}
}

// Phase is where the answer stands.
func (o *Opening) Phase() Phase { return o.phase }

// Feed takes the bytes of the answer's next token. When the calls begin in
// them, it returns Calls and the bytes to advance the grammar's matcher by:
// the answer's text from the opener on (part of it may have come in earlier
// tokens, held as a partial opener). In a required answer, a byte that
// opens neither a call nor a reasoning block begins the calls too, and the
// grammar refuses it (Mask never allows it; only a token that closed a
// reasoning block and went on in the same token could bring one).
func (o *Opening) Feed(piece []byte) (Phase, []byte) {
	for i := 0; i < len(piece); i++ {
		if o.feed(piece[i]) == Calls {
			return Calls, append(append([]byte(nil), o.held.bytes()...), piece[i+1:]...)
		}
		if o.phase == Prose {
			return Prose, nil
		}
	}
	return o.phase, nil
}

// feed moves the opening on by one byte and returns the phase after it.
// At Calls, held is the calls' text so far.
func (o *Opening) feed(c byte) Phase {
	switch o.phase {
	case Thinking:
		switch {
		case c == toolcall.ThinkClose[o.closed]:
			o.closed++
			if o.closed == len(toolcall.ThinkClose) {
				o.phase, o.closed = Waiting, 0
			}
		case c == toolcall.ThinkClose[0]:
			o.closed = 1
		default:
			o.closed = 0
		}
		return o.phase
	case Waiting:
	default:
		return o.phase
	}
	if o.held.n == 0 && toolcall.IsSpace(c) {
		return Waiting
	}
	o.held.b[o.held.n] = c
	o.held.n++
	h := o.held.bytes()
	think := o.reasoning && hasBytePrefix(toolcall.ThinkOpen, h)
	call := hasBytePrefix(o.opener, h)
	switch {
	case think && len(h) == len(toolcall.ThinkOpen):
		o.phase, o.reasoning, o.held.n = Thinking, false, 0
	case call && len(h) == len(o.opener):
		o.phase, o.reasoning = Calls, false
	case think || call:
	case o.lazy:
		o.phase = Prose
	default:
		o.phase, o.reasoning = Calls, false
	}
	return o.phase
}

// hasBytePrefix reports whether b is a prefix of s.
func hasBytePrefix(s string, b []byte) bool {
	return len(b) <= len(s) && s[:len(b)] == string(b)
}

// Mask sets dst to the tokens allowed next while the answer is Waiting,
// given start, a matcher of the constraint's grammar at its start (not
// advanced: the grammar has seen nothing yet). A token may keep the answer
// waiting (whitespace, more of an opener or of the reasoning block's open
// tag) or open the reasoning block; a token that begins the calls must be
// one the grammar allows from the opener on. In a lazy answer every other
// token is allowed too (the answer is then prose), and so is the end of the
// answer; in a required one they are not.
func (o *Opening) Mask(start *Matcher, v *Vocab, dst []uint64) {
	dst = dst[:v.words]
	clear(dst)
	w := openingWalk{v: v, start: start, dst: dst}
	w.visit(0, *o, nil)
	if o.lazy {
		for _, e := range v.eos {
			dst[e>>6] |= 1 << (e & 63)
		}
	}
}

// openingWalk walks the vocabulary trie with copies of an Opening, and,
// once a path begins the calls, a matcher of its own.
type openingWalk struct {
	v     *Vocab
	start *Matcher
	dst   []uint64
}

func (w *openingWalk) visit(n int32, o Opening, m *Matcher) {
	node := w.v.nodes[n]
	w.mark(node.tok0, node.tok0+node.ntok)
	for k := node.child0; k < node.child0+node.nchild; k++ {
		c, child := w.v.childByte[k], w.v.childNode[k]
		if m != nil {
			next := m.Clone()
			if next.Advance([]byte{c}) {
				w.visit(child, o, next)
			}
			continue
		}
		next := o
		switch next.feed(c) {
		case Prose, Thinking:
			w.markSubtree(child)
		case Waiting:
			w.visit(child, next, nil)
		case Calls:
			mm := w.start.Clone()
			if mm.Advance(next.held.bytes()) {
				w.visit(child, next, mm)
			}
		}
	}
}

// mark allows the tokens at toks[lo:hi].
func (w *openingWalk) mark(lo, hi int32) {
	for _, id := range w.v.toks[lo:hi] {
		w.dst[id>>6] |= 1 << (id & 63)
	}
}

// markSubtree allows every token whose bytes pass through trie node n:
// they lie together in trie order, up to the end of n's last descendant.
func (w *openingWalk) markSubtree(n int32) {
	lo := w.v.nodes[n].tok0
	last := n
	for w.v.nodes[last].nchild > 0 {
		nd := w.v.nodes[last]
		last = w.v.childNode[nd.child0+nd.nchild-1]
	}
	w.mark(lo, w.v.nodes[last].tok0+w.v.nodes[last].ntok)
}
