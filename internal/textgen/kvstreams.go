package textgen

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/ml/nn"
	"github.com/ollama/ollama/ml/nn/rope"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	"github.com/ollama/ollama/model/models/llama"
)

// streamGraph is genq's own forward pass for llama-architecture models (the
// Llama 3 family every variant serves), over a KV cache that gives each
// slot its own stream of cells.
//
// The engine's llama graph attends with one 3-D query over one unified
// cache: at 64 sequences every token scores the cells of all 64, and masks
// away 63/64 of the work. Here the tokens of a step fall into groups:
//   - every sequence with one token in the step (all decoding ones) forms
//     one group, whose query is 4-D, one stream per sequence, so each
//     token attends over its own stream's cells only;
//   - a sequence with several tokens (a prompt chunk) is a group of its
//     own, attending over its one stream.
//
// Attention costs what each sequence's context costs, as in llama.cpp's
// per-sequence streams. The weights are the engine's, loaded by it; every
// operation outside attention is the engine's llama graph's, in the same
// order, and attention computes the same sums, so the logits match it to
// float rounding (TestStreamGraphMatchesEngine).
type streamGraph struct {
	m       *llama.Model
	backend ml.Backend
	shape   llamaShape

	streams, cellsPerStream int
	padding                 int  // attended cells are rounded up to a multiple of this
	permutedV               bool // values stored cell-major, for the plain (non-flash) attention
	maskType                ml.DType
	// fold is how many query heads share a key head (grouped-query
	// attention), when the plain kernel attends: plainDecodeAttention.
	fold int
	// matmulChunks has prompt chunks attend with two matrix products
	// (matmulChunkAttention) while the flash kernel serves the decoding
	// group: on a CPU, ggml's flash kernel takes one query row at a time.
	matmulChunks bool

	cacheCtxs    []ml.Context
	keys, values []ml.Tensor // per layer: keys [headDim, kvHeads, cells], values [cells, headDim, kvHeads] when permutedV

	// chunks is the most prompt chunks a step may carry: each is an
	// attention group of its own, with its own nodes in every layer, and a
	// graph has a fixed budget of them (ggml aborts the process past it).
	chunks int

	// pendingCopies are prefix copies made by copyPrefix; the next forward
	// graph that carries the slot performs them before anything reads the
	// cache, so that a copy never runs beside a step computing on another
	// goroutine.
	pendingCopies []prefixCopy
}

type prefixCopy struct {
	src, dst int
	n        int32
}

// llamaShape is the llama hyper-parameters the graph needs, read from the
// model's metadata with the engine's defaults.
type llamaShape struct {
	hidden, heads, kvHeads, headDim, ropeDim int
	eps, ropeBase, ropeScale                 float32
}

// newStreamGraph returns the stream graph for m, or false when m is not a
// llama model.
func newStreamGraph(m model.Model, streams, cellsPerStream, padding int) (*streamGraph, bool) {
	lm, ok := m.(*llama.Model)
	if !ok {
		return nil, false
	}
	c := m.Backend().Config()
	s := llamaShape{
		hidden:    int(c.Uint("embedding_length")),
		heads:     int(c.Uint("attention.head_count")),
		kvHeads:   int(c.Uint("attention.head_count_kv")),
		headDim:   int(c.Uint("attention.key_length")),
		ropeDim:   int(c.Uint("rope.dimension_count")),
		eps:       c.Float("attention.layer_norm_rms_epsilon"),
		ropeBase:  c.Float("rope.freq_base", 1e5),
		ropeScale: c.Float("rope.scaling.factor", 1),
	}
	s.headDim = cmp.Or(s.headDim, s.hidden/s.heads)
	s.ropeDim = cmp.Or(s.ropeDim, s.headDim)
	cc := backendCacheConfig(m)
	g := &streamGraph{
		m: lm, backend: m.Backend(), shape: s,
		streams: streams, cellsPerStream: cellsPerStream,
		padding: cmp.Or(padding, cc.CachePadding, 1), permutedV: cc.PermutedV,
		maskType: cmp.Or(cc.MaskDType, ml.DTypeF32),
		fold:     1,
	}
	if g.permutedV && s.kvHeads > 0 && s.heads%s.kvHeads == 0 {
		g.fold = s.heads / s.kvHeads
	}
	g.chunks = chunksPerStep(g.backend, len(lm.Layers))
	cells := streams * cellsPerStream
	for i := range lm.Layers {
		ctx := g.backend.NewContextSize(2).Layer(i)
		g.cacheCtxs = append(g.cacheCtxs, ctx)
		g.keys = append(g.keys, ctx.Zeros(ml.DTypeF16, s.headDim, s.kvHeads, cells))
		if g.permutedV {
			g.values = append(g.values, ctx.Zeros(ml.DTypeF16, cells, s.headDim, s.kvHeads))
		} else {
			g.values = append(g.values, ctx.Zeros(ml.DTypeF16, s.headDim, s.kvHeads, cells))
		}
	}
	return g, true
}

// chunksPerStep is how many prompt chunks fit a step's node budget (the
// engine sizes a graph's node and tensor pool from the model's tensor
// count) beside the layers' own nodes and the decoding group. The costs
// are measured ones with a margin (docs/benchmarks.md): 40 per chunk and
// layer, 100 per layer for the rest of a layer and the decoding group, 128
// for the embeddings, the output and the inputs.
func chunksPerStep(b ml.Backend, layers int) int {
	ctx := b.NewContext()
	nodes := ctx.MaxGraphNodes()
	ctx.Close()
	layers = max(layers, 1)
	return max(1, (nodes-128-layers*100)/(layers*40))
}

func (g *streamGraph) maxChunks() int { return g.chunks }

func (g *streamGraph) close() {
	for _, ctx := range g.cacheCtxs {
		ctx.Close()
	}
	g.cacheCtxs, g.keys, g.values = nil, nil, nil
}

func (g *streamGraph) copyPrefix(src, dst int, n int32) error {
	if int(n) > g.cellsPerStream {
		return fmt.Errorf("prefix of %d tokens exceeds the context of %d", n, g.cellsPerStream)
	}
	g.pendingCopies = append(g.pendingCopies, prefixCopy{src: src, dst: dst, n: n})
	return nil
}

// clear has nothing to free: a stream's cells past a sequence's position
// are never attended, and its next sequence overwrites them.
func (g *streamGraph) clear(slot int) error {
	g.pendingCopies = slices.DeleteFunc(g.pendingCopies, func(c prefixCopy) bool { return c.dst == slot })
	return nil
}

// attentionGroup is tokens of a step that attend together: a run of one
// sequence's consecutive tokens, or (single) every sequence with one token.
type attentionGroup struct {
	single bool
	// first and tokens: the batch rows of a run. streams: a run's stream,
	// or the single group's first stream and how many (the range may hold
	// streams with no token in the step).
	first, tokens int
	stream0       int
	streams       int
	cells         int       // attended cells per stream, padded
	maskRows      int       // mask rows per stream: tokens, or the folded heads
	mask          []float32 // [cells, maskRows, 1, streams]
	gather        []int32   // single: for each stream of the range, its token's batch row
}

// stepLayout is how a step's tokens attend: its groups, where each token's
// key and value go, and where each token's attention output lands in the
// groups' concatenation.
type stepLayout struct {
	groups  []attentionGroup
	cellOf  []int32 // batch row → cache cell
	outRow  []int32 // batch row → row of the concatenated group outputs
	inOrder bool    // outRow is the identity: no reordering needed
}

// layout groups batch's tokens. With reserve, every group attends over the
// whole context, the largest graph of the shape.
func (g *streamGraph) layout(batch input.Batch, reserve bool) (stepLayout, error) {
	n := len(batch.Positions)
	if len(batch.Sequences) != n {
		return stepLayout{}, fmt.Errorf("batch of %d positions and %d sequences", n, len(batch.Sequences))
	}
	l := stepLayout{cellOf: make([]int32, n), outRow: make([]int32, n)}
	var single attentionGroup
	var singles []int // batch rows
	var runs []attentionGroup
	for i := 0; i < n; {
		slot, pos := batch.Sequences[i], batch.Positions[i]
		if slot < 0 || slot >= g.streams {
			return stepLayout{}, fmt.Errorf("sequence %d: want 0 to %d", slot, g.streams-1)
		}
		j := i + 1
		for j < n && batch.Sequences[j] == slot && batch.Positions[j] == batch.Positions[j-1]+1 {
			j++
		}
		if last := int(batch.Positions[j-1]); pos < 0 || last >= g.cellsPerStream {
			return stepLayout{}, fmt.Errorf("positions %d to %d of sequence %d: want 0 to %d (the context)", pos, last, slot, g.cellsPerStream-1)
		}
		for k := i; k < j; k++ {
			l.cellOf[k] = int32(slot*g.cellsPerStream) + batch.Positions[k]
		}
		if j-i == 1 {
			singles = append(singles, i)
		} else {
			runs = append(runs, attentionGroup{first: i, tokens: j - i, stream0: slot, streams: 1})
		}
		i = j
	}
	if len(singles) > 0 {
		lo, hi := math.MaxInt, -1
		for _, row := range singles {
			lo, hi = min(lo, batch.Sequences[row]), max(hi, batch.Sequences[row])
		}
		single = attentionGroup{single: true, tokens: 1, stream0: lo, streams: hi - lo + 1}
		single.gather = make([]int32, single.streams)
		seen := make([]bool, single.streams)
		for j := range single.gather {
			single.gather[j] = int32(singles[0]) // streams without a token: any row, output unused
		}
		for _, row := range singles {
			j := batch.Sequences[row] - lo
			if seen[j] {
				return stepLayout{}, fmt.Errorf("sequence %d has two separate tokens in one step", batch.Sequences[row])
			}
			seen[j] = true
			single.gather[j] = int32(row)
			l.outRow[row] = int32(j)
		}
		l.groups = append(l.groups, single)
	}
	offset := single.streams
	for _, r := range runs {
		for t := range r.tokens {
			l.outRow[r.first+t] = int32(offset + t)
		}
		offset += r.tokens
		l.groups = append(l.groups, r)
	}
	l.inOrder = offset == n
	for i, row := range l.outRow {
		l.inOrder = l.inOrder && int(row) == i
	}
	if l.inOrder && len(singles) > 0 {
		for j, row := range single.gather {
			l.inOrder = l.inOrder && int(row) == j
		}
	}

	// Masks: a token at position p sees its stream's cells 0 to p.
	for gi := range l.groups {
		grp := &l.groups[gi]
		type query struct {
			t, stream int
			pos       int32
		}
		var queries []query
		if grp.single {
			for j, row := range grp.gather {
				pos := int32(0) // a stream with no token: sees cell 0, output unused
				if batch.Sequences[row] == grp.stream0+j {
					pos = batch.Positions[row]
				}
				queries = append(queries, query{stream: j, pos: pos})
			}
		} else {
			for t := range grp.tokens {
				queries = append(queries, query{t: t, pos: batch.Positions[grp.first+t]})
			}
		}
		most := int32(0)
		for _, q := range queries {
			most = max(most, q.pos)
		}
		grp.cells = min(g.cellsPerStream, roundUp(int(most)+1, g.padding))
		if reserve {
			grp.cells = g.cellsPerStream
		}
		grp.maskRows = grp.tokens
		if grp.single {
			grp.maskRows = g.fold // tokens is 1: one row per folded head
		}
		grp.mask = make([]float32, grp.cells*grp.maskRows*grp.streams)
		for _, q := range queries {
			for r := range grp.maskRows / grp.tokens {
				row := grp.mask[(q.stream*grp.maskRows+r*grp.tokens+q.t)*grp.cells:][:grp.cells]
				for c := int(q.pos) + 1; c < len(row); c++ {
					row[c] = float32(math.Inf(-1))
				}
			}
		}
	}
	return l, nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

func (g *streamGraph) forward(ctx ml.Context, batch input.Batch, reserve bool) (ml.Tensor, error) {
	l, err := g.layout(batch, reserve)
	if err != nil {
		return nil, err
	}
	if !reserve {
		g.emitCopies(ctx, batch.Sequences)
	}
	s := g.shape
	n := len(batch.Positions)
	positions := ctx.Input().FromInts(batch.Positions, n)
	cells := ctx.Input().FromInts(l.cellOf, n)
	var outRows ml.Tensor
	if !l.inOrder {
		outRows = ctx.Input().FromInts(l.outRow, n)
	}
	masks := make([]ml.Tensor, len(l.groups))
	gathers := make([]ml.Tensor, len(l.groups))
	for i, grp := range l.groups {
		masks[i] = ctx.Input().FromFloats(grp.mask, grp.cells, grp.maskRows, 1, grp.streams)
		if g.maskType != ml.DTypeF32 && !g.matmulChunk(grp) {
			masks[i] = masks[i].Cast(ctx, g.maskType)
		}
		if grp.single && !l.inOrder {
			gathers[i] = ctx.Input().FromInts(grp.gather, len(grp.gather))
		}
	}

	hidden := g.m.TokenEmbedding.Forward(ctx, batch.Inputs)
	for i := range g.m.Layers {
		layer := &g.m.Layers[i]
		residual := hidden
		x := layer.AttentionNorm.Forward(ctx, hidden, s.eps)
		x = g.attention(ctx, i, x, positions, cells, l, masks, gathers, outRows)

		// The last layer keeps only the rows whose logits the step samples.
		if i == len(g.m.Layers)-1 && batch.Outputs != nil {
			x = x.Rows(ctx, batch.Outputs)
			residual = residual.Rows(ctx, batch.Outputs)
		}
		hidden = x.Add(ctx, residual)
		residual = hidden
		x = layer.MLPNorm.Forward(ctx, hidden, s.eps)
		mlp := layer.MLP
		x = mlp.Gate.Forward(ctx, x).SILU(ctx, mlp.Up.Forward(ctx, x))
		x = mlp.Down.Forward(ctx, x)
		hidden = x.Add(ctx, residual)
	}
	hidden = g.m.OutputNorm.Forward(ctx, hidden, s.eps)
	logits := g.m.Output.Forward(ctx, hidden)
	ctx.Forward(logits)
	return logits, nil
}

// attention is one layer's self-attention: projections, rotary embeddings,
// the new keys and values into their cells, then each group attending over
// its streams.
func (g *streamGraph) attention(ctx ml.Context, layer int, x, positions, cells ml.Tensor, l stepLayout, masks, gathers []ml.Tensor, outRows ml.Tensor) ml.Tensor {
	s := g.shape
	sa := g.m.Layers[layer].SelfAttention
	n := x.Dim(1)
	rotate := func(t ml.Tensor) ml.Tensor {
		return nn.RoPE(ctx, t, positions, s.ropeDim, s.ropeBase, 1./s.ropeScale, rope.WithFactors(sa.RopeFactors))
	}
	q := rotate(sa.Query.Forward(ctx, x).Reshape(ctx, s.headDim, s.heads, n))
	k := rotate(sa.Key.Forward(ctx, x).Reshape(ctx, s.headDim, s.kvHeads, n))
	v := sa.Value.Forward(ctx, x).Reshape(ctx, s.headDim, s.kvHeads, n)

	kvDim := s.headDim * s.kvHeads
	allCells := g.streams * g.cellsPerStream
	keys, values := g.keys[layer], g.values[layer]
	ctx.Forward(keys.Reshape(ctx, kvDim, allCells).SetRows(ctx, k.Reshape(ctx, kvDim, n), cells))
	if g.permutedV {
		// One element per row: each value lands in its cell's column.
		vt := v.Reshape(ctx, kvDim, 1, n).Permute(ctx, 2, 0, 1, 3)
		ctx.Forward(values.Reshape(ctx, 1, allCells, kvDim).SetRows(ctx, vt, cells))
	} else {
		ctx.Forward(values.Reshape(ctx, kvDim, allCells).SetRows(ctx, v.Reshape(ctx, kvDim, n), cells))
	}

	scale := 1 / math.Sqrt(float64(s.headDim))
	qDim := s.headDim * s.heads
	var out ml.Tensor
	for i, grp := range l.groups {
		var query ml.Tensor
		if grp.single {
			query = q.Reshape(ctx, qDim, n)
			if gathers[i] != nil {
				query = query.Rows(ctx, gathers[i])
			} else if grp.streams < n {
				// In order: the group's tokens are the step's first rows.
				query = query.View(ctx, 0, qDim, query.Stride(1), grp.streams)
			}
			if g.permutedV && g.fold*s.kvHeads == s.heads {
				out = appendRows(ctx, out, g.plainDecodeAttention(ctx, query, keys, values, masks[i], grp, scale))
				continue
			}
			query = query.Reshape(ctx, s.headDim, s.heads, 1, grp.streams)
		} else {
			query = q.View(ctx, grp.first*q.Stride(2), s.headDim, q.Stride(1), s.heads, q.Stride(2), grp.tokens)
			if g.matmulChunk(grp) {
				out = appendRows(ctx, out, g.matmulChunkAttention(ctx, query, keys, values, masks[i], grp, scale))
				continue
			}
		}
		key, value := g.streamViews(ctx, keys, values, grp)
		att := query.(ml.ScaledDotProductAttention).ScaledDotProductAttention(ctx, key, value, masks[i], nil, nil, scale, true)
		out = appendRows(ctx, out, att.Reshape(ctx, qDim, grp.tokens*grp.streams))
	}
	if outRows != nil {
		out = out.Rows(ctx, outRows)
	}
	return sa.Output.Forward(ctx, out)
}

// plainDecodeAttention is the decoding group's attention with the plain
// kernel (the CPU's, for small models): query [headDim·heads, streams] in,
// the same shape out. The query heads that share a key head are one
// product of fold columns, [headDim, fold, kvHeads, streams]: ggml's CPU
// GEMM takes only products of two columns or more, and one column at a
// time is a dot product per cell. Built here rather than by the backend's
// attention, which permutes its query and output, so the heads come out in
// order with no copy: 8 nodes a layer instead of 15.
func (g *streamGraph) plainDecodeAttention(ctx ml.Context, query, keys, values, mask ml.Tensor, grp attentionGroup, scale float64) ml.Tensor {
	s := g.shape
	key, value := g.streamViews(ctx, keys, values, grp)
	query = query.Reshape(ctx, s.headDim, g.fold, s.kvHeads, grp.streams)
	kq := key.Permute(ctx, 0, 2, 1, 3).Mulmat(ctx, query) // [cells, fold, kvHeads, streams]
	kq = kq.Scale(ctx, scale).Add(ctx, mask).Softmax(ctx)
	return value.Mulmat(ctx, kq).Reshape(ctx, s.headDim*s.heads, grp.streams)
}

// appendRows is out with rows' columns after its own (out may be nil).
func appendRows(ctx ml.Context, out, rows ml.Tensor) ml.Tensor {
	if out == nil {
		return rows
	}
	return out.Concat(ctx, rows, 1)
}

// streamViews are the keys and values grp attends over: the first
// grp.cells cells of each of its streams, as the attention wants them
// (keys [headDim, kvHeads, cells, streams]; values the same, or
// [cells, headDim, kvHeads, streams] when permuted).
func (g *streamGraph) streamViews(ctx ml.Context, keys, values ml.Tensor, grp attentionGroup) (ml.Tensor, ml.Tensor) {
	s := g.shape
	kRow := keys.Stride(2) // bytes of one cell's keys
	key := keys.View(ctx, grp.stream0*g.cellsPerStream*kRow,
		s.headDim, keys.Stride(1),
		s.kvHeads, kRow,
		grp.cells, kRow*g.cellsPerStream,
		grp.streams)
	if g.permutedV {
		elem := values.Stride(0)
		value := values.View(ctx, grp.stream0*g.cellsPerStream*elem,
			grp.cells, values.Stride(1),
			s.headDim, values.Stride(2),
			s.kvHeads, elem*g.cellsPerStream,
			grp.streams)
		return key, value
	}
	vRow := values.Stride(2)
	value := values.View(ctx, grp.stream0*g.cellsPerStream*vRow,
		s.headDim, values.Stride(1),
		s.kvHeads, vRow,
		grp.cells, vRow*g.cellsPerStream,
		grp.streams)
	return key, value
}

// emitCopies adds the pending prefix copies of the slots in seqs to ctx's
// graph, ahead of the step's own nodes, which ggml runs in the order they
// were added. A slot with no token in the step keeps its copy pending: were
// the step to fail, only its own sequences start over (with a new copy).
func (g *streamGraph) emitCopies(ctx ml.Context, seqs []int) {
	kept := g.pendingCopies[:0]
	for _, c := range g.pendingCopies {
		if !slices.Contains(seqs, c.dst) {
			kept = append(kept, c)
			continue
		}
		for layer := range g.keys {
			keys, values := g.keys[layer], g.values[layer]
			kRow := keys.Stride(2)
			n := int(c.n) * g.shape.headDim * g.shape.kvHeads
			from := keys.View(ctx, c.src*g.cellsPerStream*kRow, n)
			to := keys.View(ctx, c.dst*g.cellsPerStream*kRow, n)
			ctx.Forward(from.Copy(ctx, to))
			if g.permutedV {
				elem, kvDim := values.Stride(0), g.shape.headDim*g.shape.kvHeads
				from = values.View(ctx, c.src*g.cellsPerStream*elem, int(c.n), values.Stride(1), kvDim)
				to = values.View(ctx, c.dst*g.cellsPerStream*elem, int(c.n), values.Stride(1), kvDim)
			} else {
				vRow := values.Stride(2)
				from = values.View(ctx, c.src*g.cellsPerStream*vRow, n)
				to = values.View(ctx, c.dst*g.cellsPerStream*vRow, n)
			}
			ctx.Forward(from.Copy(ctx, to))
		}
	}
	g.pendingCopies = kept
}
