package grammar

import (
	"slices"
	"testing"

	"github.com/genq/genq/internal/structured/vocabtest"
)

// nfaMaskOf is node n's mask walked by the NFA alone, never the DFA.
func nfaMaskOf(m *Matcher, v *Vocab, n int32) nodeMask {
	w := &walker{st: m.st, v: v, accepted: make([]uint64, v.words)}
	w.walkFrom(0, []config{{n, m.st.bottom}}, -1, 0, true)
	return nodeMask{ids: vocabtest.Allowed(w.accepted), escapes: slices.Sorted(slices.Values(w.escapes))}
}

// TestDFAAgrees checks masks walked through the stepper's DFA, one that
// fills mid-walk included, against the NFA's own steps.
func TestDFAAgrees(t *testing.T) {
	v, _, _ := llama3(t)
	tests := []struct {
		name, schema string
		fill         bool // start with the DFA all but full
	}{
		{"patternProperties", `{"type":"object","patternProperties":{"^[a-f]+$":{"type":"integer"},"^[d-z]{2,5}$":{"type":"string","maxLength":3}},"additionalProperties":{"type":"string","pattern":"^\\w+@x$"}}`, false},
		{"counted and nested", `{"type":"array","maxItems":1500,"items":{"type":"object","properties":{"s":{"type":"string","minLength":2000},"t":{"type":"string","format":"date"}}}}`, false},
		{"full", `{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]{3}-\\d+$"},"b":{"type":"array","items":{"type":"number"}}}}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			m := g.NewMatcher()
			d := &m.st.dfa
			if tc.fill {
				for i := 0; i < maxDFAStates-4; i++ {
					d.state([]config{{node: int32(-1 - i)}}) // never stepped: no trie byte reaches it
				}
			}
			for i, n := range g.prepareOrder() {
				if i%3 != 0 {
					continue // each is a whole walk or two
				}
				got := maskOf(m, v, n)
				want := nfaMaskOf(g.NewMatcher(), v, n)
				if !slices.Equal(got.ids, want.ids) || !slices.Equal(got.escapes, want.escapes) {
					t.Fatalf("node %d: through the DFA %d tokens %d escapes, the NFA %d tokens %d escapes", n, len(got.ids), len(got.escapes), len(want.ids), len(want.escapes))
				}
			}
			if tc.fill && len(d.states) < maxDFAStates {
				t.Errorf("the DFA never filled: %d states", len(d.states))
			}
			if len(d.states) < 2 {
				t.Errorf("the DFA was not used: %d states", len(d.states))
			}
		})
	}
}
