package textgen

import (
	"context"
	"sync"
	"time"

	"github.com/genq/genq/internal/chattemplate"
	"github.com/genq/genq/internal/genq"
)

// Backend serves one GGUF chat model. It implements genq.Backend: it turns
// jobs into requests for its scheduler, which runs them on the loaded
// textModel.
type Backend struct {
	*textModel
	cfg   Config
	tmpl  *chattemplate.Template
	info  genq.BackendInfo
	sched *scheduler
	// constraints serves response_format and tools (constraint.go).
	constraints *constraints
	// reasoner is how the model's template reasons, nil when it does not
	// (reasoning.go), found on first use.
	reasonOnce sync.Once
	reasoner   *reasoner

	// mu keeps Close from freeing the model while a request is being
	// tokenized; closed says it has.
	mu     sync.RWMutex
	closed bool
}

var _ genq.Backend = (*Backend)(nil)

// Info says which device and model the backend runs.
func (b *Backend) Info() genq.BackendInfo { return b.info }

// DecodeStepTimes are the mean times of the decode-only steps so far (one
// token per sequence, no prompt), the steady state benchmarks compare.
func (b *Backend) DecodeStepTimes() StepTimes { return b.sched.stats.decode.means() }

// SchemaCacheStats is what structured output keeps between jobs:
// genq.SchemaCacheReporter.
func (b *Backend) SchemaCacheStats() genq.SchemaCacheStats { return b.constraints.stats() }

// PrefixCacheStats are the prefix cache's counters and occupancy:
// genq.PrefixCacheReporter.
func (b *Backend) PrefixCacheStats() genq.PrefixCacheStats { return b.sched.cache.stats() }

// Generate answers one job. It blocks until the answer is complete or ctx
// ends; in the latter case the sequence leaves the batch at once.
func (b *Backend) Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error) {
	return b.GenerateStream(ctx, job, progress, nil)
}

// GenerateStream is Generate, handing each new piece of the answer to emit
// (when not nil) as it is sampled: genq.TextStreamer.
func (b *Backend) GenerateStream(ctx context.Context, job genq.Job, progress func(genq.Progress), emit func(genq.TextPiece)) (genq.Result, error) {
	// A batch producer can publish anything: check again what the api checked.
	if err := job.ValidateInput(); err != nil {
		return genq.Result{}, err
	}
	out, err := b.generateJobStream(ctx, job, emit)
	if err != nil {
		return genq.Result{}, err
	}
	if job.Detailed() {
		res := genq.TextResult{GeneratedText: out.Text, Reasoning: out.Reasoning, FinishReason: out.FinishReason, StopSequence: out.StopSequence, ToolCalls: out.ToolCalls,
			UncheckedToolCalls: out.Unchecked,
			Usage: &genq.Usage{PromptTokens: out.PromptTokens, CompletionTokens: out.Tokens, CachedTokens: out.CachedTokens,
				ReasoningTokens: out.ReasonTokens},
			Logprobs: out.Logprobs, PromptText: out.PromptText, PromptLogprobs: out.PromptLogprobs}
		return res.Result(), nil
	}
	return genq.NewTextResult(out.Text), nil
}

func (b *Backend) generateJobStream(ctx context.Context, job genq.Job, emit func(genq.TextPiece)) (seqResult, error) {
	began := time.Now()
	req, err := b.prepare(ctx, job)
	if err != nil {
		traceRun(ctx, runTimes{began: began, ended: time.Now()}, seqResult{}, err)
		return seqResult{}, err
	}
	if job.CountOnly { // tokenized, checked, and not run
		return seqResult{FinishReason: genq.FinishStop, PromptTokens: len(req.prompt)}, nil
	}
	req.emit = emit
	if share, ok := genq.ShareOf(ctx); ok {
		req.tenant, req.weight = share.Tenant, share.WeightOrOne()
	}
	out, err := b.sched.run(ctx, req)
	traceRun(ctx, req.times(began, out, err), out, err)
	if err == nil {
		// req.done is closed: the loop is done with the constraint.
		req.constraint.settle(job.ID, &out)
		for _, u := range out.Unchecked {
			// The tool, what was relaxed and why the check failed; never
			// the arguments, which are the client's.
			b.log.Warn("a tool call's arguments are not guaranteed: its schema was relaxed, and they fail it",
				"job_id", job.ID, "tool", u.Name, "call", u.Index,
				"relaxed", req.constraint.c.Grammar.RelaxedTool(u.Name).Paths, "error", u.Reason)
		}
	}
	return out, err
}

// prepare turns job into a request for the scheduler: its prompt in
// tokens, its sampler and its constraint.
func (b *Backend) prepare(ctx context.Context, job genq.Job) (*request, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, genq.WrapError(genq.Unavailable, errClosed, "the text model is shutting down")
	}
	req, err := b.newJobRequest(job)
	if err != nil {
		return nil, err
	}
	if job.CountOnly {
		return req, nil
	}
	if err := b.constrain(ctx, job, req); err != nil {
		return nil, err
	}
	return req, nil
}

// Close stops the scheduler and frees the model. Jobs still running fail.
func (b *Backend) Close() error {
	if b.sched != nil {
		b.sched.stop()
	}
	if b.constraints != nil {
		b.constraints.close()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.textModel.close()
	}
	return nil
}
