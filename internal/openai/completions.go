package openai

import (
	"encoding/json"

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

// DecodeCompletion reads the body of a completion into job, its prompt's
// text at most maxPrompt bytes.
func DecodeCompletion(body []byte, maxPrompt int, job *genq.Job) (Params, error) {
	var req CompletionRequest
	if err := Decode(body, &req); err != nil {
		return Params{}, err
	}
	if err := completionPrompt(req.Prompt, maxPrompt, job); err != nil {
		return Params{}, err
	}
	if n := req.Logprobs; n != nil {
		job.Logprobs, job.TopLogprobs = true, *n
	}
	return req.Params, req.fill(job)
}

// completionPrompt is a completion's prompt: a string, a list of one
// string, a list of token ids, or a list of one such list, as OpenAI's
// API takes them. Token ids go to the model as they are.
func completionPrompt(raw json.RawMessage, maxPrompt int, job *genq.Job) error {
	var text string
	var texts []string
	var ids []int32
	var idLists [][]int32
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return Malformed(err)
		}
	case json.Unmarshal(raw, &texts) == nil:
		if len(texts) > 1 {
			return genq.Errorf(genq.Invalid, "prompt holds %d prompts: this server answers one per request", len(texts))
		}
		if len(texts) == 1 {
			text = texts[0]
		}
	case json.Unmarshal(raw, &ids) == nil:
		job.PromptTokenIDs = ids
	case json.Unmarshal(raw, &idLists) == nil:
		if len(idLists) > 1 {
			return genq.Errorf(genq.Invalid, "prompt holds %d prompts: this server answers one per request", len(idLists))
		}
		if len(idLists) == 1 {
			job.PromptTokenIDs = idLists[0]
		}
	default:
		return genq.Errorf(genq.Invalid, "prompt must be a string, or a list of token ids (integers from 0)")
	}
	switch {
	case len(job.PromptTokenIDs) > 0:
		return nil
	case text == "":
		return genq.Errorf(genq.Invalid, "prompt is required")
	case len(text) > maxPrompt:
		return genq.Errorf(genq.Invalid, "prompt is %d bytes long; the limit is %d", len(text), maxPrompt)
	}
	job.Prompt = text
	return nil
}

// Completion is a completion's answer.
type Completion = Response[completionChoice]

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
type CompletionChunk = Chunk[completionChunkChoice]

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
