package textgen

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/genq/genq/internal/llamacpp"
)

// textModel is the loaded model as steps run on it: the engine's model and
// context (its KV cache holds a sequence per slot), the vocabulary, and the
// limits Open settled. Open builds it once; afterwards only the cache
// changes, and only the scheduler's loop touches it.
type textModel struct {
	model *llamacpp.Model
	ctx   *llamacpp.Context
	batch *llamacpp.Batch // reused by every step
	vocab *llamacpp.Vocab
	log   *slog.Logger

	slots, batchSize int
	unified          bool // one KV buffer for every slot (Config.KVUnified, resolved by Open)
	ignoreEOS        bool // Config.IgnoreEOS
	prefixCache      bool // Config.PrefixCache is "on"
	contextSize      int
	// governor fits the compute threads to the CPUs other processes leave
	// free (threads.go); nil when TEXT_THREADS sets them or a GPU computes.
	governor *threadGovernor
	threads  int // the threads steps compute on now

	// deviceTopK narrows the rows of requests that need only their top-k
	// on the device (Config.DeviceSampling, resolved by Open).
	deviceTopK bool

	// preserved are the control tokens whose text an answer keeps: a tool
	// call's opener, a reasoning block's tags, where the model's vocabulary
	// makes them special (toolcall.Dialect.PreservedTokens).
	preserved map[int32]bool

	// ends are the vocabulary's end-of-generation tokens, found on first
	// use (endTokens).
	endOnce sync.Once
	ends    []int32

	// prefix holds the tokens every prompt starts with (BOS, the system
	// message, the user header). They are computed once, at start-up, into
	// the cache sequence prefixSeq, and each new sequence shares them.
	prefix []int32
}

// prefixSeq is the cache sequence that keeps the shared prompt prefix.
func (tm *textModel) prefixSeq() int { return tm.slots }

func (tm *textModel) close() {
	if tm.batch != nil {
		tm.batch.Free()
		tm.batch = nil
	}
	if tm.ctx != nil {
		tm.ctx.Close()
		tm.ctx = nil
	}
	if tm.model != nil {
		tm.model.Close()
		tm.model = nil
	}
}

// prefillPrefix computes the shared prompt prefix into its own cache
// sequence, before any request arrives.
func (tm *textModel) prefillPrefix() error {
	for start := 0; start < len(tm.prefix); start += tm.batchSize {
		chunk := tm.prefix[start:min(len(tm.prefix), start+tm.batchSize)]
		if _, err := tm.forwardSequence(chunk, start, tm.prefixSeq()); err != nil {
			return err
		}
	}
	return nil
}

// forwardSequence computes tokens of one cache sequence, starting at pos,
// and returns the logits of the last one (the engine's buffer, valid until
// the next step).
func (tm *textModel) forwardSequence(tokens []int32, pos int, seq int) ([]float32, error) {
	b := tm.batch
	b.Clear()
	last := 0
	for i, tok := range tokens {
		var err error
		if last, err = b.Add(tok, pos+i, seq, i == len(tokens)-1); err != nil {
			return nil, err
		}
	}
	if err := tm.ctx.Decode(b); err != nil {
		return nil, err
	}
	return tm.ctx.Logits(last)
}

// piece is the text token id writes into an answer, and whether it writes
// any: none for a control token, unless the model's dialect preserves it.
func (tm *textModel) piece(id int32) ([]byte, bool) {
	if tm.vocab.IsControl(id) {
		if tm.preserved[id] {
			return tm.vocab.Text(id), true
		}
		return nil, false
	}
	return tm.vocab.Piece(id), true
}

// minDeviceTopK is the fewest candidates a row is narrowed to: greedy
// needs one, and a few more let ties go to the lower id, as on the host.
const minDeviceTopK = 4

// narrowSlot sets how the device narrows the rows of req in slot: to the
// candidates its sampler needs, when it needs no more (sample.Params.
// Narrowed) and nothing else wants the whole row; else not at all.
func (tm *textModel) narrowSlot(slot int, req *request) error {
	k := 0
	if tm.deviceTopK && req.narrowK > 0 && req.constraint == nil && !req.logprobs && !req.scorePrompt() {
		k = min(max(req.narrowK, minDeviceTopK), tm.vocab.Size())
	}
	return tm.ctx.SetDeviceTopK(slot, k)
}

// clearSlot forgets every cell of slot.
func (tm *textModel) clearSlot(slot int) error { return tm.ctx.RemoveCells(slot, 0, -1) }

// trimSlot forgets the cells of slot from position n on; the cells before
// n stay for the slot's next sequence.
func (tm *textModel) trimSlot(slot, n int) error { return tm.ctx.RemoveCells(slot, n, -1) }

// streamCopyRatio bounds when a copy between streams pays: with a stream
// per slot llama.cpp copies the source's whole stream, contextSize cells,
// whatever n, and computing a prompt token costs about a hundred times
// copying a cell's keys and values on a CPU. So a prefix of n tokens is
// copied only when the stream is at most streamCopyRatio times longer,
// and computed otherwise (docs/benchmarks.md, "Long contexts").
const streamCopyRatio = 64

// errCopyNotWorth is copyPrefix's refusal of a copy that costs more than
// computing the prefix: the caller computes it.
var errCopyNotWorth = errors.New("copying the stream costs more than computing the prefix")

// copyPrefix makes the first n cells of slot dst those of slot src, or
// refuses where computing them is cheaper.
func (tm *textModel) copyPrefix(src, dst, n int) error {
	if n > tm.contextSize {
		return fmt.Errorf("prefix of %d tokens exceeds the context of %d", n, tm.contextSize)
	}
	if !tm.unified && n*streamCopyRatio < tm.contextSize {
		return errCopyNotWorth
	}
	return tm.ctx.CopyCells(src, dst, n)
}
