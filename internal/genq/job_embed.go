package genq

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Embedding jobs: a list of inputs, each text or token ids, whose result is
// one vector per input. They travel on the queue as text jobs do, on the
// subjects of an embedding model's queue token (the catalogue's), and are
// served by the workers that load it.

// Bounds of one embedding job, OpenAI's: 2,048 inputs and 300,000 tokens
// in all. MaxEmbeddingTextBytes bounds one text input before it is
// tokenized (a token is a few bytes; the worker's context bounds it again).
const (
	MaxEmbeddingInputs    = 2048
	MaxEmbeddingTokens    = 300_000
	MaxEmbeddingTextBytes = 1 << 20
	// MaxEmbeddingDimensions bounds dimensions; no model is wider.
	MaxEmbeddingDimensions = 1 << 16
)

// EmbeddingRequest is what an embedding job asks for besides its
// envelope: its inputs, and how to shape its vectors.
type EmbeddingRequest struct {
	// Inputs are embedded each on its own, in order.
	Inputs []EmbeddingInput `json:"inputs,omitempty"`
	// Dimensions asks for vectors of this many dimensions (the first ones,
	// made unit length again), where the model allows it; 0 takes the
	// model's own width.
	Dimensions int `json:"dimensions,omitempty"`
	// Truncate cuts an input longer than the model's context to its
	// first tokens, where it is otherwise refused.
	Truncate bool `json:"truncate,omitempty"`
}

// EmbeddingInput is one input: a text, tokenized by the worker with the
// model's special tokens around it, or token ids, embedded as they are.
type EmbeddingInput struct {
	Text     string  `json:"text,omitempty"`
	TokenIDs []int32 `json:"token_ids,omitempty"`
}

// IsEmbedding reports whether the job is an embedding job.
func (j Job) IsEmbedding() bool { return len(j.Inputs) > 0 }

// validateEmbedding checks an embedding job: it carries inputs alone, each
// one text or token ids, within the bounds, on an embedding model's queue
// (QueueToken), never a seed variant's.
func (j Job) validateEmbedding() error {
	if !IsModelQueue(j.Variant) || queueKind(j.Variant) != KindEmbedding {
		return Errorf(Invalid, "job %s: an embedding job goes on an embedding model's queue (embedding_…), not %q", j.ID, j.Variant)
	}
	if j.Text != "" || len(j.Messages) > 0 || j.Prompt != "" || len(j.PromptTokenIDs) > 0 || j.HasImageParams() {
		return &Error{Code: Invalid, Field: "input", Message: "an embedding job carries inputs alone: no text, messages, prompt or image parameters"}
	}
	return j.EmbeddingRequest.Validate()
}

// Validate checks the inputs and the dimensions of an embedding request.
func (r EmbeddingRequest) Validate() error {
	if len(r.Inputs) == 0 {
		return &Error{Code: Invalid, Field: "input", Message: "input is required: a string, a list of strings, or token ids"}
	}
	if len(r.Inputs) > MaxEmbeddingInputs {
		return &Error{Code: Invalid, Field: "input", Message: fmt.Sprintf("input holds %d items; the limit is %d", len(r.Inputs), MaxEmbeddingInputs)}
	}
	tokens := 0
	for i, in := range r.Inputs {
		if err := in.validate(i); err != nil {
			return err
		}
		tokens += len(in.TokenIDs)
	}
	if tokens > MaxEmbeddingTokens {
		return &Error{Code: Invalid, Field: "input", Message: fmt.Sprintf("input holds %d token ids; the limit is %d per request", tokens, MaxEmbeddingTokens)}
	}
	if r.Dimensions < 0 || r.Dimensions > MaxEmbeddingDimensions {
		return &Error{Code: Invalid, Field: "dimensions", Message: fmt.Sprintf("dimensions must be at least 1, not %d", r.Dimensions)}
	}
	return nil
}

func (in EmbeddingInput) validate(i int) error {
	bad := func(format string, args ...any) error {
		return &Error{Code: Invalid, Field: "input", Message: fmt.Sprintf("input[%d] ", i) + fmt.Sprintf(format, args...)}
	}
	switch {
	case in.Text != "" && len(in.TokenIDs) > 0:
		return bad("holds both text and token ids")
	case in.Text == "" && len(in.TokenIDs) == 0:
		return bad("is empty: embed some text or token ids")
	case len(in.Text) > MaxEmbeddingTextBytes:
		return bad("is %d bytes; the limit is %d", len(in.Text), MaxEmbeddingTextBytes)
	case in.Text != "" && !utf8.ValidString(in.Text):
		return bad("is not valid UTF-8")
	case strings.ContainsRune(in.Text, 0):
		return bad("must not contain NUL characters")
	}
	for _, id := range in.TokenIDs {
		if id < 0 {
			return bad("holds the token id %d: ids are not negative", id)
		}
	}
	return nil
}

// EmbeddingResult is the body of an embedding job's result: one unit
// vector per input, in order, and the tokens each input took.
type EmbeddingResult struct {
	// Usage sums Tokens. It comes first, so that a reader of a result cut
	// short (the api's metering keeps 16 MiB of it) finds it.
	Usage      Usage   `json:"usage"`
	Model      string  `json:"model,omitempty"`
	Embeddings Vectors `json:"embeddings"`
	// Tokens is each input's token count, special tokens included, after
	// any truncation.
	Tokens []int `json:"tokens"`
}

// Result is the embedding result as a job's result.
func (r EmbeddingResult) Result() Result {
	b, _ := json.Marshal(r) // finite floats and ints: cannot fail
	return Result{ContentType: "application/json", Data: b}
}

// Normalize scales v to unit length in place, as OpenAI's vectors are and
// as llama.cpp's server does by default (Euclidean, summed in float64); a
// zero vector stays zero.
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	scale := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * scale)
	}
}
