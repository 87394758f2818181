package ggml

import (
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"
)

// reserveGraphs allocates compute memory for the largest steps up front, the
// way ollama's runner does, so a step never fails for want of memory.
func (e *engine) reserveGraphs() error {
	// The shapes a step takes: a whole batch of one prompt, one token for
	// every slot, and the mix (every other slot decoding beside a chunk).
	// The stream graph's groups differ between them.
	slots, batch := e.slots, e.batchSize
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
		err := e.reserveGraph(seqs, positions)
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

func (e *engine) reserveGraph(seqs []int, positions []int32) (err error) {
	defer recoverError(&err)
	ctx := e.model.Backend().NewContext()
	defer ctx.Close()
	n := len(seqs)
	tokens := make([]int32, n)
	batch := input.Batch{
		Inputs:    ctx.Input().FromInts(tokens, n),
		Outputs:   ctx.Input().Empty(ml.DTypeI32, e.slots),
		Positions: positions,
		Sequences: seqs,
	}
	t, err := e.graph.forward(ctx, batch, true)
	if err != nil {
		return err
	}
	ctx.Forward(t)
	if e.narrowK > 0 {
		narrow(ctx, t, e.narrowK)
	}
	ctx.SetBatchSize(n)
	ctx.Reserve()
	return nil
}
