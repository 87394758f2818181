// Package sample turns a row of logits into the next token: greedy, or
// temperature sampling narrowed by top-k and top-p, from a seeded source so a
// fixed seed replays the same choices.
package sample

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Params are the knobs of one sequence's sampler. The order they apply in is
// Hugging Face's: temperature, then top-k, then top-p.
type Params struct {
	// Temperature <= 0 means greedy: always the most likely token.
	Temperature float64
	// TopK keeps only the k most likely tokens; 0 keeps them all.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP; 0 or >= 1 keeps them all.
	TopP float64
}

// Validate reports a setting no sampler can use.
func (p Params) Validate() error {
	switch {
	case math.IsNaN(p.Temperature) || math.IsInf(p.Temperature, 0):
		return fmt.Errorf("temperature %v is not a finite number", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("top-k %d is negative", p.TopK)
	case math.IsNaN(p.TopP) || p.TopP < 0:
		return fmt.Errorf("top-p %v must be in [0, 1]", p.TopP)
	}
	return nil
}

// Sampler draws tokens for one sequence. It is not safe for concurrent use;
// each sequence owns one, which is also what makes a seed reproducible no
// matter how sequences interleave in a batch.
type Sampler struct {
	params Params
	rng    *rand.Rand
	cands  candidates // reused between calls: sampling runs once per token
}

// New returns a sampler whose draws are fixed by seed.
func New(p Params, seed uint64) *Sampler {
	return &Sampler{params: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

type candidate struct {
	id    int32
	logit float32
	prob  float64
}

// candidates is a min-heap on logit, so the k best of a large vocabulary are
// found in one pass without sorting it all.
type candidates []candidate

func (c candidates) Len() int           { return len(c) }
func (c candidates) Less(i, j int) bool { return c[i].logit < c[j].logit }
func (c candidates) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)        { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// Sample picks a token id from logits. NaN logits are never picked.
func (s *Sampler) Sample(logits []float32) (int32, error) {
	if len(logits) == 0 {
		return 0, fmt.Errorf("sample: empty logits")
	}
	if s.params.Temperature <= 0 {
		return greedy(logits)
	}

	cands := s.top(logits, s.params.TopK)
	if len(cands) == 0 {
		return 0, fmt.Errorf("sample: every logit is NaN")
	}

	// Softmax over the survivors at the temperature; subtracting the max
	// keeps exp from overflowing.
	maxLogit := float64(cands[0].logit)
	var sum float64
	for i := range cands {
		p := math.Exp((float64(cands[i].logit) - maxLogit) / s.params.Temperature)
		cands[i].prob = p
		sum += p
	}

	keep := len(cands)
	if p := s.params.TopP; p > 0 && p < 1 {
		var cum float64
		for i := range cands {
			cum += cands[i].prob / sum
			if cum >= p {
				keep = i + 1
				break
			}
		}
	}
	cands = cands[:keep]

	var total float64
	for _, c := range cands {
		total += c.prob
	}
	r := s.rng.Float64() * total
	for _, c := range cands {
		r -= c.prob
		if r < 0 {
			return c.id, nil
		}
	}
	return cands[len(cands)-1].id, nil // rounding left r a hair above 0
}

func greedy(logits []float32) (int32, error) {
	best := -1
	for i, l := range logits {
		if l != l { // NaN
			continue
		}
		if best < 0 || l > logits[best] {
			best = i
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("sample: every logit is NaN")
	}
	return int32(best), nil
}

// top returns the k highest logits (all when k is 0 or too big), sorted from
// most to least likely, ties broken by the lower id so draws are reproducible.
func (s *Sampler) top(logits []float32, k int) candidates {
	c := s.cands[:0]
	if k <= 0 || k >= len(logits) {
		for i, l := range logits {
			if l == l {
				c = append(c, candidate{id: int32(i), logit: l})
			}
		}
	} else {
		for i, l := range logits {
			if l != l {
				continue
			}
			if len(c) < k {
				heap.Push(&c, candidate{id: int32(i), logit: l})
			} else if l > c[0].logit {
				c[0] = candidate{id: int32(i), logit: l}
				heap.Fix(&c, 0)
			}
		}
	}
	slices.SortFunc(c, func(a, b candidate) int {
		switch {
		case a.logit > b.logit:
			return -1
		case a.logit < b.logit:
			return 1
		}
		return int(a.id - b.id)
	})
	s.cands = c
	return c
}
