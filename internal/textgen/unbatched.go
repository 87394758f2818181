package textgen

import (
	"context"
	"fmt"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen/sample"
)

// GenerateUnbatched returns the generated text for text, made by the
// plainest loop over the same engine, model and sampler: one sequence, its
// whole prompt prefilled (no shared prefix), then one forward step per
// token. It is the baseline that `make bench` holds the scheduler against,
// and tests check that both give the same greedy answer.
//
// It runs on the scheduler's loop while no sequence holds a slot, and uses
// the first slot itself: a sequence the scheduler has just answered may
// still hold it until the loop's next pass, and sharing it then would mix
// two sequences' cells. A worker never calls it.
func (b *Backend) GenerateUnbatched(ctx context.Context, text string) (out string, err error) {
	req, err := b.newJobRequest(genq.Job{Envelope: genq.Envelope{Text: text}})
	if err != nil {
		return "", err
	}
	if xerr := b.sched.exclusively(ctx, func() { out, err = b.plainLoop(ctx, req.prompt, req.sampler, req.maxTokens) }); xerr != nil {
		return "", xerr
	}
	return out, err
}

// plainLoop answers prompt as one sequence in slot 0: the whole prompt, then
// one forward step per token, up to maxTokens (genq.Limits.Answer's). The
// cache is its alone.
func (b *Backend) plainLoop(ctx context.Context, prompt []int32, sampler *sample.Sampler, maxTokens int) (string, error) {
	var err error
	seq := &sequence{slot: 0}
	// The slot may hold a finished sequence's cells, kept for reuse.
	b.sched.cache.take(seq.slot)
	if err := b.clearSlot(seq.slot); err != nil {
		return "", fmt.Errorf("text generation: %w", err)
	}
	if err := b.ctx.SetDeviceTopK(seq.slot, 0); err != nil { // its rows are read whole
		return "", fmt.Errorf("text generation: %w", err)
	}
	defer func() {
		if err := b.clearSlot(seq.slot); err != nil {
			b.log.Error("free cache slot", "slot", seq.slot, "err", err)
		}
	}()

	in := prompt
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		var logits []float32
		for len(in) > 0 {
			n := min(len(in), b.cfg.BatchSize)
			if logits, err = b.forwardSequence(in[:n], int(seq.pos), seq.slot); err != nil {
				return "", fmt.Errorf("text generation: %w", err)
			}
			in, seq.pos = in[n:], seq.pos+int32(n)
		}
		tok, err := sampler.Sample(logits)
		if err != nil {
			return "", fmt.Errorf("sample: %w", err)
		}
		done, err := seq.accept(b.textModel, tok, nil)
		if err != nil {
			return "", err
		}
		if done || maxTokens > 0 && seq.generated >= maxTokens {
			break
		}
		in = []int32{tok}
	}
	seq.text.WriteString(seq.utf8.Flush())
	return seq.text.String(), nil
}
