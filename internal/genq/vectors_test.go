package genq

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestVectorsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   Vectors
	}{
		{"none", Vectors{}},
		{"one", Vectors{{0.5, -0.25, 1}}},
		{"extremes", Vectors{{math.MaxFloat32, math.SmallestNonzeroFloat32, -0, float32(math.Inf(1))}, {}}},
		{"a model's width", Vectors{randomVector(384, 1), randomVector(384, 2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(EmbeddingResult{Embeddings: tt.in})
			if err != nil {
				t.Fatal(err)
			}
			var back EmbeddingResult
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if !slices.EqualFunc(back.Embeddings, tt.in, func(a, b []float32) bool {
				return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
			}) {
				t.Errorf("read back %v, want %v", back.Embeddings, tt.in)
			}
		})
	}
}

func TestVectorsRead(t *testing.T) {
	tests := []struct {
		name, json string
		want       Vectors
		err        string
	}{
		{"base64", `["AAAAPwAAgL8="]`, Vectors{{0.5, -1}}, ""},
		{"numbers", `[[0.5,-1],[]]`, Vectors{{0.5, -1}, {}}, ""},
		{"spaced", ` [ "AAAAPw==" , "AAAAPw==" ] `, Vectors{{0.5}, {0.5}}, ""},
		{"none", `[]`, Vectors{}, ""},
		{"both", `["AAAAPw==",[2]]`, Vectors{{0.5}, {2}}, ""},
		{"null", `null`, nil, ""},
		{"not base64", `["!!"]`, nil, "embeddings[0]: not base64"},
		{"a broken float", `["AAAA"]`, nil, "embeddings[0]: 3 bytes"},
		{"not a list", `{"a":1}`, nil, "embeddings:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v Vectors
			err := json.Unmarshal([]byte(tt.json), &v)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(v, tt.want, slices.Equal) {
				t.Errorf("read %v, want %v", v, tt.want)
			}
		})
	}
}

// A result of one 384-float vector, as the worker writes it and the api
// reads it: base64 takes a fraction of the bytes and time of JSON numbers.
func BenchmarkEmbeddingResultJSON(b *testing.B) {
	vec := randomVector(384, 3)
	for _, tt := range []struct {
		name string
		res  any
	}{
		{"base64", EmbeddingResult{Embeddings: Vectors{vec}}},
		{"numbers", struct {
			Embeddings [][]float32 `json:"embeddings"`
		}{[][]float32{vec}}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				data, err := json.Marshal(tt.res)
				if err != nil {
					b.Fatal(err)
				}
				var back EmbeddingResult
				if err := json.Unmarshal(data, &back); err != nil {
					b.Fatal(err)
				}
				size = len(data)
			}
			b.ReportMetric(float64(size), "bytes")
		})
	}
}

// randomVector is a unit vector of n floats, as a model's are.
func randomVector(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, seed))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	Normalize(v)
	return v
}

func TestCosine(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float32
		want float64
	}{
		{"the same", []float32{1, 2, 3}, []float32{1, 2, 3}, 1},
		{"scaled", []float32{1, 2, 3}, []float32{2, 4, 6}, 1},
		{"opposite", []float32{1, -2}, []float32{-1, 2}, -1},
		{"at right angles", []float32{1, 0}, []float32{0, 5}, 0},
		{"at 60 degrees", []float32{1, 0}, []float32{1, float32(math.Sqrt(3))}, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Cosine(tc.a, tc.b); math.Abs(got-tc.want) > 1e-6 {
				t.Fatalf("Cosine = %v, want %v", got, tc.want)
			}
			if got := Cosine(f64s(tc.a), f64s(tc.b)); math.Abs(got-tc.want) > 1e-6 {
				t.Fatalf("Cosine of float64s = %v, want %v", got, tc.want)
			}
		})
	}
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
