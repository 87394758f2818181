package sd3

import (
	"fmt"
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
		w[s.Name] = Tensor{Shape: s.Shape, Data: randomValues(s, seed)}
	}
	return w
}

// randomValues draws one tensor's values, as RandomWeights does.
func randomValues(s Spec, seed int64) []float32 {
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
	return data
}

// RandomSource draws the same weights as RandomWeights one tensor at a
// time, as a GGUF writer asks for them: a model of billions of parameters
// needs no buffer of them all. Fixed replaces tensors that are not random
// (the transformer's position table).
type RandomSource struct {
	Specs []Spec
	Seed  int64
	Fixed Weights
}

// Shape is a tensor's shape, nil when absent.
func (r RandomSource) Shape(name string) []int {
	for _, s := range r.Specs {
		if s.Name == name {
			return s.Shape
		}
	}
	return nil
}

// Values draws a tensor's values.
func (r RandomSource) Values(name string) ([]float32, error) {
	if t, ok := r.Fixed[name]; ok {
		return t.Data, nil
	}
	for _, s := range r.Specs {
		if s.Name == name {
			return randomValues(s, r.Seed), nil
		}
	}
	return nil, fmt.Errorf("tensor %s is missing", name)
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
