package openai

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/genq/genq/internal/genq"
)

// Params are the generation fields chats and completions share.
type Params struct {
	Model               string        `json:"model"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Temperature         *float64      `json:"temperature"`
	TopP                *float64      `json:"top_p"`
	Seed                *int64        `json:"seed"`
	Stop                genq.StopList `json:"stop"`
	N                   *int          `json:"n"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	TopK              *int        `json:"top_k"` // vLLM's and llama.cpp's extensions
	MinP              *float64    `json:"min_p"`
	RepetitionPenalty *float64    `json:"repetition_penalty"`
	IgnoreEOS         bool        `json:"ignore_eos"`
	FrequencyPenalty  *float64    `json:"frequency_penalty"`
	PresencePenalty   *float64    `json:"presence_penalty"`
	LogitBias         tokenBiases `json:"logit_bias"`
	// KeepAlive is Ollama's: how long the model stays loaded after the
	// answer on a worker of several models.
	KeepAlive genq.KeepAliveParam `json:"keep_alive"`

	// Structured output and tools (chats only, but response_format).
	ResponseFormat    *genq.ResponseFormat `json:"response_format"`
	Tools             []genq.Tool          `json:"tools"`
	ToolChoice        *genq.ToolChoice     `json:"tool_choice"`
	ParallelToolCalls *bool                `json:"parallel_tool_calls"`

	// Features genq does not have, read only to refuse them when asked for.
	Functions    []any           `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
	Echo         bool            `json:"echo"` // completions only: a chat refuses it
	BestOf       *int            `json:"best_of"`
	Suffix       string          `json:"suffix"`
}

// tokenBiases is logit_bias: token ids, as strings, to numbers.
type tokenBiases map[int32]float64

func (b *tokenBiases) UnmarshalJSON(data []byte) error {
	var raw map[string]float64
	if err := json.Unmarshal(data, &raw); err != nil {
		return genq.Errorf(genq.Invalid, `logit_bias must map token ids to numbers, as {"1234": -100}`)
	}
	*b = make(tokenBiases, len(raw))
	for key, bias := range raw {
		id, err := strconv.ParseInt(key, 10, 32)
		if err != nil {
			return genq.Errorf(genq.Invalid, "logit_bias names %q: keys are token ids, as \"1234\"", key)
		}
		(*b)[int32(id)] = bias
	}
	return nil
}

// unsupported names the first feature p asks for that genq does not have,
// as the refusal's message; "" when there is none.
func (p Params) unsupported() string {
	switch {
	case len(p.Functions) > 0 || len(p.FunctionCall) > 0:
		return "functions and function_call are the deprecated form of tools: send tools and tool_choice"
	case p.Echo && p.Stream:
		return "echo with stream: true is not supported: ask for the echo without streaming"
	case p.BestOf != nil && *p.BestOf > 1:
		return fmt.Sprintf("best_of is %d: this server generates one answer per request; send best_of: 1 or leave it out", *p.BestOf)
	case p.Suffix != "":
		return "suffix is not supported: this server completes a prompt forwards only; leave suffix out"
	}
	return ""
}

// MaxChoices bounds n, the choices one request asks for per prompt.
const MaxChoices = 8

// Choices is how many answers the request asks for.
func (p Params) Choices() int {
	if p.N == nil {
		return 1
	}
	return *p.N
}

// IncludeUsage reports whether a stream ends with a chunk of token counts.
func (p Params) IncludeUsage() bool { return p.StreamOptions != nil && p.StreamOptions.IncludeUsage }

// fill sets the job's generation parameters from p, refusing what genq
// cannot do and what only the request can tell (a field given as 0 is
// unset in the job). The job's own rules (genq.Job.Validate, which the api
// applies to every job) judge the rest.
func (p Params) fill(j *genq.Job) error {
	switch {
	case p.N != nil && (*p.N < 1 || *p.N > MaxChoices):
		return genq.Errorf(genq.Invalid, "n must be between 1 and %d, not %d", MaxChoices, *p.N)
	case p.MaxCompletionTokens != nil && *p.MaxCompletionTokens == 0:
		return genq.Errorf(genq.Invalid, "max_completion_tokens must be at least 1, not 0")
	}
	if msg := p.unsupported(); msg != "" {
		return genq.Errorf(genq.Invalid, "%s", msg)
	}
	if p.MaxTokens != nil {
		// OpenAI's max_tokens 0 with echo: the prompt scored, no answer.
		j.MaxTokens, j.PromptOnly = *p.MaxTokens, *p.MaxTokens == 0
	}
	if p.MaxCompletionTokens != nil {
		j.MaxCompletionTokens = *p.MaxCompletionTokens
	}
	j.Temperature, j.TopP, j.Seed, j.Stop, j.Stream = p.Temperature, p.TopP, p.Seed, p.Stop, p.Stream
	j.TopK, j.MinP, j.RepetitionPenalty, j.IgnoreEOS, j.Echo = p.TopK, p.MinP, p.RepetitionPenalty, p.IgnoreEOS, p.Echo
	j.FrequencyPenalty, j.PresencePenalty, j.LogitBias = p.FrequencyPenalty, p.PresencePenalty, p.LogitBias
	j.ResponseFormat, j.Tools, j.ToolChoice, j.ParallelToolCalls = p.ResponseFormat, p.Tools, p.ToolChoice, p.ParallelToolCalls
	return nil
}

// ChoiceJobs are the jobs of a request for n choices: job, and n-1 more
// like it under ids from newID. Each draws from a seed of its own, the
// request's plus its index when it gives one (n answers of one seed would
// be n copies), a random one otherwise (a worker's fixed TEXT_SEED would
// make copies too).
func ChoiceJobs(job genq.Job, n int, newID func() string) []genq.Job {
	jobs := make([]genq.Job, n)
	for i := range jobs {
		j := job
		if i > 0 {
			j.ID = newID()
		}
		seed := rand.Int64()
		if job.Seed != nil {
			seed = *job.Seed + int64(i)
		}
		j.Seed = &seed
		jobs[i] = j
	}
	return jobs
}
