package textgen

import (
	"context"
	"fmt"

	"github.com/genq/genq/internal/genq"
)

// generate answers text as a one-message chat, with the worker's settings.
func (b *Backend) generate(ctx context.Context, text string) (seqResult, error) {
	return b.generateJob(ctx, genq.Job{Envelope: genq.Envelope{Text: text}})
}

// generateJob answers job with every detail of its result.
func (b *Backend) generateJob(ctx context.Context, job genq.Job) (seqResult, error) {
	return b.generateJobStream(ctx, job, nil)
}

// testEncode tokenizes text as prompts are, with BOS first when bos.
func (b *Backend) testEncode(text string, bos bool) ([]int32, error) {
	return b.vocab.Tokenize(text, bos, true), nil
}

// testDecode is the text of ids, special tokens written out.
func (b *Backend) testDecode(ids []int32) (string, error) {
	return b.vocab.Detokenize(ids, true), nil
}

// stopTokens are the ids that end an answer.
func (b *Backend) stopTokens() []int32 {
	var ids []int32
	for id := range b.vocab.Size() {
		if b.vocab.IsEndOfGeneration(int32(id)) {
			ids = append(ids, int32(id))
		}
	}
	return ids
}

// tieLogprob is how close a greedy answer's two best tokens may be for a
// step batched otherwise to swap them: the CPU kernels of llama.cpp sum a
// row's products in an order that depends on how many rows share the
// matrix product (one row or several, F16 and BF16 weights), which moves
// logits by about 1e-4.
const tieLogprob = 1e-3

// greedyJobs are greedy jobs for texts that keep each token's two
// best log-probabilities, so that greedyDiff can tell a near tie.
func greedyJobs(texts []string) []genq.Job {
	zero := 0.0
	jobs := make([]genq.Job, len(texts))
	for i, text := range texts {
		jobs[i] = genq.Job{Envelope: genq.Envelope{Text: text}, TextRequest: genq.TextRequest{Temperature: &zero, Logprobs: true, TopLogprobs: 2}}
	}
	return jobs
}

// greedyDiff is "" when two greedy answers to one prompt are the same, or
// part only where the model's two best tokens were within tieLogprob of
// each other (the answers agree up to there); else it says where and how
// they part.
func greedyDiff(got, want seqResult) string {
	if got.Text == want.Text {
		return ""
	}
	tie := func(e genq.TokenLogprob) bool {
		return len(e.Top) >= 2 && e.Top[0].Logprob-e.Top[1].Logprob < tieLogprob
	}
	for i := range min(len(got.Logprobs), len(want.Logprobs)) {
		g, w := got.Logprobs[i], want.Logprobs[i]
		if g.Token == w.Token {
			continue
		}
		if g.Offset != w.Offset || got.Text[:g.Offset] != want.Text[:w.Offset] {
			return fmt.Sprintf("the texts part before token %d:\n%q\n%q", i, got.Text, want.Text)
		}
		if tie(g) || tie(w) {
			return ""
		}
		return fmt.Sprintf("token %d is %q (%.5f) against %q (%.5f), no tie:\n%q\n%q", i, g.Token, g.Logprob.Logprob, w.Token, w.Logprob.Logprob, got.Text, want.Text)
	}
	return fmt.Sprintf("the texts differ with every scored token alike:\n%q\n%q", got.Text, want.Text)
}
