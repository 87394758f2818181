package grammar

import "iter"

// walkMark is where a depth-first walk stands with a vertex.
type walkMark uint8

const (
	unseen walkMark = iota
	onPath          // being walked: met again, it closes a cycle
	walked
)

// cycleAt walks a graph of n vertices depth first, each vertex's
// successors in the order succ yields them, and returns the first vertex
// found again while on the path (the end of an edge that closes a cycle),
// or -1 when the graph has no cycle.
func cycleAt(n int, succ func(v int32) iter.Seq[int32]) int32 {
	mark := make([]walkMark, n)
	var visit func(v int32) int32
	visit = func(v int32) int32 {
		mark[v] = onPath
		for w := range succ(v) {
			switch mark[w] {
			case onPath:
				return w
			case unseen:
				if c := visit(w); c >= 0 {
					return c
				}
			}
		}
		mark[v] = walked
		return -1
	}
	for v := range n {
		if mark[v] == unseen {
			if c := visit(int32(v)); c >= 0 {
				return c
			}
		}
	}
	return -1
}
