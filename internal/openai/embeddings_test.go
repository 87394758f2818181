package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestEmbeddingJob(t *testing.T) {
	many := `["a"` + strings.Repeat(`,"a"`, genq.MaxEmbeddingInputs) + `]`
	tests := []struct {
		name      string
		body      string
		want      []genq.EmbeddingInput
		wantDims  int
		wantField string // of the refusal
		truncate  bool
	}{
		{"a string", `{"input":"hello"}`, []genq.EmbeddingInput{{Text: "hello"}}, 0, "", false},
		{"strings", `{"input":["a","b"]}`, []genq.EmbeddingInput{{Text: "a"}, {Text: "b"}}, 0, "", false},
		{"token ids", `{"input":[101,7592,102]}`, []genq.EmbeddingInput{{TokenIDs: []int32{101, 7592, 102}}}, 0, "", false},
		{"lists of token ids", `{"input":[[1,2],[3]]}`, []genq.EmbeddingInput{{TokenIDs: []int32{1, 2}}, {TokenIDs: []int32{3}}}, 0, "", false},
		{"dimensions", `{"input":"a","dimensions":256,"encoding_format":"base64"}`, []genq.EmbeddingInput{{Text: "a"}}, 256, "", false},
		{"truncate", `{"input":"a","truncate":true}`, []genq.EmbeddingInput{{Text: "a"}}, 0, "", true},
		{"no input", `{"model":"m"}`, nil, 0, "input", false},
		{"empty string", `{"input":""}`, nil, 0, "input", false},
		{"empty list", `{"input":[]}`, nil, 0, "input", false},
		{"a number", `{"input":3}`, nil, 0, "input", false},
		{"mixed list", `{"input":["a",3]}`, nil, 0, "input", false},
		{"negative id", `{"input":[1,-2]}`, nil, 0, "input", false},
		{"empty id list", `{"input":[[1],[]]}`, nil, 0, "input", false},
		{"too many strings", `{"input":` + many + `}`, nil, 0, "input", false},
		{"zero dimensions", `{"input":"a","dimensions":0}`, nil, 0, "dimensions", false},
		{"other format", `{"input":"a","encoding_format":"int8"}`, nil, 0, "encoding_format", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req EmbeddingRequest
			err := Decode([]byte(tt.body), &req)
			var job genq.Job
			if err == nil {
				job, err = EmbeddingJob(req, genq.Job{Envelope: genq.Envelope{ID: "j", Variant: genq.QueueToken(genq.KindEmbedding, "bge")}})
			}
			if tt.wantField != "" {
				if genq.ErrorCode(err) != genq.Invalid || genq.ErrorField(err) != tt.wantField {
					t.Fatalf("err %v (field %q): want invalid, field %s", err, genq.ErrorField(err), tt.wantField)
				}
				if p := ErrorOf(err).Param; p == nil || *p != tt.wantField {
					t.Fatalf("OpenAI's param %v, want %s", p, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(job.Inputs, tt.want) || job.Dimensions != tt.wantDims || job.Truncate != tt.truncate {
				t.Fatalf("inputs %+v, dimensions %d: want %+v, %d", job.Inputs, job.Dimensions, tt.want, tt.wantDims)
			}
			if err := job.Validate(); err != nil {
				t.Fatalf("the job does not validate: %v", err)
			}
		})
	}
}

// base64 vectors are little-endian float32s, as OpenAI's SDKs read them.
func TestEmbeddingResponseBase64(t *testing.T) {
	v := []float32{0.5, -1.25, float32(math.Pi), 1e-7}
	res := genq.EmbeddingResult{Model: "m", Embeddings: [][]float32{v}, Tokens: []int{3}, Usage: genq.Usage{PromptTokens: 3}}
	for _, format := range []string{EncodingFloat, EncodingBase64} {
		t.Run(format, func(t *testing.T) {
			b, err := json.Marshal(NewEmbeddingResponse(res, "asked", format))
			if err != nil {
				t.Fatal(err)
			}
			// The response as written, each vector kept raw to be read
			// here, not by the code under test.
			var out struct {
				EmbeddingResponse
				Data []struct {
					EmbeddingData
					Embedding json.RawMessage `json:"embedding"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if out.Object != "list" || out.Model != "asked" || out.Data[0].Object != "embedding" || out.Usage != (EmbeddingUsage{3, 3}) {
				t.Fatalf("response %s", b)
			}
			var got []float32
			if format == EncodingBase64 {
				var s string
				if err := json.Unmarshal(out.Data[0].Embedding, &s); err != nil {
					t.Fatal(err)
				}
				raw, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < len(raw); i += 4 {
					got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
				}
			} else if err := json.Unmarshal(out.Data[0].Embedding, &got); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(v) {
				t.Fatalf("vector %v, want %v exactly", got, v)
			}
		})
	}
}
