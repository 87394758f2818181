package structured

import (
	"slices"
	"testing"

	"github.com/genq/genq/internal/structured/grammar"
)

// A worklist makes one node per state, however often the state is
// reached, and hands the states back once each, in the order reached.
func TestWorklist(t *testing.T) {
	b := &grammar.Builder{Grammar: &grammar.Grammar{}}
	var made []string
	w := newWorklist(b, func(k string, n int32) { made = append(made, k) })
	a, c := w.node("a"), w.node("c")
	if again := w.node("a"); again != a || a == c {
		t.Fatalf("nodes a %d (again %d), c %d: want one node per state", a, again, c)
	}
	var order []string
	for k, n, ok := w.next(); ok; k, n, ok = w.next() {
		if n != w.nodes[k] {
			t.Errorf("state %s handed back with node %d, made as %d", k, n, w.nodes[k])
		}
		order = append(order, k)
		if k == "a" {
			w.node("b") // reached while expanding: queued behind c
			w.node("c")
		}
	}
	if want := []string{"a", "c", "b"}; !slices.Equal(order, want) || !slices.Equal(made, want) {
		t.Fatalf("expanded %v, made %v; want %v both", order, made, want)
	}
}
