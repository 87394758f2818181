package structured

import "github.com/genq/genq/internal/structured/grammar"

// worklist numbers the states of an automaton built as it is explored,
// a product's say: each state is a builder node, made and queued on its
// first reach, so that each is expanded once, in the order reached.
type worklist[K comparable] struct {
	b     *grammar.Builder
	nodes map[K]int32
	queue []K
	// made is told of each state's node as it is made.
	made func(k K, n int32)
}

func newWorklist[K comparable](b *grammar.Builder, made func(k K, n int32)) *worklist[K] {
	return &worklist[K]{b: b, nodes: map[K]int32{}, made: made}
}

// node is k's node, made and queued on k's first reach.
func (w *worklist[K]) node(k K) int32 {
	if n, ok := w.nodes[k]; ok {
		return n
	}
	n := w.b.Node()
	w.nodes[k] = n
	w.queue = append(w.queue, k)
	w.made(k, n)
	return n
}

// next is the next state to expand and its node; false once none is left.
func (w *worklist[K]) next() (K, int32, bool) {
	if len(w.queue) == 0 {
		var zero K
		return zero, 0, false
	}
	k := w.queue[0]
	w.queue = w.queue[1:]
	return k, w.nodes[k], true
}
