package grammar

import (
	"slices"
	"testing"

	"github.com/genq/genq/internal/structured/vocabtest"
)

// TestPatternNamesWalkOnce bounds the work of the masks of an object's
// names under patternProperties, with Llama 3's vocabulary: a name may
// begin one rule per pattern (the names it alone matches) and one for the
// names none matches, each a table of its own, and every one of them
// takes most of the vocabulary. Their first mask walks the trie once for
// all of them (it walked it once each: 800,306 trie nodes for the
// suite's two patterns), and a name's later states, the same states
// after minimizing the patterns' product, reuse those walks. The masks
// must equal a token-by-token check. The work is counted in trie nodes
// stepped into, not timed.
func TestPatternNamesWalkOnce(t *testing.T) {
	v, toks, _ := llama3(t)
	trie := len(v.nodes)
	tests := []struct {
		name, schema string
		steps        []string
		// most is the trie nodes each step's mask may walk, in tenths of
		// the trie: the first mask's walk, then far less.
		most []int
	}{
		{"two patterns", `{"patternProperties":{"[0-9]{2,}":{"type":"boolean"},"X_":{"type":"string"}}}`,
			[]string{`{"`, "answer", " ", "1"}, []int{10, 1, 1, 1}},
		{"one anchored pattern", `{"patternProperties":{"^.*bar$":{"type":"null"}}}`,
			[]string{`{"`, "foo", "bar"}, []int{10, 1, 1}},
		{"overlapping patterns", `{"patternProperties":{"a*":{"type":"integer"},"aaa*":{"maximum":20}}}`,
			[]string{`{"`, "a"}, []int{10, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustCompile(t, tc.schema).NewMatcher()
			mask := make([]uint64, v.words)
			for i, step := range tc.steps {
				if !m.Advance([]byte(step)) {
					t.Fatalf("%q refused", step)
				}
				before := m.st.walked
				m.Mask(v, mask)
				walked := m.st.walked - before
				t.Logf("after %q: %d trie nodes of %d walked", step, walked, trie)
				if walked*10 > tc.most[i]*trie {
					t.Errorf("after %q the mask walked %d trie nodes, over %d tenths of the trie's %d", step, walked, tc.most[i], trie)
				}
				if want := tokenByToken(m, toks); !slices.Equal(vocabtest.Allowed(mask), want) {
					t.Errorf("after %q the mask allows %d tokens, a token-by-token check %d", step, len(vocabtest.Allowed(mask)), len(want))
				}
			}
		})
	}
}

// tokenByToken is the tokens that m, advanced by each alone, takes.
func tokenByToken(m *Matcher, toks [][]byte) []int32 {
	var out []int32
	for id, tok := range toks {
		if len(tok) > 0 && m.Clone().Advance(tok) {
			out = append(out, int32(id))
		}
	}
	return out
}

// mustCompile compiles schema, failing the test on an error.
func mustCompile(t *testing.T, schema string) *Grammar {
	t.Helper()
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	return g
}
