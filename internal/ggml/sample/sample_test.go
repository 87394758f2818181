package sample

import (
	"fmt"
	"math"
	"testing"
)

func logitsOf(probs ...float64) []float32 {
	l := make([]float32, len(probs))
	for i, p := range probs {
		if p == 0 {
			l[i] = float32(math.Inf(-1))
			continue
		}
		l[i] = float32(math.Log(p))
	}
	return l
}

func TestGreedy(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"first is best", []float32{3, 1, 2}, 0},
		{"last is best", []float32{-5, -4, -1}, 2},
		{"NaN is skipped", []float32{nan, 1, 2, nan}, 2},
		{"tie takes the lower id", []float32{1, 7, 7}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Params{Temperature: 0}, 1)
			got, err := s.Sample(tt.logits)
			if err != nil || got != tt.want {
				t.Fatalf("Sample = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestSampleRejectsUnusableLogits(t *testing.T) {
	nan := float32(math.NaN())
	for _, p := range []Params{{Temperature: 0}, {Temperature: 1}} {
		if _, err := New(p, 1).Sample(nil); err == nil {
			t.Errorf("%+v: empty logits: want an error", p)
		}
		if _, err := New(p, 1).Sample([]float32{nan, nan}); err == nil {
			t.Errorf("%+v: all NaN: want an error", p)
		}
	}
}

// TestDistribution draws many tokens and checks their frequencies against the
// distribution each setting should give, with a chi-square statistic. The
// seed is fixed, so the test is deterministic, yet any wrong weighting (a
// temperature applied twice, top-p off by one token) moves the statistic far
// past the bound.
func TestDistribution(t *testing.T) {
	base := logitsOf(0.5, 0.3, 0.15, 0.05)
	tests := []struct {
		name   string
		params Params
		want   []float64 // expected probability of each token
	}{
		{"temperature 1 is the softmax", Params{Temperature: 1}, []float64{0.5, 0.3, 0.15, 0.05}},
		{"temperature 0.5 squares the odds", Params{Temperature: 0.5}, norm(0.25, 0.09, 0.0225, 0.0025)},
		{"temperature 2 flattens", Params{Temperature: 2}, norm(math.Sqrt(0.5), math.Sqrt(0.3), math.Sqrt(0.15), math.Sqrt(0.05))},
		{"top-k 2 keeps two", Params{Temperature: 1, TopK: 2}, norm(0.5, 0.3, 0, 0)},
		{"top-k larger than vocab keeps all", Params{Temperature: 1, TopK: 10}, []float64{0.5, 0.3, 0.15, 0.05}},
		{"top-p 0.7 keeps the two that reach it", Params{Temperature: 1, TopP: 0.7}, norm(0.5, 0.3, 0, 0)},
		{"top-p 0.9 keeps three", Params{Temperature: 1, TopP: 0.9}, norm(0.5, 0.3, 0.15, 0)},
		{"top-p 0.4 keeps only the best", Params{Temperature: 1, TopP: 0.4}, []float64{1, 0, 0, 0}},
		{"top-p 1 keeps all", Params{Temperature: 1, TopP: 1}, []float64{0.5, 0.3, 0.15, 0.05}},
		{"top-k then top-p", Params{Temperature: 1, TopK: 3, TopP: 0.6}, norm(0.5, 0.3, 0, 0)},
	}
	const draws = 40000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.params, 42)
			counts := make([]int, len(base))
			for range draws {
				id, err := s.Sample(base)
				if err != nil {
					t.Fatal(err)
				}
				counts[id]++
			}
			var chi2 float64
			df := -1
			for i, p := range tt.want {
				if p == 0 {
					if counts[i] != 0 {
						t.Fatalf("token %d drawn %d times, want never (counts %v)", i, counts[i], counts)
					}
					continue
				}
				exp := p * draws
				d := float64(counts[i]) - exp
				chi2 += d * d / exp
				df++
			}
			// 20.5 is the 0.999 quantile for 4 degrees of freedom, above the
			// bound for the df <= 3 used here.
			if chi2 > 20.5 {
				t.Fatalf("chi-square %.1f (df %d) too large: counts %v, want probabilities %v", chi2, df, counts, tt.want)
			}
		})
	}
}

func norm(ps ...float64) []float64 {
	var sum float64
	for _, p := range ps {
		sum += p
	}
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = p / sum
	}
	return out
}

func TestSeedReplays(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i))) * 3
	}
	p := Params{Temperature: 0.6, TopK: 50, TopP: 0.9}
	draw := func(seed uint64) []int32 {
		s := New(p, seed)
		out := make([]int32, 64)
		for i := range out {
			out[i], _ = s.Sample(logits)
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !equal(a, b) {
		t.Fatalf("same seed gave different draws:\n%v\n%v", a, b)
	}
	if equal(a, c) {
		t.Fatalf("seeds 7 and 8 gave the same 64 draws: %v", a)
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestValidate(t *testing.T) {
	tests := []struct {
		p    Params
		fail bool
	}{
		{Params{Temperature: 0.6, TopP: 0.9, TopK: 50}, false},
		{Params{}, false},
		{Params{Temperature: math.NaN()}, true},
		{Params{Temperature: math.Inf(1)}, true},
		{Params{TopK: -1}, true},
		{Params{TopP: -0.1}, true},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); (err != nil) != tt.fail {
			t.Errorf("Validate(%+v) = %v, want failure %v", tt.p, err, tt.fail)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	for _, n := range []int{291, 128256} { // the tiny model's vocabulary, Llama 3's
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchmarkSample(b, n) })
	}
}

func benchmarkSample(b *testing.B, n int) {
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*0.37)) * 8
	}
	s := New(Params{Temperature: 0.6, TopK: 50, TopP: 0.9}, 1)
	for b.Loop() {
		s.Sample(logits)
	}
}

// TestTopMatchesFullSort checks the linear-time selection against a full
// sort, on vocabularies with many ties.
func TestTopMatchesFullSort(t *testing.T) {
	for _, n := range []int{1, 2, 7, 300, 1000} {
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32((i * 7919) % 13) // many equal values
		}
		full := New(Params{}, 1).top(logits, 0)
		for _, k := range []int{1, 3, 50, n - 1, n} {
			if k <= 0 {
				continue
			}
			got := New(Params{}, 1).top(logits, k)
			if len(got) != min(k, n) {
				t.Fatalf("n=%d k=%d: %d candidates", n, k, len(got))
			}
			for i := range got {
				if got[i].id != full[i].id {
					t.Fatalf("n=%d k=%d: position %d is token %d, want %d", n, k, i, got[i].id, full[i].id)
				}
			}
		}
	}
}
