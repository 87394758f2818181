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
