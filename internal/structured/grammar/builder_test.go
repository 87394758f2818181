package grammar

import (
	"slices"
	"testing"
)

func TestInvert(t *testing.T) {
	type pair struct{ to, from int32 }
	for _, tc := range []struct {
		name  string
		n     int
		pairs []pair
		want  [][]int32
	}{
		{"none", 3, nil, [][]int32{{}, {}, {}}},
		{"one node, self", 1, []pair{{0, 0}}, [][]int32{{0}}},
		{"first and last", 4, []pair{{3, 0}, {0, 2}, {3, 1}}, [][]int32{{2}, {}, {}, {0, 1}}},
		{"in the order added", 3, []pair{{1, 2}, {1, 0}, {1, 1}, {2, 0}}, [][]int32{{}, {2, 0, 1}, {0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := invert(tc.n, func(add func(to, from int32)) {
				for _, p := range tc.pairs {
					add(p.to, p.from)
				}
			})
			for n, want := range tc.want {
				if got := a.of(int32(n)); !slices.Equal(got, want) {
					t.Errorf("node %d: %v, want %v", n, got, want)
				}
			}
		})
	}
}

// TestBuilderSlots checks that nodes whose first edges and epsilons share
// a slab keep them apart however many each is given.
func TestBuilderSlots(t *testing.T) {
	b := &Builder{Grammar: &Grammar{}}
	const nodes = 3 * slabSize // past several slabs and node growths
	for range nodes {
		b.Node()
	}
	// Node i gets i%5 edges and i%3 epsilons, added in turns so that
	// neighbours grow beside each other.
	for round := range 5 {
		for i := range int32(nodes) {
			if round < int(i%5) {
				b.ByteEdge(i, byte(round), byte(i), i)
			}
			if round < int(i%3) {
				b.Eps(i, i+int32(round))
			}
		}
	}
	for i := range int32(nodes) {
		n := b.Grammar.Nodes[i]
		if len(n.Edges) != int(i%5) || len(n.Eps) != int(i%3) {
			t.Fatalf("node %d: %d edges and %d epsilons, want %d and %d", i, len(n.Edges), len(n.Eps), i%5, i%3)
		}
		for j, e := range n.Edges {
			if e != (Edge{Lo: byte(j), Hi: byte(i), To: i}) {
				t.Fatalf("node %d edge %d: %+v", i, j, e)
			}
		}
		for j, to := range n.Eps {
			if to != i+int32(j) {
				t.Fatalf("node %d epsilon %d: %d", i, j, to)
			}
		}
	}
}
