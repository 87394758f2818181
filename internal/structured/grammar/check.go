package grammar

import "slices"

// A checked call holds what a rule matched to a test no automaton can
// make (a host name's Punycode, a regular expression's groups): the rule
// is the test's superset, and the call returns only where Check takes the
// bytes the rule matched. The frame of a checked call carries, in its
// count, where those bytes began, so the Matcher, which keeps the bytes
// of open checked calls, hands them to Check when the rule ends.
//
// Masks are worked out on the superset, as for every other rule, and a
// mask then asks the Matcher itself about the tokens whose fate the test
// may change (filterChecked): a checked rule is a JSON string, which
// ends only at a quote, so those are the tokens with a quote in them.

// Check is a test of the bytes a checked rule matched: a whole JSON
// string, its quotes included.
type Check func(lit []byte) bool

// checkSpec marks a checked call's return node.
type checkSpec struct {
	name string
	ok   Check
}

// Checked is f held to ok as well: f must match whole JSON strings (a
// rule that ends with a string's closing quote), as filterChecked
// assumes. name says what is checked, for errors and debugging.
func (b *Builder) Checked(f Frag, name string, ok Check) Frag {
	r := b.NewRule("check " + name)
	b.Define(r, f)
	call := b.Call(r)
	if b.Err == nil {
		b.Grammar.Nodes[call.Start].checked = true
		b.Grammar.Nodes[call.End].check = &checkSpec{name: name, ok: ok}
		b.Grammar.checked = true
	}
	return call
}

// checkPasses reports whether the checked call that frame s returns
// from may end at the byte just stepped. Outside a Matcher's own steps
// (a mask's walk) the test is not made: masks are worked out on the
// superset and filtered after.
func (st *stepper) checkPasses(s *frame, spec *checkSpec) bool {
	if !st.checking {
		return true
	}
	from, to := int(s.count)-st.histBase, st.pos+1-st.histBase
	return from >= 0 && to <= len(st.hist) && spec.ok(st.hist[from:to])
}

// openCheck reports whether some thread of m stands inside a checked
// call: its bytes must be kept, and a token with a quote may end it.
func (m *Matcher) openCheck() bool {
	for _, cf := range m.cur {
		for f := cf.st; f != nil && f != m.st.bottom; f = f.up {
			if m.st.g.Nodes[f.ret].check != nil {
				return true
			}
		}
	}
	return false
}

// InCheck reports whether the answer stands inside a string that a test
// of its whole value will judge where it ends (Builder.Checked). A mask
// that allows nothing there means no continuation can pass the test
// within the string's bounds: what the model wrote cannot be mended.
func (m *Matcher) InCheck() bool { return m.inCheck }

// filterChecked clears from dst, the mask of m's superset, the tokens m
// refuses once checks are made. Only a token with a quote can end a
// checked string; one with a single quote can end only a string already
// open, so outside one only tokens with two quotes or more are tried.
func (m *Matcher) filterChecked(v *Vocab, dst []uint64) {
	open := m.inCheck
	for _, q := range v.quoted {
		if !open && !q.twice {
			continue
		}
		w, bit := q.id>>6, uint64(1)<<(q.id&63)
		if dst[w]&bit == 0 {
			continue
		}
		if !m.run(q.bytes, false) {
			dst[w] &^= bit
		}
	}
}

// quotedToken is a token with a quote in it, which may end a checked
// string.
type quotedToken struct {
	id    int32
	bytes []byte
	twice bool // it holds two quotes or more
}

// quotedTokens are the tokens of tokens (but eos) that hold a quote.
func quotedTokens(tokens [][]byte, isEOS func(int32) bool) []quotedToken {
	var qs []quotedToken
	for i, t := range tokens {
		n := 0
		for _, c := range t {
			if c == '"' {
				n++
			}
		}
		if n > 0 && !isEOS(int32(i)) {
			qs = append(qs, quotedToken{id: int32(i), bytes: slices.Clone(t), twice: n > 1})
		}
	}
	return qs
}
