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
// write must be JSON.
func FuzzCompile(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add([]byte(c.Schema))
	}
	for _, s := range []string{`{"enum":[]}`, `{"$ref":"#/$defs/x"}`, `{"type":"string","pattern":"^(a|b)*c{2,3}$"}`, `{"anyOf":[{"$ref":"#"},{"type":"null"}]}`} {
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
