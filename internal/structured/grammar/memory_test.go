package grammar

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/genq/genq/internal/structured/vocabtest"
)

// shortVocab is every byte and a few thousand tokens of up to 12 bytes
// drawn from a JSON string's alphabet (quotes, escapes, UTF-8 included):
// short tokens, so that the copies of a bounded repeat share masks after
// a dozen, and a vocabulary small enough to walk whole in a test.
func shortVocab() ([][]byte, int32) {
	rng := rand.New(rand.NewPCG(3, 4))
	toks := make([][]byte, 0, 4096)
	for c := 0; c < 256; c++ {
		toks = append(toks, []byte{byte(c)})
	}
	alphabet := []string{"a", "b", " ", `"`, `\`, "u", "0", "d", "8", "c", ",", ":", "{", "}", "[", "]", "é", "\xe2\x82", "\xac", "1", `\n`, `\u00e9`}
	seen := map[string]bool{}
	for len(toks) < 4000 {
		var t []byte
		for n := 2 + rng.IntN(6); n > 0 && len(t) < 12; n-- {
			t = append(t, alphabet[rng.IntN(len(alphabet))]...)
		}
		if len(t) > 12 || seen[string(t)] {
			continue
		}
		seen[string(t)] = true
		toks = append(toks, t)
	}
	toks = append(toks, nil)
	return toks, int32(len(toks) - 1)
}

// TestRepeatCopiesShareMasks checks that the copies of a bounded repeat
// that share masks (canon) have the masks their own walks give: every
// node's mask, worked out on a grammar that shares, against the same
// grammar compiled with no copies recorded.
func TestRepeatCopiesShareMasks(t *testing.T) {
	toks, eos := shortVocab()
	for _, tc := range []struct {
		name, schema string
		shared       bool // some node's mask comes from another copy
	}{
		{"maxLength", `{"type":"string","maxLength":60}`, true},
		{"minLength and maxLength", `{"type":"string","minLength":30,"maxLength":70}`, true},
		{"minLength alone", `{"type":"string","minLength":40}`, true},
		{"maxItems", `{"type":"array","items":{"type":"integer"},"maxItems":40}`, true},
		{"minItems and maxItems of strings", `{"type":"array","items":{"type":"string","maxLength":3},"minItems":20,"maxItems":30}`, true},
		{"too short to share", `{"type":"string","maxLength":5}`, false},
		{"in an object", `{"type":"object","properties":{"a":{"type":"string","minLength":16,"maxLength":50},"b":{"type":"string","maxLength":20}},"required":["a"]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewVocab(toks, []int32{eos})
			exact := NewVocab(toks, []int32{eos})
			g, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := Compile([]byte(tc.schema))
			ref.repeats = nil
			m, mr := g.NewMatcher(), ref.NewMatcher()
			shared := false
			for n := int32(0); n < int32(len(g.Nodes)); n++ {
				if len(g.Nodes[n].Edges) == 0 {
					continue
				}
				shared = shared || g.canon(n, v.maxLen) != n
				got, want := m.maskFor(v, g.table(v), n), mr.maskFor(exact, ref.table(exact), n)
				if !sameMask(got, want, v.words) {
					t.Fatalf("node %d (canon %d): the shared mask differs from its own", n, g.canon(n, v.maxLen))
				}
			}
			if shared != tc.shared {
				t.Errorf("masks shared: %v, want %v", shared, tc.shared)
			}
			// Whole masks along random answers agree too: escapes walked
			// from the real stack, the memo's keys moved to the first copy.
			rng := rand.New(rand.NewPCG(5, 6))
			for walk := 0; walk < 20; walk++ {
				a, b := g.NewMatcher(), ref.NewMatcher()
				ma, mb := make([]uint64, v.words), make([]uint64, v.words)
				for step := 0; step < 80; step++ {
					a.Mask(v, ma)
					b.Mask(exact, mb)
					if !slices.Equal(ma, mb) {
						t.Fatalf("walk %d step %d: masks differ", walk, step)
					}
					ids := vocabtest.Allowed(ma)
					id := ids[rng.IntN(len(ids))]
					if id == eos {
						break
					}
					if !a.Advance(toks[id]) || !b.Advance(toks[id]) {
						t.Fatalf("walk %d step %d: %q refused", walk, step, toks[id])
					}
				}
			}
		})
	}
}

func sameMask(a, b *nodeMask, words int) bool {
	bits := func(m *nodeMask) []uint64 {
		if m.bits != nil {
			return m.bits
		}
		out := make([]uint64, words)
		for _, id := range m.ids {
			out[id>>6] |= 1 << (id & 63)
		}
		return out
	}
	return slices.Equal(bits(a), bits(b)) && slices.Equal(a.escapes, b.escapes)
}

// TestMaskStoreBound prepares grammars past a small mask limit: the store
// stays within it (but for the table last added), empties the least
// recently used tables, and a mask emptied is worked out again, the same.
func TestMaskStoreBound(t *testing.T) {
	toks, eos := shortVocab()
	v := NewVocab(toks, []int32{eos})
	const limit = 64 << 10
	v.SetMaskBytes(limit)
	var grammars []*Grammar
	for i := 0; i < 12; i++ {
		g, err := Compile(fmt.Appendf(nil, `{"type":"object","properties":{"k%d":{"type":"string","maxLength":%d}},"required":["k%d"]}`, i, 20+i, i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Prepare(context.Background(), v, 0); err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, g)
		if s := v.MaskStats(); s.Bytes > limit+grammarMaskBytes(g, v) {
			t.Fatalf("after grammar %d: %d bytes of masks, limit %d", i, s.Bytes, limit)
		}
	}
	s := v.MaskStats()
	if s.Evictions == 0 || s.Limit != limit {
		t.Fatalf("stats %+v: want evictions under a limit of %d", s, limit)
	}
	// The first grammar's masks were emptied; worked out again they are
	// what a vocabulary with room for everything gives.
	first := grammars[0]
	full := NewVocab(toks, []int32{eos})
	m, mf := first.NewMatcher(), first.NewMatcher()
	a, b := make([]uint64, v.words), make([]uint64, v.words)
	for _, piece := range []string{`{"k0"`, `:`, ` "ab`, `cd`} {
		m.Mask(v, a)
		mf.Mask(full, b)
		if !slices.Equal(a, b) {
			t.Fatalf("before %q: an emptied grammar's mask differs from a kept one's", piece)
		}
		if !m.Advance([]byte(piece)) || !mf.Advance([]byte(piece)) {
			t.Fatalf("%q refused", piece)
		}
	}
}

// grammarMaskBytes is what g's own masks hold in v now.
func grammarMaskBytes(g *Grammar, v *Vocab) int64 {
	var n int64
	t := g.table(v)
	for i := range t.masks {
		if nm := t.masks[i].Load(); nm != nil {
			n += nm.size()
		}
	}
	t.memo.mu.Lock()
	for _, m := range t.memo.byKey {
		n += m.size()
	}
	t.memo.mu.Unlock()
	for _, r := range g.SharedRules {
		st := v.sharedTable(r)
		for i := range st.masks {
			if nm := st.masks[i].Load(); nm != nil {
				n += nm.size()
			}
		}
	}
	return n
}

// TestMaskStoreConcurrent masks grammars from several goroutines while a
// store far too small for them empties tables under their feet: every
// mask still equals the one a vocabulary with room for all gives. Run it
// under -race.
func TestMaskStoreConcurrent(t *testing.T) {
	toks, eos := shortVocab()
	small, full := NewVocab(toks, []int32{eos}), NewVocab(toks, []int32{eos})
	small.SetMaskBytes(8 << 10)
	var grammars []*Grammar
	for i := 0; i < 4; i++ {
		g, err := Compile(fmt.Appendf(nil, `{"type":"object","properties":{"k%d":{"type":"string","maxLength":%d},"n":{"type":"integer"}}}`, i, 30+i))
		if err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, g)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for walk := 0; walk < 6; walk++ {
				g := grammars[rng.IntN(len(grammars))]
				a, b := g.NewMatcher(), g.NewMatcher()
				ma, mb := make([]uint64, small.words), make([]uint64, full.words)
				for step := 0; step < 30; step++ {
					a.Mask(small, ma)
					b.Mask(full, mb)
					if !slices.Equal(ma, mb) {
						errs <- fmt.Errorf("worker %d walk %d step %d: masks differ", w, walk, step)
						return
					}
					ids := vocabtest.Allowed(ma)
					id := ids[rng.IntN(len(ids))]
					if id == eos || !a.Advance(toks[id]) || !b.Advance(toks[id]) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := small.MaskStats(); s.Evictions == 0 {
		t.Errorf("stats %+v: the store never emptied a table", s)
	}
}
