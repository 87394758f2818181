package llamacpp

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/hybridgroup/yzma/pkg/llama"
)

// ContextParams size a context: its KV cache, its batches, its threads.
type ContextParams struct {
	// Cells is the KV cache's size in tokens, over every sequence. With
	// Unified false it is split evenly between the Sequences.
	Cells int
	// Sequences is how many KV sequences (ids 0 to Sequences-1) it keeps.
	Sequences int
	// Batch is the most tokens one Decode takes.
	Batch int
	// Threads compute; 0 lets the engine choose.
	Threads int
	// FlashAttention is "auto", "on" or "off".
	FlashAttention string
	// Unified keeps one KV buffer for every sequence: a token attends over
	// the cells in use by any of them, masked to its own, and a copy of a
	// sequence's cells to another shares them. Off, each sequence has its
	// own stream of Cells/Sequences cells and attends over it alone; a copy
	// between sequences copies a whole stream.
	Unified bool
	// OffloadKQV keeps the KV cache on the GPU when the layers are there.
	OffloadKQV bool
}

// Context runs decoding steps over one KV cache. It is not safe for
// concurrent use: one goroutine owns it.
type Context struct {
	c      llama.Context
	mem    llama.Memory
	vocab  int
	params ContextParams
	// seqCells is the cells one sequence may hold.
	seqCells int
	// topK and chains are the device top-k each sequence's rows are
	// narrowed to (SetDeviceTopK), and the sampler chains doing it, which
	// the engine borrows and the context frees.
	topK   map[int]int
	chains map[int]llama.Sampler
}

// NewContext makes a context for m.
func (m *Model) NewContext(p ContextParams) (*Context, error) {
	if p.Cells <= 0 || p.Sequences <= 0 || p.Batch <= 0 {
		return nil, fmt.Errorf("context: %d cells, %d sequences and batches of %d: want each positive", p.Cells, p.Sequences, p.Batch)
	}
	if max := int(llama.MaxParallelSequences()); p.Sequences > max {
		return nil, fmt.Errorf("context: %d sequences: llama.cpp keeps at most %d", p.Sequences, max)
	}
	cp := llama.ContextDefaultParams()
	cp.NCtx = uint32(p.Cells)
	cp.NBatch = uint32(p.Batch)
	cp.NUbatch = uint32(p.Batch)
	cp.NSeqMax = uint32(p.Sequences)
	if p.Threads > 0 {
		cp.NThreads, cp.NThreadsBatch = int32(p.Threads), int32(p.Threads)
	}
	switch p.FlashAttention {
	case "on":
		cp.FlashAttentionType = llama.FlashAttentionTypeEnabled
	case "off":
		cp.FlashAttentionType = llama.FlashAttentionTypeDisabled
	default:
		cp.FlashAttentionType = llama.FlashAttentionTypeAuto
	}
	cp.KVUnified = boolByte(p.Unified)
	cp.Offload_kqv = boolByte(p.OffloadKQV)
	cp.NoPerf = 1
	logs.takeErrors()
	c, err := llama.InitFromModel(m.m, cp)
	if err != nil {
		return nil, engineSaid(fmt.Errorf("create a context of %d cells for %d sequences: %w", p.Cells, p.Sequences, err))
	}
	mem, err := llama.GetMemory(c)
	if err != nil || mem == 0 {
		llama.Free(c)
		return nil, fmt.Errorf("context: no KV cache: %v", err)
	}
	ctx := &Context{c: c, mem: mem, vocab: m.Vocab.Size(), params: p, seqCells: p.Cells,
		topK: map[int]int{}, chains: map[int]llama.Sampler{}}
	if !p.Unified {
		ctx.seqCells = int(llama.NCtxSeq(c))
	}
	return ctx, nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Close frees the context and its cache.
func (c *Context) Close() {
	if c.c != 0 {
		llama.Free(c.c)
		c.c = 0
	}
	for seq, chain := range c.chains {
		llama.SamplerFree(chain)
		delete(c.chains, seq)
	}
}

// SetDeviceTopK has the engine narrow sequence seq's rows to their k best
// logits on the device, in the step's own graph (llama.cpp's backend
// sampling): only those k logits and their ids reach the host, read with
// Candidates, and a step whose rows are all narrowed copies no whole row.
// k 0 hands the rows back whole. The engine sizes its graph again after a
// change, so a sequence's k is best kept as it is.
func (c *Context) SetDeviceTopK(seq, k int) error {
	if c.topK[seq] == k {
		return nil
	}
	var chain llama.Sampler
	if k > 0 {
		chain = llama.SamplerChainInit(llama.SamplerChainDefaultParams())
		llama.SamplerChainAdd(chain, llama.SamplerInitTopK(int32(k)))
	}
	if !llama.SetSampler(c.c, llama.SeqId(seq), chain) {
		if chain != 0 {
			llama.SamplerFree(chain)
		}
		return engineSaid(fmt.Errorf("the engine cannot narrow sequence %d's rows to %d on its device", seq, k))
	}
	if old, ok := c.chains[seq]; ok {
		llama.SamplerFree(old) // detached above
	}
	if k > 0 {
		c.topK[seq], c.chains[seq] = k, chain
	} else {
		delete(c.topK, seq)
		delete(c.chains, seq)
	}
	return nil
}

// DeviceTopK is the k sequence seq's rows are narrowed to, or 0.
func (c *Context) DeviceTopK(seq int) int { return c.topK[seq] }

// Candidates are the ids and logits of the best tokens of the batch's
// token at index i, whose sequence the device narrows (SetDeviceTopK), in
// no particular order: views of the engine's buffers, valid until the next
// Decode.
func (c *Context) Candidates(i int) ([]int32, []float32, error) {
	n, errN := llama.GetSampledCandidatesCountIth(c.c, int32(i))
	m, errM := llama.GetSampledLogitsCountIth(c.c, int32(i))
	if err := errors.Join(errN, errM); err != nil {
		return nil, nil, fmt.Errorf("the candidates of token %d of the step: %w", i, err)
	}
	if n == 0 || n != m {
		return nil, nil, fmt.Errorf("the engine narrowed token %d of the step to %d candidates and %d logits", i, n, m)
	}
	ids, errIDs := llama.GetSampledCandidatesIth(c.c, int32(i), int(n))
	logits, errLogits := llama.GetSampledLogitsIth(c.c, int32(i), int(n))
	if err := errors.Join(errIDs, errLogits); err != nil {
		return nil, nil, fmt.Errorf("the candidates of token %d of the step: %w", i, err)
	}
	if ids == nil || logits == nil {
		return nil, nil, fmt.Errorf("the engine kept no candidates for token %d of the step", i)
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&ids[0])), n), logits, nil
}

// Params are the settings the context was made with.
func (c *Context) Params() ContextParams { return c.params }

// SequenceCells is the most cells one sequence may hold.
func (c *Context) SequenceCells() int { return c.seqCells }

// Errors of Decode and Encode, by what the engine returned.
var (
	// ErrNoCells: the cache has no room for the batch's tokens.
	ErrNoCells = errors.New("the KV cache has no room for the batch")
	// ErrBadBatch: the engine refused the batch as given (a position out
	// of order, a sequence id out of range).
	ErrBadBatch = errors.New("the engine refused the batch")
)

// Decode runs the model over batch: it writes each token's keys and values
// into its sequence's cells and computes the logits of the tokens marked
// for them, readable with Logits until the next Decode. After a failure
// the cells of the batch's tokens may hold anything.
func (c *Context) Decode(b *Batch) error { return decode(c.c, b, "decode") }

// decode runs llama_decode over b in ctx, naming the call what in its
// errors: a text context decodes, an embedding context encodes, through
// the one engine call and its codes.
func decode(ctx llama.Context, b *Batch, what string) error {
	if b.Len() == 0 {
		return nil
	}
	rc, err := llama.Decode(ctx, b.b)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case rc == 0:
		return nil
	case rc == 1:
		return engineSaid(fmt.Errorf("%s %d tokens: %w", what, b.Len(), ErrNoCells))
	case rc == -1:
		return engineSaid(fmt.Errorf("%s %d tokens: %w", what, b.Len(), ErrBadBatch))
	}
	return engineSaid(fmt.Errorf("%s %d tokens: the engine failed (code %d)", what, b.Len(), rc))
}

// Logits are the logits computed for the batch's token at index i (its
// place in the batch, which must have asked for them): a view of the
// engine's own buffer, valid until the next Decode. Callers may change it
// in place.
func (c *Context) Logits(i int) ([]float32, error) {
	row, err := llama.GetLogitsIth(c.c, int32(i), c.vocab)
	if err != nil {
		return nil, fmt.Errorf("the logits of token %d of the step: %w", i, err)
	}
	if row == nil {
		return nil, fmt.Errorf("the engine returned no logits for token %d of the step", i)
	}
	return row, nil
}

// RemoveCells forgets sequence seq's cells at positions [from, to); a
// negative to means to the end, and from 0 with to -1 the whole sequence.
func (c *Context) RemoveCells(seq int, from, to int) error {
	ok, err := llama.MemorySeqRm(c.mem, llama.SeqId(seq), llama.Pos(from), llama.Pos(to))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the engine could not remove positions %d to %d of sequence %d", from, to, seq)
	}
	return nil
}

// CopyCells makes positions [0, n) of sequence dst those of src, and
// forgets whatever dst held. With a unified cache the cells are shared,
// not copied; otherwise the engine copies src's whole stream (llama.cpp
// copies streams only whole) when the next Decode starts, and the tail past
// n is then forgotten.
func (c *Context) CopyCells(src, dst, n int) error {
	if err := c.RemoveCells(dst, 0, -1); err != nil {
		return err
	}
	if n <= 0 {
		return nil
	}
	if c.params.Unified {
		return llama.MemorySeqCp(c.mem, llama.SeqId(src), llama.SeqId(dst), 0, llama.Pos(n))
	}
	if err := llama.MemorySeqCp(c.mem, llama.SeqId(src), llama.SeqId(dst), -1, -1); err != nil {
		return err
	}
	return c.RemoveCells(dst, n, -1)
}

// LastPosition is the highest position sequence seq holds, or -1.
func (c *Context) LastPosition(seq int) int {
	p, err := llama.MemorySeqPosMax(c.mem, llama.SeqId(seq))
	if err != nil {
		return -1
	}
	return int(p)
}

// Batch is the tokens of one Decode: each with its position, its sequence
// and whether its logits are wanted.
type Batch struct {
	b   llama.Batch
	cap int
}

// NewBatch makes a batch of at most capacity tokens. Free it with Free.
func NewBatch(capacity int) *Batch {
	return &Batch{b: llama.BatchInit(int32(capacity), 0, 1), cap: capacity}
}

// Add appends a token of sequence seq at position pos, and asks for its
// logits when logits is set. It returns the token's index in the batch.
func (b *Batch) Add(token int32, pos int, seq int, logits bool) (int, error) {
	i := int(b.b.NTokens)
	if i >= b.cap {
		return 0, fmt.Errorf("batch of %d tokens is full", b.cap)
	}
	unsafe.Slice((*llama.Token)(b.b.Token), b.cap)[i] = llama.Token(token)
	unsafe.Slice((*llama.Pos)(b.b.Pos), b.cap)[i] = llama.Pos(pos)
	unsafe.Slice((*int32)(b.b.NSeqId), b.cap)[i] = 1
	*unsafe.Slice((**llama.SeqId)(b.b.SeqId), b.cap)[i] = llama.SeqId(seq)
	var flag int8
	if logits {
		flag = 1
	}
	unsafe.Slice((*int8)(b.b.Logits), b.cap)[i] = flag
	b.b.NTokens++
	return i, nil
}

// Seq is the sequence of the batch's i-th token.
func (b *Batch) Seq(i int) int {
	return int(*unsafe.Slice((**llama.SeqId)(b.b.SeqId), b.cap)[i])
}

// Len is the number of tokens in the batch.
func (b *Batch) Len() int { return int(b.b.NTokens) }

// Clear empties the batch.
func (b *Batch) Clear() { b.b.NTokens = 0 }

// Free releases the batch's memory.
func (b *Batch) Free() {
	if b.cap > 0 {
		llama.BatchFree(b.b)
		b.cap = 0
	}
}

// SetThreads sets the CPU threads the next steps compute on.
func (c *Context) SetThreads(n int) {
	if n > 0 {
		llama.SetNThreads(c.c, int32(n), int32(n))
	}
}
