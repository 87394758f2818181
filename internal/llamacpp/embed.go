package llamacpp

import (
	"fmt"

	"github.com/hybridgroup/yzma/pkg/llama"
)

// EmbeddingParams size a context that computes pooled embeddings.
type EmbeddingParams struct {
	// Sequences is how many inputs one Encode may hold (ids 0 to
	// Sequences-1).
	Sequences int
	// Batch is the most tokens one Encode takes, over every sequence. An
	// encoder attends over a whole input at once, so it also bounds one
	// input.
	Batch int
	// Threads compute; 0 lets the engine choose.
	Threads int
}

// EmbeddingContext computes one vector per sequence of a batch, pooled as
// the model says (its pooling_type: mean, CLS, last token). It keeps no
// cache between batches. It is not safe for concurrent use.
type EmbeddingContext struct {
	c       llama.Context
	width   int32
	pooling llama.PoolingType
}

// Pooling names of llama.cpp's pooling types.
var poolingNames = map[llama.PoolingType]string{
	llama.PoolingTypeNone: "none", llama.PoolingTypeMean: "mean", llama.PoolingTypeCLS: "cls",
	llama.PoolingTypeLast: "last", llama.PoolingTypeRank: "rank",
}

// NewEmbeddingContext makes an embedding context for m with the model's
// own pooling. A model that pools nothing (per-token vectors) or ranks
// (a reranker) is refused: neither gives one vector per input.
func (m *Model) NewEmbeddingContext(p EmbeddingParams) (*EmbeddingContext, error) {
	if p.Sequences <= 0 || p.Batch <= 0 {
		return nil, fmt.Errorf("embedding context: %d sequences and batches of %d: want each positive", p.Sequences, p.Batch)
	}
	if max := int(llama.MaxParallelSequences()); p.Sequences > max {
		return nil, fmt.Errorf("embedding context: %d sequences: llama.cpp keeps at most %d", p.Sequences, max)
	}
	// A sequence holds a token at least: more sequences than a step's
	// tokens could never be used, and the engine's output buffer is sized
	// for one or the other.
	p.Sequences = min(p.Sequences, p.Batch)
	cp := llama.ContextDefaultParams()
	cp.NCtx = uint32(p.Batch)
	cp.NBatch = uint32(p.Batch)
	cp.NUbatch = uint32(p.Batch)
	cp.NSeqMax = uint32(p.Sequences)
	cp.Embeddings = 1
	cp.PoolingType = llama.PoolingTypeUnspecified // the model's
	if p.Threads > 0 {
		cp.NThreads, cp.NThreadsBatch = int32(p.Threads), int32(p.Threads)
	}
	cp.NoPerf = 1
	logs.takeErrors()
	c, err := llama.InitFromModel(m.m, cp)
	if err != nil {
		return nil, engineSaid(fmt.Errorf("create an embedding context of %d tokens for %d sequences: %w", p.Batch, p.Sequences, err))
	}
	ec := &EmbeddingContext{c: c, width: llama.ModelNEmbdOut(m.m), pooling: llama.GetPoolingType(c)}
	if ec.pooling == llama.PoolingTypeNone || ec.pooling == llama.PoolingTypeRank {
		ec.Close()
		return nil, fmt.Errorf("the model's pooling is %s: it gives no single vector per input (want mean, cls or last)", poolingNames[ec.pooling])
	}
	return ec, nil
}

// Width is the length of each vector.
func (c *EmbeddingContext) Width() int { return int(c.width) }

// Pooling names how the model pools a sequence's tokens into its vector.
func (c *EmbeddingContext) Pooling() string { return poolingNames[c.pooling] }

// Encode runs the model over batch, whose every token must ask for its
// output (Batch.Add's logits), each input a sequence of its own starting
// at position 0. The pooled vectors are then read with Pooled.
func (c *EmbeddingContext) Encode(b *Batch) error { return decode(c.c, b, "encode") }

// Pooled appends sequence seq's pooled vector, from the last Encode, to dst.
func (c *EmbeddingContext) Pooled(dst []float32, seq int) ([]float32, error) {
	v, err := llama.GetEmbeddingsSeq(c.c, llama.SeqId(seq), c.width)
	if err != nil {
		return dst, err
	}
	if v == nil {
		return dst, fmt.Errorf("the engine has no pooled vector for sequence %d", seq)
	}
	return append(dst, v...), nil
}

// Close frees the context.
func (c *EmbeddingContext) Close() {
	if c.c != 0 {
		llama.Free(c.c)
		c.c = 0
	}
}

// TokenizeInput tokenizes an embedding model's input as llama.cpp's server
// does: with the model's special tokens around it (BERT's [CLS] and
// [SEP]), and special tokens in the text read as such.
func (v *Vocab) TokenizeInput(text string) []int32 { return v.Tokenize(text, true, true) }
