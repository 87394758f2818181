package textgen

import (
	"context"

	"github.com/genq/genq/internal/genq"
)

// generate answers text as a one-message chat, with the worker's settings.
func (b *Backend) generate(ctx context.Context, text string) (seqResult, error) {
	return b.generateJob(ctx, genq.Job{Text: text})
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
