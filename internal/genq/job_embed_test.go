package genq

import (
	"encoding/json"
	"math"
	"testing"
)

func TestEmbeddingJobValidate(t *testing.T) {
	in := []EmbeddingInput{{Text: "hello"}, {TokenIDs: []int32{1, 2}}}
	const E = Variant("embedding_bge_small")
	tests := []struct {
		name  string
		job   Job
		field string // "" when valid; "-" when invalid without a field
	}{
		{"text and token ids", Job{Envelope: Envelope{ID: "j", Variant: E}, EmbeddingRequest: EmbeddingRequest{Inputs: in}}, ""},
		{"a derived queue token", Job{Envelope: Envelope{ID: "j", Variant: QueueToken(KindEmbedding, "BAAI/bge-small-en-v1.5")}, EmbeddingRequest: EmbeddingRequest{Inputs: in}}, ""},
		{"a chat model's queue", Job{Envelope: Envelope{ID: "j", Variant: QueueToken(KindChat, "qwen3")}, EmbeddingRequest: EmbeddingRequest{Inputs: in}}, "-"},
		{"a seed variant's queue", Job{Envelope: Envelope{ID: "j", Variant: VariantB}, EmbeddingRequest: EmbeddingRequest{Inputs: in}}, "-"},
		{"a bad queue token", Job{Envelope: Envelope{ID: "j", Variant: "embedding_a.b"}, EmbeddingRequest: EmbeddingRequest{Inputs: in}}, "-"},
		{"inputs and text", Job{Envelope: Envelope{ID: "j", Variant: E, Text: "x"}, EmbeddingRequest: EmbeddingRequest{Inputs: in}}, "input"},
		{"both in one input", Job{Envelope: Envelope{ID: "j", Variant: E}, EmbeddingRequest: EmbeddingRequest{Inputs: []EmbeddingInput{{Text: "a", TokenIDs: []int32{1}}}}}, "input"},
		{"a NUL", Job{Envelope: Envelope{ID: "j", Variant: E}, EmbeddingRequest: EmbeddingRequest{Inputs: []EmbeddingInput{{Text: "a\x00"}}}}, "input"},
		{"too many inputs", Job{Envelope: Envelope{ID: "j", Variant: E}, EmbeddingRequest: EmbeddingRequest{Inputs: make([]EmbeddingInput, MaxEmbeddingInputs+1)}}, "input"},
		{"too many tokens", Job{Envelope: Envelope{ID: "j", Variant: E}, EmbeddingRequest: EmbeddingRequest{Inputs: []EmbeddingInput{{TokenIDs: make([]int32, MaxEmbeddingTokens+1)}}}}, "input"},
		{"negative dimensions", Job{Envelope: Envelope{ID: "j", Variant: E}, EmbeddingRequest: EmbeddingRequest{Inputs: in, Dimensions: -1}}, "dimensions"},
		// A job without inputs is a text job: an embedding model's queue
		// takes none.
		{"a text job on E", Job{Envelope: Envelope{ID: "j", Variant: E, Text: "x"}}, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.job.Validate()
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("want valid: %v", err)
			case tt.field == "":
			case ErrorCode(err) != Invalid:
				t.Fatalf("err %v: want invalid", err)
			case tt.field != "-" && ErrorField(err) != tt.field:
				t.Fatalf("err %v names field %q, want %q", err, ErrorField(err), tt.field)
			}
		})
	}
}

// An embedding job's message holds its inputs beside the envelope, and
// reads back the same.
func TestEmbeddingJobJSON(t *testing.T) {
	job := Job{Envelope: Envelope{ID: "j", Variant: "embedding_bge_small"}, EmbeddingRequest: EmbeddingRequest{
		Inputs: []EmbeddingInput{{Text: "hi"}, {TokenIDs: []int32{7}}}, Dimensions: 32, Truncate: true}}
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"j","variant":"embedding_bge_small","text":"","deadline":"0001-01-01T00:00:00Z","inputs":[{"text":"hi"},{"token_ids":[7]}],"dimensions":32,"truncate":true}`
	if string(b) != want {
		t.Fatalf("message\n%s\nwant\n%s", b, want)
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil || !back.IsEmbedding() || back.Dimensions != 32 || back.Inputs[1].TokenIDs[0] != 7 {
		t.Fatalf("read back %+v, %v", back, err)
	}
}

func TestNormalize(t *testing.T) {
	v := []float32{3, 4}
	Normalize(v)
	if math.Abs(float64(v[0])-0.6) > 1e-7 || math.Abs(float64(v[1])-0.8) > 1e-7 {
		t.Fatalf("got %v, want [0.6 0.8]", v)
	}
	zero := []float32{0, 0}
	Normalize(zero)
	if zero[0] != 0 || zero[1] != 0 {
		t.Fatalf("a zero vector became %v", zero)
	}
}
