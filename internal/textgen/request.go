package textgen

import (
	"math/rand/v2"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen/sample"
)

// newJobRequest holds the job to the model's limits (genq.Limits, the
// rules the api applies too), tokenizes its prompt, bounds its answer by
// the worker's cap and what the context leaves (genq.Limits.Answer), and
// seeds a sampler with the job's settings over the worker's.
func (b *Backend) newJobRequest(job genq.Job) (*request, error) {
	if err := b.info.Limits.Check(job); err != nil {
		return nil, err
	}
	prompt, err := b.jobPrompt(job)
	if err != nil {
		return nil, err
	}
	maxNew, err := b.info.Limits.Answer(job, len(prompt))
	if err != nil {
		return nil, err
	}
	params := b.cfg.samplerParams()
	if job.Temperature != nil {
		params.Temperature = *job.Temperature
	}
	if job.TopP != nil {
		params.TopP = *job.TopP
	}
	if job.TopK != nil {
		params.TopK = max(*job.TopK, 0) // vLLM's -1, like 0, keeps every token
	}
	if job.MinP != nil {
		params.MinP = *job.MinP
	}
	if job.RepetitionPenalty != nil {
		params.RepetitionPenalty = *job.RepetitionPenalty
	}
	if job.FrequencyPenalty != nil {
		params.FrequencyPenalty = *job.FrequencyPenalty
	}
	if job.PresencePenalty != nil {
		params.PresencePenalty = *job.PresencePenalty
	}
	if len(job.LogitBias) > 0 {
		params.LogitBias = make(map[int32]float32, len(job.LogitBias))
		for id, bias := range job.LogitBias {
			params.LogitBias[id] = float32(bias)
		}
	}
	if err := params.Validate(); err != nil {
		return nil, genq.WrapError(genq.Invalid, err, err.Error())
	}
	seed := uint64(b.cfg.Seed)
	switch {
	case job.Seed != nil:
		seed = uint64(*job.Seed)
	case b.cfg.Seed == 0:
		seed = rand.Uint64()
	}
	sampler := sample.New(params, seed)
	sampler.RememberPrompt(prompt)
	req := newRequest(prompt, sampler)
	req.maxTokens, req.stop, req.narrowK = maxNew, job.Stop, params.Narrowed()
	req.ignoreEOS = job.IgnoreEOS
	if job.Logprobs {
		// The log-sum-exp needs every logit: whole rows.
		req.logprobs, req.topLogprobs, req.narrowK = true, job.TopLogprobs, 0
	}
	req.echo, req.promptOnly = job.Echo, job.PromptOnly
	b.planThinking(job, req, maxNew)
	b.planHarmony(job, req)
	return req, nil
}

// jobPrompt is the job's prompt in tokens, BOS first: a chat rendered with
// the model's template, or raw text as it is; token ids are taken as they
// come (genq.Limits.Check held them to the vocabulary).
func (b *Backend) jobPrompt(job genq.Job) ([]int32, error) {
	switch {
	case len(job.Messages) > 0:
		thinks := b.thinks(job)
		text, err := b.renderChatReasoning(job.Messages, job.PromptTools(), thinks, b.reasoning().effort(job))
		if err != nil {
			return nil, err
		}
		return b.encode(b.reasoning().shape(text, thinks, job))
	case job.Prompt != "":
		return b.encode(job.Prompt)
	case len(job.PromptTokenIDs) > 0:
		return job.PromptTokenIDs, nil
	}
	return b.promptTokens(job.Text)
}

// encode tokenizes a prompt the way llama.cpp's server does: BOS first
// when the model's metadata asks for it, and the texts of special tokens
// (a chat template writes them) read as those tokens.
func (b *Backend) encode(text string) ([]int32, error) {
	return b.vocab.Tokenize(text, true, true), nil
}

// promptTokens renders the conversation and tokenizes it, BOS first.
func (b *Backend) promptTokens(user string) ([]int32, error) {
	text, err := b.renderChat([]genq.Message{{Role: genq.RoleUser, Content: user}}, nil)
	if err != nil {
		return nil, err
	}
	return b.encode(text)
}
