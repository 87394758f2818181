package textgen

import (
	"fmt"
	"log/slog"

	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	"github.com/ollama/ollama/tokenizer"
)

// textModel is the loaded model as steps run on it: its step graph and
// cache, its tokenizer and vocabulary, and the limits Open settled. Open
// builds it once; afterwards only the cache its graph owns changes.
type textModel struct {
	model model.Model // its backend gives each step its ml.Context
	graph stepGraph
	tok   tokenizer.Tokenizer
	vocab vocabInfo
	log   *slog.Logger

	slots, batchSize int
	maxNewTokens     int  // an answer's limit when its request sets none
	ignoreEOS        bool // Config.IgnoreEOS
	pipeline         bool // Config.Pipeline, resolved by Open
	prefixCache      bool // Config.PrefixCache is "on"
	contextSize      int

	// prefix holds the tokens every prompt starts with (BOS, the system
	// message, the user header). They are computed once, at start-up, into
	// the cache sequence prefixSeq, and each new sequence shares them.
	prefix []int32

	// narrowK is the most candidates per row a step's graph may hand the
	// sampler, or 0 when whole rows of logits reach the host. A step narrows
	// when it samples at least narrowMinRows rows, to the most its rows'
	// samplers need (stepNarrowK).
	narrowK, narrowMinRows int
}

// prefixSeq is the cache sequence that keeps the shared prompt prefix.
func (tm *textModel) prefixSeq() int { return tm.slots }

func (tm *textModel) close() {
	if tm.graph != nil {
		tm.graph.close()
		tm.graph = nil
	}
	if tm.model != nil {
		tm.model.Backend().Close()
		tm.model = nil
	}
}

// prefillPrefix computes the shared prompt prefix into its own cache
// sequence, before any request arrives.
func (tm *textModel) prefillPrefix() error {
	for start := 0; start < len(tm.prefix); start += tm.batchSize {
		chunk := tm.prefix[start:min(len(tm.prefix), start+tm.batchSize)]
		if _, err := tm.forwardSequence(chunk, int32(start), tm.prefixSeq()); err != nil {
			return err
		}
	}
	return nil
}

// forwardSequence computes tokens of one cache sequence, starting at pos,
// and returns the logits of the last one.
func (tm *textModel) forwardSequence(tokens []int32, pos int32, seqID int) (logits []float32, err error) {
	defer recoverError(&err)
	positions := make([]int32, len(tokens))
	seqs := make([]int, len(tokens))
	for i := range tokens {
		positions[i] = pos + int32(i)
		seqs[i] = seqID
	}
	ctx := tm.model.Backend().NewContext()
	defer ctx.Close()
	batch := input.Batch{
		Inputs:    ctx.Input().FromInts(tokens, len(tokens)),
		Outputs:   ctx.Input().FromInts([]int32{int32(len(tokens) - 1)}, 1),
		Positions: positions,
		Sequences: seqs,
	}
	ctx.SetBatchSize(len(tokens))
	t, err := tm.graph.forward(ctx, batch, false)
	if err != nil {
		return nil, err
	}
	ctx.Compute(t)
	return t.Floats(), nil
}

// recoverError turns a panic into *err. ggml reports a malformed file, a
// lack of memory or a failed compute by panicking, and none of these may
// kill the worker; call it deferred, directly.
func recoverError(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(error); ok {
		*err = e
		return
	}
	*err = fmt.Errorf("%v", r)
}
