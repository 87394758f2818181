package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"

	"github.com/genq/genq/internal/genq"
)

// EmbeddingRequest is the body of POST /v1/embeddings.
type EmbeddingRequest struct {
	// Input is a string, a list of strings, a list of token ids, or a list
	// of lists of token ids (EmbeddingInputs reads it).
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model,omitempty"`
	EncodingFormat string          `json:"encoding_format,omitempty"`
	Dimensions     *int            `json:"dimensions,omitempty"`
	User           string          `json:"user,omitempty"`
	// Truncate cuts an input past the model's context to its first
	// tokens instead of refusing it: genq's extension, under the name
	// Hugging Face's text-embeddings-inference gives it.
	Truncate bool `json:"truncate,omitempty"`
}

// Encoding formats of embedding vectors: JSON numbers, or base64 of their
// float32 bytes, little-endian, as OpenAI's SDKs decode them.
const (
	EncodingFloat  = "float"
	EncodingBase64 = "base64"
)

// EmbeddingResponse is the answer of POST /v1/embeddings.
type EmbeddingResponse struct {
	Object string          `json:"object"`
	Data   []EmbeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  EmbeddingUsage  `json:"usage"`
}

// EmbeddingData is one input's vector: a list of numbers, or a base64
// string.
type EmbeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// EmbeddingUsage counts the inputs' tokens: all of them are prompt tokens.
type EmbeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func invalidInput(format string, args ...any) error {
	e := genq.Errorf(genq.Invalid, format, args...)
	e.Field = "input"
	return e
}

// EmbeddingInputs reads input in each of its four forms.
func EmbeddingInputs(raw json.RawMessage) ([]genq.EmbeddingInput, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalidInput("input is required: a string, a list of strings, a list of token ids, or a list of such lists")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []genq.EmbeddingInput{{Text: one}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalidInput("input must be a string, a list of strings, a list of token ids, or a list of such lists")
	}
	if len(items) == 0 {
		return nil, invalidInput("input is an empty list: give at least one string or token id")
	}
	switch items[0][0] {
	case '"':
		return stringInputs(items)
	case '[':
		return tokenListInputs(items)
	}
	ids, err := tokenIDs(raw)
	if err != nil {
		return nil, err
	}
	return []genq.EmbeddingInput{{TokenIDs: ids}}, nil
}

func stringInputs(items []json.RawMessage) ([]genq.EmbeddingInput, error) {
	if len(items) > genq.MaxEmbeddingInputs {
		return nil, invalidInput("input holds %d strings; the limit is %d", len(items), genq.MaxEmbeddingInputs)
	}
	out := make([]genq.EmbeddingInput, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &out[i].Text); err != nil {
			return nil, invalidInput("input[%d] must be a string, as the items before it", i)
		}
	}
	return out, nil
}

func tokenListInputs(items []json.RawMessage) ([]genq.EmbeddingInput, error) {
	if len(items) > genq.MaxEmbeddingInputs {
		return nil, invalidInput("input holds %d lists of token ids; the limit is %d", len(items), genq.MaxEmbeddingInputs)
	}
	out := make([]genq.EmbeddingInput, len(items))
	for i, it := range items {
		ids, err := tokenIDs(it)
		if err != nil {
			return nil, invalidInput("input[%d] must be a list of token ids (integers from 0)", i)
		}
		out[i].TokenIDs = ids
	}
	return out, nil
}

func tokenIDs(raw json.RawMessage) ([]int32, error) {
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, invalidInput("input must be a string, a list of strings, a list of token ids, or a list of such lists")
	}
	if len(ids) == 0 {
		return nil, invalidInput("input holds an empty list of token ids")
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxInt32 {
			return nil, invalidInput("input holds the token id %d: ids are integers from 0", id)
		}
		out[i] = int32(id)
	}
	return out, nil
}

// EmbeddingJob is the job of an embedding request, on tmpl's envelope.
func EmbeddingJob(req EmbeddingRequest, tmpl genq.Job) (genq.Job, error) {
	switch req.EncodingFormat {
	case "", EncodingFloat, EncodingBase64:
	default:
		e := genq.Errorf(genq.Invalid, "encoding_format must be float or base64, not %q", req.EncodingFormat)
		e.Field = "encoding_format"
		return genq.Job{}, e
	}
	inputs, err := EmbeddingInputs(req.Input)
	if err != nil {
		return genq.Job{}, err
	}
	job := tmpl
	job.Inputs, job.Truncate = inputs, req.Truncate
	if d := req.Dimensions; d != nil {
		if *d < 1 {
			e := genq.Errorf(genq.Invalid, "dimensions must be at least 1, not %d", *d)
			e.Field = "dimensions"
			return genq.Job{}, e
		}
		job.Dimensions = *d
	}
	if err := job.EmbeddingRequest.Validate(); err != nil {
		return genq.Job{}, err
	}
	return job, nil
}

// NewEmbeddingResponse shapes a job's result as OpenAI's answer, each
// vector in format.
func NewEmbeddingResponse(res genq.EmbeddingResult, model, format string) EmbeddingResponse {
	data := make([]EmbeddingData, len(res.Embeddings))
	for i, v := range res.Embeddings {
		data[i] = EmbeddingData{Object: "embedding", Index: i, Embedding: v}
		if format == EncodingBase64 {
			data[i].Embedding = EncodeFloats(v)
		}
	}
	return EmbeddingResponse{Object: "list", Data: data, Model: model,
		Usage: EmbeddingUsage{PromptTokens: res.Usage.PromptTokens, TotalTokens: res.Usage.PromptTokens}}
}

// EncodeFloats is v as base64 of its float32s, little-endian: what
// OpenAI's SDKs decode (a Float32Array over the bytes, numpy's float32).
func EncodeFloats(v []float32) string {
	return base64.StdEncoding.EncodeToString(genq.AppendFloat32s(make([]byte, 0, 4*len(v)), v))
}
