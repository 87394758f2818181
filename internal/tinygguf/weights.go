package tinygguf

import (
	"encoding/binary"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"

	"github.com/x448/float16"

	"github.com/genq/genq/internal/gguf"
)

// chunkWeights is how many weights a randomTensor draws and encodes at a
// time: a multiple of the Q4_0 block, small enough that one writer per core
// holds a few MB.
const chunkWeights = 1 << 20

// randomTensor generates a tensor's normal weights as it writes them. Each
// chunk has its own source, fixed by the seed, the tensor's name and the
// chunk's index, so the bytes do not depend on how writers are scheduled.
type randomTensor struct {
	seed int64
	name string
	n    int
	std  float64
	kind gguf.TensorType
	// zeroFrom and zeroTo are a range of weights written as zeros (rows of
	// tokens the model must not favour); equal, none.
	zeroFrom, zeroTo int
}

func (r randomTensor) WriteTo(w io.Writer) (int64, error) {
	h := fnv.New64a()
	h.Write([]byte(r.name))
	stream := h.Sum64()
	x := make([]float32, 0, chunkWeights)
	var out []byte
	var written int64
	for start, chunk := 0, uint64(0); start < r.n; start, chunk = start+chunkWeights, chunk+1 {
		rng := rand.New(rand.NewPCG(uint64(r.seed)^chunk*0x9e3779b97f4a7c15, stream))
		x = x[:min(chunkWeights, r.n-start)]
		for i := range x {
			x[i] = float32(rng.NormFloat64() * r.std)
		}
		for i := max(r.zeroFrom, start); i < min(r.zeroTo, start+len(x)); i++ {
			x[i-start] = 0
		}
		switch r.kind {
		case gguf.TensorQ4_0:
			out = appendQ4_0(out[:0], x)
		case gguf.TensorQ8_0:
			out = appendQ8_0(out[:0], x)
		case gguf.TensorQ4_K:
			out = appendQ4_K(out[:0], x)
		case gguf.TensorQ6_K:
			out = appendQ6_K(out[:0], x)
		case gguf.TensorF32:
			out = appendF32(out[:0], x)
		case gguf.TensorBF16:
			out = appendBF16(out[:0], x)
		default:
			out = appendF16(out[:0], x)
		}
		n, err := w.Write(out)
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// onesF32 is a norm's weights: n float32 ones.
type onesF32 int

func (n onesF32) WriteTo(w io.Writer) (int64, error) {
	b := make([]byte, 0, 4*int(n))
	for range int(n) {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(1))
	}
	k, err := w.Write(b)
	return int64(k), err
}

func appendF32(out []byte, x []float32) []byte {
	for _, v := range x {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out
}

// appendBF16 rounds each weight to the nearest bfloat16, ties to even (the
// upper half of its float32 bits), as converters from training checkpoints do.
func appendBF16(out []byte, x []float32) []byte {
	for _, v := range x {
		b := math.Float32bits(v)
		b += 0x7fff + (b>>16)&1
		out = binary.LittleEndian.AppendUint16(out, uint16(b>>16))
	}
	return out
}

func appendF16(out []byte, x []float32) []byte {
	for _, v := range x {
		out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(v).Bits())
	}
	return out
}
