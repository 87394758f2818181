package structured

// Where a string's characters begin, for a length region: a format's or
// pattern's automaton, paired state by state with a JSON string's own.

import (
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// charTracker is a JSON string's automaton: before its opening quote,
// between characters (JSONChar's start), within one (JSONChar's other
// nodes; its end is between characters again), after its closing quote.
type charTracker struct {
	nodes         []grammar.Node
	between, end  int32
	before, after int32
}

func newCharTracker() *charTracker {
	b := &grammar.Builder{Grammar: &grammar.Grammar{}}
	ch := b.JSONChar()
	n := int32(len(b.Grammar.Nodes))
	return &charTracker{nodes: b.Grammar.Nodes, between: ch.Start, end: ch.End, before: n, after: n + 1}
}

// piece is a run of bytes and the tracker's state after them.
type piece struct {
	lo, hi byte
	to     int32
}

// moves appends to dst the runs of [lo, hi] that state t takes, and where.
func (ct *charTracker) moves(dst []piece, t int32, lo, hi byte) []piece {
	switch t {
	case ct.after:
		return dst
	case ct.before, ct.between:
		if lo <= '"' && '"' <= hi {
			to := ct.between
			if t == ct.between {
				to = ct.after
			}
			dst = append(dst, piece{'"', '"', to})
		}
		if t == ct.before {
			return dst
		}
	}
	for _, e := range ct.nodes[t].Edges {
		l, h := max(lo, e.Lo), min(hi, e.Hi)
		if l > h {
			continue
		}
		to := e.To
		if to == ct.end {
			to = ct.between
		}
		dst = append(dst, piece{l, h, to})
	}
	return dst
}

// maxTrackedNodes bounds the automaton trackChars builds: past it the
// format's automaton does not keep to characters, and is refused.
const maxTrackedNodes = 4 * maxProductStates

// trackChars pairs the nodes of f, a whole JSON string's automaton
// (quotes included; byte edges and epsilons), with the tracker's states,
// as far as they are reached together: a format's automaton, built of
// characters, pairs each node with one state, so the pairs are about as
// many as its nodes. It returns them built alone, and which are between
// two characters.
func trackChars(nodes []grammar.Node, f grammar.Frag) (*grammar.Grammar, grammar.Frag, []bool, error) {
	ct := newCharTracker()
	b := &grammar.Builder{Grammar: &grammar.Grammar{}}
	end := b.Node()
	type pair struct{ n, t int32 }
	var boundary []bool
	w := newWorklist(b, func(p pair, id int32) {
		for len(boundary) <= int(id) {
			boundary = append(boundary, false)
		}
		boundary[id] = p.t == ct.between
		if p.n == f.End && p.t == ct.after {
			b.Eps(id, end)
		}
	})
	start := w.node(pair{f.Start, ct.before})
	var pieces []piece
	for p, from, ok := w.next(); ok; p, from, ok = w.next() {
		if len(w.nodes) > maxTrackedNodes {
			return nil, grammar.Frag{}, nil, genq.Errorf(genq.Invalid, "%s: the string's format or pattern takes over %d states to count its characters", grammar.TooLarge, maxTrackedNodes)
		}
		nd := &nodes[p.n]
		if nd.Call >= 0 {
			return nil, grammar.Frag{}, nil, genq.Errorf(genq.Internal, "a string constraint calls a rule")
		}
		for _, t := range nd.Eps {
			b.Eps(from, w.node(pair{t, p.t}))
		}
		for _, e := range nd.Edges {
			pieces = ct.moves(pieces[:0], p.t, e.Lo, e.Hi)
			for _, pc := range pieces {
				b.ByteEdge(from, pc.lo, pc.hi, w.node(pair{e.To, pc.to}))
			}
		}
	}
	return b.Grammar, grammar.Frag{Start: start, End: end}, boundary, b.Err
}
