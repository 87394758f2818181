package grammar

import "testing"

func TestWidestGap(t *testing.T) {
	tests := []struct {
		name  string
		spans []span
		want  int32
	}{
		{"one", []span{{2, 5}}, 0},
		{"touching", []span{{0, 0}, {1, 3}}, 0},
		{"overlapping", []span{{4, 9}, {0, 5}}, 0},
		{"a gap of one", []span{{0, 0}, {2, unbounded}}, 1},
		{"gaps of one and three, unordered", []span{{9, 9}, {0, 1}, {3, 5}}, 3},
		{"nothing past an unbounded span", []span{{0, unbounded}, {9, 9}}, 0},
	}
	for _, tc := range tests {
		if got := widestGap(tc.spans); got != tc.want {
			t.Errorf("%s: widestGap = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRegionCanon keeps a count's own mask near the bounds, and one mask
// for the counts far from both.
func TestRegionCanon(t *testing.T) {
	r := &regionSpec{min: 100, max: 1000, maxNeed: 3, maxLong: 5}
	const maxLen = 10
	tests := []struct{ count, want int32 }{
		{0, 100 - 15 - 1}, {50, 100 - 15 - 1}, {84, 100 - 15 - 1},
		{85, 85}, {99, 99}, {100, 100}, {500, 100}, {986, 100},
		{987, 987}, {1000, 1000},
	}
	for _, tc := range tests {
		if got := r.canon(tc.count, maxLen); got != tc.want {
			t.Errorf("canon(%d) = %d, want %d", tc.count, got, tc.want)
		}
	}
	open := &regionSpec{min: 3, max: -1}
	if got := open.canon(3, maxLen); got != 3 {
		t.Errorf("no max: canon(3) = %d, want 3", got)
	}
	if got := open.next(3); got != 3 {
		t.Errorf("no max: next(3) = %d, want 3, as every count past min is alike", got)
	}
}

func TestZeroCycle(t *testing.T) {
	b := &Builder{Grammar: &Grammar{}}
	a, c := b.Node(), b.Node()
	b.ByteEdge(a, 'x', 'x', c)
	b.Eps(c, a)
	nodes := b.Grammar.Nodes
	if !zeroCycle(nodes, make([][]bool, len(nodes))) {
		t.Error("a cycle of a byte that begins no character and an epsilon: not found")
	}
	if zeroCycle(nodes, [][]bool{{true}, nil}) {
		t.Error("a cycle whose byte begins a character: taken for one that begins none")
	}
}
