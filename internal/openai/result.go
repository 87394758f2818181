package openai

import "github.com/genq/genq/internal/genq"

// TextResult is a choice's text result with what an OpenAI object adds.
type TextResult struct {
	genq.TextResult
	JobID         string
	Created       int64
	Model         string
	LogprobsAsked bool // an empty answer still gets a list
	EchoAsked     bool // the prompt's text comes first
	// Choice is the result's index among its prompt's n choices: the
	// prompt's tokens count once, with its first.
	Choice int
}

// logprobEntries are the result's log-probabilities: nil when the job did
// not ask for them, and a list, empty for an empty answer, when it did
// (the worker's result leaves an empty list out).
func (r TextResult) logprobEntries() []genq.TokenLogprob {
	if r.LogprobsAsked {
		return orEmpty(r.Logprobs)
	}
	return r.Logprobs
}

func (r TextResult) usage() Usage {
	var u Usage
	if r.TextResult.Usage != nil {
		u = Usage{PromptTokens: r.TextResult.Usage.PromptTokens, CompletionTokens: r.TextResult.Usage.CompletionTokens}
		if n := r.TextResult.Usage.CachedTokens; n > 0 {
			u.PromptTokensDetails = &PromptTokensDetails{CachedTokens: n}
		}
		if n := r.TextResult.Usage.ReasoningTokens; n > 0 {
			u.CompletionTokensDetails = &CompletionTokensDetails{ReasoningTokens: n}
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// answerFrame is the frame of a text route's whole answer: its id and
// object name, when and by which model, the choices of the route's shape,
// and the token counts.
type answerFrame[C any] struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []C    `json:"choices"`
	Usage   Usage  `json:"usage"`
}

// chunkFrame is the frame of one streamed event of a text route: as
// answerFrame, with the token counts only in the last chunk, when they
// were asked for.
type chunkFrame[C any] struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []C    `json:"choices"`
	Usage   *Usage `json:"usage,omitempty"`
}

// Usage counts a request's tokens, in OpenAI's shape.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails says how many prompt tokens came from the
	// worker's prefix cache, as OpenAI and vLLM report them.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
	// CompletionTokensDetails says how many completion tokens a
	// reasoning model spent on its reasoning, as OpenAI reports them.
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// CompletionTokensDetails break an answer's tokens down.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// PromptTokensDetails break a prompt's tokens down.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func (u Usage) cachedTokens() int {
	if u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// ChoicesUsage counts each prompt once, however many choices answer it,
// and the tokens of every choice.
func ChoicesUsage(results []TextResult) Usage {
	var u Usage
	for _, r := range results {
		ru := r.usage()
		if r.Choice == 0 {
			u.PromptTokens += ru.PromptTokens
			if d := ru.PromptTokensDetails; d != nil {
				u.PromptTokensDetails = &PromptTokensDetails{CachedTokens: d.CachedTokens + u.cachedTokens()}
			}
		}
		u.CompletionTokens += ru.CompletionTokens
		if d := ru.CompletionTokensDetails; d != nil {
			if u.CompletionTokensDetails == nil {
				u.CompletionTokensDetails = &CompletionTokensDetails{}
			}
			u.CompletionTokensDetails.ReasoningTokens += d.ReasoningTokens
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// Stream is what every chunk of one streamed answer shares, whatever its
// choice: the first job's id, as OpenAI's chunks share one id.
type Stream struct {
	JobID    string
	Created  int64
	Model    string
	Logprobs bool // the jobs asked for them
	// Echo is what a response (the Responses API's) repeats of its
	// request's tools; nil: none were given.
	Echo *ToolsEcho
}
