package textgen

import (
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"
)

// reserveGraphs allocates compute memory for the largest steps up front, the
// way ollama's runner does, so a step never fails for want of memory.
func (tm *textModel) reserveGraphs() error {
	// The shapes a step takes: a whole batch of one prompt, one token for
	// every slot, and the mix (every other slot decoding beside a chunk).
	// The stream graph's groups differ between them.
	slots, batch := tm.slots, tm.batchSize
	var seqs []int
	var positions []int32
	prompt := func(slot, n int) {
		for i := range n {
			seqs, positions = append(seqs, slot), append(positions, int32(i))
		}
	}
	decoding := func(first, n int) {
		for i := range n {
			seqs, positions = append(seqs, first+i), append(positions, 0)
		}
	}
	reserve := func() error {
		err := tm.reserveGraph(seqs, positions)
		seqs, positions = nil, nil
		return err
	}
	prompt(0, batch)
	if err := reserve(); err != nil {
		return err
	}
	decoding(0, slots)
	if err := reserve(); err != nil {
		return err
	}
	if chunk := batch - (slots - 1); slots > 1 && chunk >= 2 {
		decoding(1, slots-1)
		prompt(0, chunk)
		return reserve()
	}
	return nil
}

func (tm *textModel) reserveGraph(seqs []int, positions []int32) (err error) {
	defer recoverError(&err)
	ctx := tm.model.Backend().NewContext()
	defer ctx.Close()
	n := len(seqs)
	tokens := make([]int32, n)
	batch := input.Batch{
		Inputs:    ctx.Input().FromInts(tokens, n),
		Outputs:   ctx.Input().Empty(ml.DTypeI32, tm.slots),
		Positions: positions,
		Sequences: seqs,
	}
	t, err := tm.graph.forward(ctx, batch, true)
	if err != nil {
		return err
	}
	ctx.Forward(t)
	if tm.narrowK > 0 {
		narrow(ctx, t, tm.narrowK)
	}
	ctx.SetBatchSize(n)
	ctx.Reserve()
	return nil
}
