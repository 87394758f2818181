package textgen

import (
	"github.com/ollama/ollama/ml"
)

type narrowing struct {
	k         int
	ids, vals ml.Tensor
	// whole holds the rows, whole, of the sequences whose sampler needs
	// them (logprobs, penalties, a large top-k), and wholeRow where each
	// one's row is in it; nil when none does.
	whole    ml.Tensor
	wholeRow map[*sequence]int
}

// narrow adds the device's top-k to the step's graph: the ids of each row's
// k best logits, and those logits. Only they cross to the host, so the host
// work per step no longer grows with the vocabulary.
func narrow(ctx ml.Context, logits ml.Tensor, k int) *narrowing {
	vocab, rows := logits.Dim(0), logits.Dim(1)
	ids := logits.TopK(ctx, k).Contiguous(ctx)
	vals := logits.Reshape(ctx, 1, vocab, rows).Rows(ctx, ids)
	ctx.Forward(ids, vals)
	return &narrowing{k: k, ids: ids, vals: vals}
}

// keepWhole adds to the step's graph a copy of the rows of seqs, whole.
func (n *narrowing) keepWhole(ctx ml.Context, logits ml.Tensor, seqs []*sequence, rowOf map[*sequence]int) {
	rows := make([]int32, len(seqs))
	n.wholeRow = make(map[*sequence]int, len(seqs))
	for i, seq := range seqs {
		rows[i] = int32(rowOf[seq])
		n.wholeRow[seq] = i
	}
	n.whole = logits.Rows(ctx, ctx.Input().FromInts(rows, len(rows)))
	ctx.Forward(n.whole)
}
