package structured

import (
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
)

// FuzzCompile feeds arbitrary schemas to the compiler: it must answer with
// a grammar or an error, never panic, and what a grammar lets a random walk
// write must be JSON. A mask is never empty but at a tested format's dead
// end.
func FuzzCompile(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add([]byte(c.Schema))
	}
	for _, s := range []string{`{"enum":[]}`, `{"$ref":"#/$defs/x"}`, `{"type":"string","pattern":"^(a|b)*c{2,3}$"}`, `{"anyOf":[{"$ref":"#"},{"type":"null"}]}`,
		`{"type":"string","format":"hostname","maxLength":4}`, `{"type":"string","format":"regex","maxLength":3}`,
		// Random walks that meet a tested format's dead end (below).
		`{"type":"string","format":"idn-hostname","maxLength":11}`, `{"type":"array","items":{"type":"string","format":"idn-hostname","maxLength":11}}`} {
		f.Add([]byte(s))
	}
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	f.Fuzz(func(t *testing.T, schema []byte) {
		g, err := Compile(schema)
		if err != nil {
			return
		}
		h := fnv.New64a()
		h.Write(schema)
		m := g.NewMatcher()
		mask := make([]uint64, (v.Size()+63)/64)
		rng := rand.New(rand.NewPCG(h.Sum64(), 0))
		var out []byte
		for step := 0; step < 60; step++ {
			m.Mask(v, mask)
			ids := vocabtest.Allowed(mask)
			if len(ids) == 0 {
				if m.InCheck() {
					// A format tested as a whole value, at a bound no
					// continuation can meet it within: known, and named
					// to the caller (docs/text.md, TestCheckedFormatDeadEnd).
					return
				}
				t.Fatalf("empty mask after %q", out)
			}
			id := ids[rng.IntN(len(ids))]
			if id == eos {
				if !json.Valid(out) {
					t.Fatalf("%q is not JSON", out)
				}
				return
			}
			if !m.Advance(toks[id]) {
				t.Fatalf("the mask allowed %q after %q; the matcher refuses it", toks[id], out)
			}
			out = append(out, toks[id]...)
		}
	})
}
