package grammar

import (
	"iter"
	"slices"
	"testing"
)

func TestCycleAt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edges [][]int32
		want  int32
	}{
		{"no vertex", nil, -1},
		{"a chain", [][]int32{{1}, {2}, {}}, -1},
		{"a diamond", [][]int32{{1, 2}, {3}, {3}, {}}, -1},
		{"a loop on itself", [][]int32{{0}}, 0},
		{"a cycle back to the second", [][]int32{{1}, {2}, {1}}, 1},
		{"a cycle reached late", [][]int32{{}, {}, {3}, {2}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			succ := func(v int32) iter.Seq[int32] { return slices.Values(tc.edges[v]) }
			if got := cycleAt(len(tc.edges), succ); got != tc.want {
				t.Fatalf("cycleAt = %d, want %d", got, tc.want)
			}
		})
	}
}
