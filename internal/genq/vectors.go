package genq

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// Vectors are an embedding result's vectors. On the queue each is the
// base64 of its float32s, little-endian, as OpenAI's base64 format is:
// exact, and a third of the bytes of JSON numbers, with no float to format
// on the worker or parse on the api (docs/benchmarks.md, "Embeddings
// against llama-server"). A vector written as a list of numbers reads too.
type Vectors [][]float32

// MarshalJSON writes each vector as a base64 string.
func (v Vectors) MarshalJSON() ([]byte, error) {
	size := 2
	for _, x := range v {
		size += base64.StdEncoding.EncodedLen(4*len(x)) + 3
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	var raw []byte // one vector's bytes, reused
	for i, x := range v {
		if i > 0 {
			out = append(out, ',')
		}
		raw = AppendFloat32s(raw[:0], x)
		out = append(out, '"')
		out = base64.StdEncoding.AppendEncode(out, raw)
		out = append(out, '"')
	}
	return append(out, ']'), nil
}

// UnmarshalJSON reads vectors written as base64 strings or as lists of
// numbers.
func (v *Vectors) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		*v = nil
		return nil
	}
	if out, ok := readBase64List(data); ok {
		*v = out
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return fmt.Errorf("embeddings: %w", err)
	}
	out := make(Vectors, len(items))
	for i, item := range items {
		vec, err := decodeVector(item)
		if err != nil {
			return fmt.Errorf("embeddings[%d]: %w", i, err)
		}
		out[i] = vec
	}
	*v = out
	return nil
}

// readBase64List reads a list of base64 strings as MarshalJSON writes
// it, without the JSON scanner's passes over each string; ok is false for
// anything else (spaces, escapes, numbers, bad base64), which the general
// reader then reads or refuses by name.
func readBase64List(data []byte) (Vectors, bool) {
	rest, ok := bytes.CutPrefix(data, []byte("["))
	if !ok {
		return nil, false
	}
	var out Vectors
	for !bytes.Equal(rest, []byte("]")) {
		if len(out) > 0 {
			if rest, ok = bytes.CutPrefix(rest, []byte(",")); !ok {
				return nil, false
			}
		}
		if rest, ok = bytes.CutPrefix(rest, []byte(`"`)); !ok {
			return nil, false
		}
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return nil, false
		}
		vec, err := float32s(rest[:end])
		if err != nil {
			return nil, false
		}
		out, rest = append(out, vec), rest[end+1:]
	}
	return nonNil(out), true
}

// nonNil keeps an empty list empty rather than null.
func nonNil(v Vectors) Vectors {
	if v == nil {
		return Vectors{}
	}
	return v
}

// decodeVector reads one vector: a base64 string, or a list of numbers.
func decodeVector(item json.RawMessage) ([]float32, error) {
	if len(item) == 0 || item[0] != '"' {
		var vec []float32
		err := json.Unmarshal(item, &vec)
		return vec, err
	}
	var s string
	if err := json.Unmarshal(item, &s); err != nil {
		return nil, err
	}
	return float32s([]byte(s))
}

// float32s decodes the base64 of little-endian float32s.
func float32s(b64 []byte) ([]float32, error) {
	raw, err := base64.StdEncoding.AppendDecode(nil, b64)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if len(raw)%4 != 0 {
		return nil, fmt.Errorf("%d bytes: not a whole number of float32s", len(raw))
	}
	vec := make([]float32, len(raw)/4)
	for j := range vec {
		vec[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
	}
	return vec, nil
}

// AppendFloat32s appends v's float32s to b, little-endian.
func AppendFloat32s(b []byte, v []float32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// Cosine is the cosine of the angle between a and b, summed in float64;
// b is read as long as a.
func Cosine[F float32 | float64](a, b []F) float64 {
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab, aa, bb = ab+x*y, aa+x*x, bb+y*y
	}
	return ab / math.Sqrt(aa*bb)
}
