package openai

import (
	"encoding/json"
	"fmt"

	"github.com/genq/genq/internal/genq"
)

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Params
	Prompt json.RawMessage `json:"prompt"`
	// Logprobs is the legacy API's: how many of the most likely tokens to
	// list at each position, the sampled one's log-probability besides.
	Logprobs *int `json:"logprobs"`
}

// DecodeCompletion reads the body of a completion of one prompt into job,
// its prompt's text at most maxPrompt bytes: an asynchronous job answers
// one prompt.
func DecodeCompletion(body []byte, maxPrompt int, job *genq.Job) (Params, error) {
	params, jobs, err := DecodeCompletions(body, maxPrompt, *job)
	if err != nil {
		return Params{}, err
	}
	if len(jobs) > 1 {
		return Params{}, genq.Errorf(genq.Invalid, "prompt holds %d prompts: an asynchronous job answers one; submit one job per prompt", len(jobs))
	}
	*job = jobs[0]
	return params, nil
}

// DecodeCompletions reads the body of a completion: its parameters, and a
// job per prompt, each job a copy of job with its prompt and the request's
// parameters. Each prompt's text is at most maxPrompt bytes.
func DecodeCompletions(body []byte, maxPrompt int, job genq.Job) (Params, []genq.Job, error) {
	var req CompletionRequest
	if err := Decode(body, &req); err != nil {
		return Params{}, nil, err
	}
	prompts, err := completionPrompts(req.Prompt, maxPrompt)
	if err != nil {
		return Params{}, nil, err
	}
	if n := len(prompts) * req.Choices(); n > MaxRequestJobs {
		return Params{}, nil, genq.Errorf(genq.Invalid,
			"prompt holds %d prompts and n is %d: %d answers, and this server gives at most %d per request (prompts × n); split the batch",
			len(prompts), req.Choices(), n, MaxRequestJobs)
	}
	if n := req.Logprobs; n != nil {
		job.Logprobs, job.TopLogprobs = true, *n
	}
	if len(req.Tools) > 0 || req.ToolChoice != nil || req.ParallelToolCalls != nil {
		return Params{}, nil, genq.Errorf(genq.Invalid, "tools are for /v1/chat/completions: a completion continues its prompt; use response_format to hold it to JSON")
	}
	if err := req.fill(&job); err != nil {
		return Params{}, nil, err
	}
	jobs := make([]genq.Job, len(prompts))
	for i, p := range prompts {
		jobs[i] = job
		jobs[i].Prompt, jobs[i].PromptTokenIDs = p.text, p.ids
	}
	return req.Params, jobs, nil
}

// MaxRequestJobs bounds the answers one request asks for, prompts × n:
// each is a job of its own, run at once beside the others.
const MaxRequestJobs = 64

// prompt is one prompt of a completion: text, or token ids.
type prompt struct {
	text string
	ids  []int32
}

// completionPrompts are a completion's prompts: a string, a list of
// strings, a list of token ids, or a list of such lists, as OpenAI's API
// takes them. Token ids go to the model as they are.
func completionPrompts(raw json.RawMessage, maxPrompt int) ([]prompt, error) {
	var text string
	var texts []string
	var ids []int32
	var idLists [][]int32
	var out []prompt
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, Malformed(err)
		}
		out = []prompt{{text: text}}
	case json.Unmarshal(raw, &texts) == nil:
		for _, t := range texts {
			out = append(out, prompt{text: t})
		}
	case json.Unmarshal(raw, &ids) == nil:
		if len(ids) > 0 {
			out = []prompt{{ids: ids}}
		}
	case json.Unmarshal(raw, &idLists) == nil:
		for _, l := range idLists {
			out = append(out, prompt{ids: l})
		}
	default:
		return nil, genq.Errorf(genq.Invalid, "prompt must be a string, a list of strings, a list of token ids (integers from 0), or a list of such lists")
	}
	if len(out) == 0 {
		return nil, genq.Errorf(genq.Invalid, "prompt is required")
	}
	for i, p := range out {
		where := "prompt"
		if len(out) > 1 {
			where = fmt.Sprintf("prompt[%d]", i)
		}
		switch {
		case len(p.ids) > 0:
		case p.text == "":
			return nil, genq.Errorf(genq.Invalid, "%s is required", where)
		case len(p.text) > maxPrompt:
			return nil, genq.Errorf(genq.Invalid, "%s is %d bytes long; the limit is %d", where, len(p.text), maxPrompt)
		}
	}
	return out, nil
}

// Completion is a completion's answer.
type Completion = answerFrame[completionChoice]

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
}

// RenderCompletion is the completion answer of a request's choices, in
// order; an echoed prompt comes before each choice's text.
func RenderCompletion(results ...TextResult) Completion {
	first := results[0]
	c := Completion{ID: "cmpl-" + first.JobID, Object: "text_completion", Created: first.Created, Model: first.Model,
		Usage: ChoicesUsage(results)}
	for i, r := range results {
		text, prompt := r.GeneratedText, []genq.TokenLogprob(nil)
		if r.EchoAsked {
			text, prompt = r.PromptText+r.GeneratedText, r.PromptLogprobs
		}
		c.Choices = append(c.Choices, completionChoice{Index: i, Text: text,
			Logprobs: completionLogprobsOf(text, prompt, r.logprobEntries(), r.PromptText), FinishReason: r.FinishReason})
	}
	return c
}

// CompletionChunk is one event of a streamed completion.
type CompletionChunk = chunkFrame[completionChunkChoice]

// completionChunkChoice is a completion's choice in a stream: the finish
// reason is null until the last chunk, as OpenAI sends it, and the
// log-probabilities come with the text of their tokens, as with chats.
type completionChunkChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// CompletionChunks builds the chunks of one streamed completion.
type CompletionChunks struct{ Stream }

func (s CompletionChunks) object(choices []completionChunkChoice, usage *Usage) CompletionChunk {
	return CompletionChunk{ID: "cmpl-" + s.JobID, Object: "text_completion", Created: s.Created,
		Model: s.Model, Choices: choices, Usage: usage}
}

// Piece carries a piece of choice index's text; sofar is the choice's text
// before it, from which its tokens' offsets count.
func (s CompletionChunks) Piece(index int, sofar string, piece genq.TextPiece, _ bool) any {
	return s.choice(index, sofar, piece, "")
}

// Finish ends choice index with its finish reason.
func (s CompletionChunks) Finish(index int, reason string, _ bool) any {
	return s.choice(index, "", genq.TextPiece{}, reason)
}

func (s CompletionChunks) choice(index int, sofar string, piece genq.TextPiece, finish string) CompletionChunk {
	choice := completionChunkChoice{Index: index, Text: piece.Text}
	if s.Logprobs && finish == "" {
		choice.Logprobs = completionLogprobsOf(sofar+piece.Text, nil, orEmpty(piece.Logprobs), "")
	}
	if finish != "" {
		choice.FinishReason = &finish
	}
	return s.object([]completionChunkChoice{choice}, nil)
}

// Usage is the stream's last chunk before [DONE], when asked for: no
// choice, the token counts.
func (s CompletionChunks) Usage(u Usage) any {
	return s.object([]completionChunkChoice{}, &u)
}
