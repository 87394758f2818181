package ggml

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

// stepNarrowK is how many candidates per row st's graph hands the sampler:
// the most any of its narrowable rows needs, at least a few so ties go to
// the lower id as on the host, and at most the backend's narrowK, which the
// graphs were reserved for. The sequences whose sampler needs more, or the
// whole row, come back in whole: their rows cross whole beside the others'
// candidates, so one such request does not bring every row of the step to
// the host. When no row can be narrowed, k is 0.
func (s *scheduler) stepNarrowK(st *step) (k int, whole []*sequence) {
	most := s.engine.narrowK
	if most == 0 || len(st.scores) > 0 {
		return 0, nil // prompt scores need their rows whole, and so many are no few
	}
	k = min(4, most)
	narrowable := 0
	for seq := range st.samples {
		need := seq.req.narrowK
		if need == 0 || need > most {
			whole = append(whole, seq)
			continue
		}
		k = max(k, need)
		narrowable++
	}
	if narrowable == 0 {
		return 0, nil
	}
	return k, whole
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
