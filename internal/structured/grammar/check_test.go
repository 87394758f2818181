package grammar

import (
	"testing"
)

// evenStrings is a grammar of JSON arrays of strings of lowercase
// letters, each string checked to hold an even number of letters: a test
// the automaton, every string of letters, does not make.
func evenStrings(t *testing.T) *Grammar {
	t.Helper()
	b := &Builder{Grammar: &Grammar{}}
	str := func() Frag {
		return b.Checked(b.Seq(b.Lit(`"`), b.Star(b.Ranges('a', 'z')), b.Lit(`"`)), "even", func(lit []byte) bool {
			return (len(lit)-2)%2 == 0
		})
	}
	top := b.NewRule("top")
	b.Define(top, b.Seq(b.Lit("["), str(), b.Star(b.Seq(b.Lit(","), str())), b.Lit("]")))
	b.Grammar.Top = top
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	return b.Grammar
}

// TestCheckedCallAdvance: a checked call returns only where its test
// takes the bytes it matched, whichever Advance they come in.
func TestCheckedCallAdvance(t *testing.T) {
	g := evenStrings(t)
	for _, tc := range []struct {
		pieces []string
		ok     bool
	}{
		{[]string{`["ab"]`}, true},
		{[]string{`["a"]`}, false},
		{[]string{`[""`, `,"abcd"]`}, true},
		{[]string{`["a`, `b`, `c`, `"]`}, false},
		{[]string{`["a`, `b`, `cd`, `"`, `,`, `"xy"`, `]`}, true},
		{[]string{`["ab","abc"]`}, false},
	} {
		m := g.NewMatcher()
		ok := true
		for _, p := range tc.pieces {
			if !m.Advance([]byte(p)) {
				ok = false
				break
			}
		}
		if ok = ok && m.Accepting(); ok != tc.ok {
			t.Errorf("%q: taken %v, want %v", tc.pieces, ok, tc.ok)
		}
	}
}

// TestCheckedCallMasks: a mask over a checked call is what the matcher
// takes, token by token, whether the token ends a string already open,
// opens and ends one, or neither; and a clone keeps its own bytes.
func TestCheckedCallMasks(t *testing.T) {
	g := evenStrings(t)
	var toks [][]byte
	for c := byte(0); c < 128; c++ {
		toks = append(toks, []byte{c})
	}
	for _, p := range []string{`a"`, `ab"`, `abc"`, `"a"`, `"ab"`, `","`, `"]`, `a",`, `ab","`, `ab","a"`, `""`, `"a`, `",""]`} {
		toks = append(toks, []byte(p))
	}
	toks = append(toks, []byte("<eos>"))
	eos := int32(len(toks) - 1)
	v := NewVocab(toks, []int32{eos})
	mask := make([]uint64, (v.Size()+63)/64)
	for _, prefix := range []string{`[`, `["`, `["a`, `["ab`, `["ab",`, `["ab","abc`, `["ab","abcd"`, `[""`} {
		m := g.NewMatcher()
		if !m.Advance([]byte(prefix)) {
			t.Fatalf("%q refused", prefix)
		}
		m.Mask(v, mask)
		for id, tok := range toks {
			want := m.Accepting()
			if int32(id) != eos {
				want = m.Clone().Advance(tok)
			}
			if got := mask[id>>6]&(1<<(id&63)) != 0; got != want {
				t.Errorf("after %q: token %q: mask says %v, the matcher %v", prefix, tok, got, want)
			}
		}
	}
	m := g.NewMatcher()
	m.Advance([]byte(`["a`))
	if m.Clone().Advance([]byte(`"`)) {
		t.Error(`["a then " taken: the test refuses "a", so the quote leads nowhere`)
	}
	c := m.Clone()
	if !c.Advance([]byte(`b"]`)) || !c.Accepting() {
		t.Fatal(`the clone refused b"]`)
	}
	if m.Advance([]byte(`"]`)) {
		t.Error(`the original took "] after ["a: the clone's bytes leaked into it`)
	}
}
