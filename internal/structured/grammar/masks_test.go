package grammar

// Tests of the masks that look inside the runtime: how Prepare orders its
// work, which masks are shared, the memo of subtrees.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/genq/genq/internal/structured/vocabtest"
)

// TestPrepareBudget: a budget too short for a grammar stops Prepare with
// the masks of the nodes nearest the start worked out; a later Prepare
// without a budget finishes, and a third finds nothing left to do.
func TestPrepareBudget(t *testing.T) {
	toks, eos := vocabtest.Small()
	v := NewVocab(toks, []int32{eos})
	g, err := Compile([]byte(`{"type":"object","properties":{"a":{"type":"string","format":"email"},"b":{"type":"array","items":{"type":"string","pattern":"^[a-z]+-[0-9]{2,4}$"}},"c":{"enum":["x","y"]}},"required":["a","b","c"]}`))
	if err != nil {
		t.Fatal(err)
	}
	done, err := g.Prepare(context.Background(), v, time.Nanosecond)
	if err != nil || done {
		t.Fatalf("Prepare with 1 ns: done %v, %v; want stopped early", done, err)
	}
	seen := map[int32]bool{}
	for _, n := range g.prepareOrder() {
		if seen[n] || len(g.Nodes[n].Edges) == 0 {
			t.Fatalf("node %d in Prepare's order twice or without edges", n)
		}
		seen[n] = true
	}
	for n := range g.Nodes {
		if len(g.Nodes[n].Edges) > 0 && !seen[int32(n)] {
			t.Fatalf("node %d is not in Prepare's order", n)
		}
	}
	if done, err := g.Prepare(context.Background(), v, 0); err != nil || !done {
		t.Fatalf("Prepare without a budget: done %v, %v", done, err)
	}
	if done, err := g.Prepare(context.Background(), v, time.Minute); err != nil || !done {
		t.Fatalf("Prepare of a prepared grammar: done %v, %v", done, err)
	}
}

// TestSharedStrings: a string with a format (or bounds) is a rule of its
// own whose masks the Vocab keeps by key, so a second grammar holding the
// same string reuses them rather than walking the vocabulary again.
func TestSharedStrings(t *testing.T) {
	toks, eos := vocabtest.Small()
	v := NewVocab(toks, []int32{eos})
	g1, err := Compile([]byte(`{"type":"object","properties":{"d":{"type":"string","format":"date"},"e":{"type":"string","format":"date"}},"required":["d","e"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := Compile([]byte(`{"type":"array","items":{"type":"string","format":"date"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(g1.SharedRules) != 1 {
		t.Fatalf("two equal date strings in one grammar made %d rules", len(g1.SharedRules))
	}
	// Masks worked out: the nodes' own, and those of nodes walked together
	// (Matcher.groupMask), both kept with the shared table.
	filled := func() int {
		n := 0
		for _, tab := range v.shared {
			for i := range tab.masks {
				if tab.masks[i].Load() != nil {
					n++
				}
			}
			n += len(tab.memo.sets)
		}
		return n
	}
	mask1 := make([]uint64, (v.Size()+63)/64)
	mask2 := make([]uint64, (v.Size()+63)/64)
	m1, m2 := g1.NewMatcher(), g2.NewMatcher()
	if !m1.Advance([]byte(`{"d":"20`)) || !m2.Advance([]byte(`["20`)) {
		t.Fatal("the prefixes were refused")
	}
	m1.Mask(v, mask1)
	before := filled()
	if before == 0 || len(v.shared) != 1 {
		t.Fatalf("no shared masks after the first grammar: %d tables, %d masks", len(v.shared), before)
	}
	m2.Mask(v, mask2)
	if after := filled(); after != before {
		t.Errorf("the second grammar worked out %d masks anew", after-before)
	}
	if !slices.Equal(mask1, mask2) {
		t.Error("the same place in the same date string got two masks")
	}
}

// TestSubtreeMemoAgrees: a node's mask worked out by a matcher that has
// walked many nodes before (its memo of the walks below first bytes,
// walker.walkFirst) equals the one a fresh matcher works out, with Llama
// 3's vocabulary, where the memo matters: objects open to other keys, so
// key tries that leave to the one plain string rest, and formats.
func TestSubtreeMemoAgrees(t *testing.T) {
	v, _, _ := llama3(t)
	schema := `{"type":"object","properties":{
		"author":{"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string","format":"email"},"date":{"type":"string","format":"date-time"}}},
		"committer":{"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string"},"login":{"type":"string","maxLength":12}}},
		"tags":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"label":{"enum":["a","b"]}}}}},
		"required":["author"]}`
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	order := g.prepareOrder()
	shared := g.NewMatcher()
	checked := 0
	for i, n := range order {
		got := maskOf(shared, v, n)
		if i%5 != 0 && checked > 0 { // every fifth node against a fresh matcher: each costs a whole walk
			continue
		}
		fresh := g.NewMatcher()
		want := maskOf(fresh, v, n)
		if !slices.Equal(got.ids, want.ids) || !slices.Equal(got.escapes, want.escapes) {
			t.Fatalf("node %d: with the memo %d tokens %d escapes, fresh %d tokens %d escapes", n, len(got.ids), len(got.escapes), len(want.ids), len(want.escapes))
		}
		checked++
	}
	if len(shared.st.memo) == 0 {
		t.Fatal("the memo was never used")
	}
	t.Logf("%d of %d nodes checked; memo %d walks over %d tokens", checked, len(order), len(shared.st.memo), shared.st.memoTokens)
}

// maskOf is node n's mask as m works it out, its tokens as a sorted list
// and its escapes sorted.
func maskOf(m *Matcher, v *Vocab, n int32) nodeMask {
	w := &walker{st: m.st, v: v, accepted: make([]uint64, v.words)}
	w.walk(0, []config{{n, m.st.bottom}}, 0, true)
	return nodeMask{ids: vocabtest.Allowed(w.accepted), escapes: slices.Sorted(slices.Values(w.escapes))}
}

// TestFormatsGrammarWarmsTheirRules: once FormatsGrammar is prepared for a
// vocabulary, a schema's format rules find every mask worked out.
func TestFormatsGrammarWarmsTheirRules(t *testing.T) {
	toks, eos := vocabtest.Small()
	v := NewVocab(toks, []int32{eos})
	if done, err := FormatsGrammar().Prepare(context.Background(), v, 0); err != nil || !done {
		t.Fatalf("Prepare: %v, %v", done, err)
	}
	for _, f := range []string{"date", "date-time", "time", "duration", "uuid", "email", "ipv4", "ipv6"} {
		g, err := Compile([]byte(`{"type":"object","properties":{"x":{"type":"string","format":"` + f + `"}},"required":["x"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(g.SharedRules) == 0 {
			t.Fatalf("%s: no shared rule", f)
		}
		for _, r := range g.SharedRules {
			tab := v.sharedTable(r)
			for n := r.First; n < r.End; n++ {
				if len(g.Nodes[n].Edges) > 0 && tab.masks[n-r.First].Load() == nil {
					t.Fatalf("%s: node %d of %s has no mask", f, n, r.Key)
				}
			}
		}
	}
}
