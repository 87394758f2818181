package sd3

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/x448/float16"
)

// Tensor is one weight: its PyTorch shape and its values.
type Tensor struct {
	Shape []int
	Data  []float32
}

// Weights are a part's tensors by diffusers name.
type Weights map[string]Tensor

// RandomWeights draws weights for specs from seed. Each tensor has its own
// source (the seed and its name), so adding a tensor changes no other.
// Values are rounded to float16, so fp16 and fp32 copies of them are equal
// and two engines given either compute on the same numbers.
//
// Scales keep activations near unit variance through the layers: matrices
// and kernels by 1/√fan-in, norm weights near one, biases small.
func RandomWeights(specs []Spec, seed int64) Weights {
	w := make(Weights, len(specs))
	for _, s := range specs {
		h := fnv.New64a()
		h.Write([]byte(s.Name))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		mean, std := 0.0, 0.1
		switch {
		case len(s.Shape) == 1 && isNorm(s.Name) && strings.HasSuffix(s.Name, ".weight"):
			mean = 1
		case len(s.Shape) > 1:
			fanIn := 1
			for _, d := range s.Shape[1:] {
				fanIn *= d
			}
			std = 1 / math.Sqrt(float64(fanIn))
		}
		data := make([]float32, s.Elements())
		for i := range data {
			data[i] = float16.Fromfloat32(float32(mean + std*rng.NormFloat64())).Float32()
		}
		w[s.Name] = Tensor{Shape: s.Shape, Data: data}
	}
	return w
}

// isNorm tells the norms' scales from the other vectors.
func isNorm(name string) bool {
	for _, n := range []string{"norm", "group_norm"} {
		if strings.Contains(name, n) {
			return true
		}
	}
	return false
}
