package genq

// Limits are what a worker's model can serve; a job past them fails there
// as Invalid. Zero is unknown (or not this kind's): no bound.
type Limits struct {
	// MaxNewTokens is the worker's cap on an answer (TEXT_MAX_NEW_TOKENS),
	// ContextSize its tokens of context per sequence, prompt and answer
	// together, and VocabSize the model's token ids, 0 to VocabSize-1.
	MaxNewTokens int `json:"max_new_tokens,omitempty"`
	ContextSize  int `json:"context_size,omitempty"`
	VocabSize    int `json:"vocab_size,omitempty"`
	// ImageMaxSize bounds each side of an image, and ImageMaxSteps its
	// denoising steps (IMAGE_MAX_SIZE, IMAGE_MAX_STEPS).
	ImageMaxSize  int `json:"image_max_size,omitempty"`
	ImageMaxSteps int `json:"image_max_steps,omitempty"`
}

// Tightest is the limits every one of lims allows, field by field: a
// queued job may run on any of the workers.
func Tightest(lims ...Limits) Limits {
	var out Limits
	tight := func(dst *int, v int) {
		if v > 0 && (*dst == 0 || v < *dst) {
			*dst = v
		}
	}
	for _, l := range lims {
		tight(&out.MaxNewTokens, l.MaxNewTokens)
		tight(&out.ContextSize, l.ContextSize)
		tight(&out.VocabSize, l.VocabSize)
		tight(&out.ImageMaxSize, l.ImageMaxSize)
		tight(&out.ImageMaxSteps, l.ImageMaxSteps)
	}
	return out
}

// Check refuses a job the model cannot serve, in the words the worker
// would refuse it with. A prompt given as text is measured in tokens only
// by the worker, which has the tokenizer.
func (l Limits) Check(j Job) error {
	answer := l.MaxNewTokens
	if n := j.MaxNewTokens(); n > 0 {
		if l.MaxNewTokens > 0 && n > l.MaxNewTokens && !j.MaxTokensBound {
			return Errorf(Invalid, "%s is %d; this server answers with at most %d tokens (TEXT_MAX_NEW_TOKENS)",
				j.MaxTokensField(), n, l.MaxNewTokens)
		}
		answer = n
		if l.MaxNewTokens > 0 {
			answer = min(n, l.MaxNewTokens)
		}
	}
	if j.PromptOnly {
		answer = 0
	}
	if l.VocabSize > 0 {
		for _, id := range j.PromptTokenIDs {
			if int(id) >= l.VocabSize {
				return Errorf(Invalid, "prompt holds the token id %d; this model's vocabulary has tokens 0 to %d", id, l.VocabSize-1)
			}
		}
		for id := range j.LogitBias {
			if int(id) >= l.VocabSize {
				return Errorf(Invalid, "logit_bias names token %d; this model's vocabulary has tokens 0 to %d", id, l.VocabSize-1)
			}
		}
	}
	if room := l.ContextSize - answer; l.ContextSize > 0 && len(j.PromptTokenIDs) > room {
		return Errorf(Invalid,
			"prompt is too long: %d tokens, and this model's context of %d tokens holds at most %d prompt tokens besides the %d of the answer",
			len(j.PromptTokenIDs), l.ContextSize, room, answer)
	}
	if l.ImageMaxSize > 0 && j.Width != 0 {
		if err := ValidateImageSize(j.Width, j.Height, l.ImageMaxSize); err != nil {
			return err
		}
	}
	if l.ImageMaxSteps > 0 && j.Steps > l.ImageMaxSteps {
		return Errorf(Invalid, "num_inference_steps must be between 1 and %d, not %d", l.ImageMaxSteps, j.Steps)
	}
	return nil
}
