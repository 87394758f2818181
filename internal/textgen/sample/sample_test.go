package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
		{"min-p 0.4 keeps those at 0.2 or more", Params{Temperature: 1, MinP: 0.4}, norm(0.5, 0.3, 0, 0)},
		{"min-p 0.1 keeps three", Params{Temperature: 1, MinP: 0.1}, norm(0.5, 0.3, 0.15, 0)},
		// At temperature 0.5 the odds are squared: 0.09/0.25 = 0.36 < 0.4.
		{"min-p at the temperature", Params{Temperature: 0.5, MinP: 0.4}, []float64{1, 0, 0, 0}},
		{"min-p 1 keeps only the best", Params{Temperature: 1, MinP: 1}, []float64{1, 0, 0, 0}},
		{"top-p, then min-p on what it kept", Params{Temperature: 1, TopP: 0.9, MinP: 0.2}, norm(0.5, 0.3, 0.15, 0)},
		{"min-p cuts below top-p", Params{Temperature: 1, TopP: 0.9, MinP: 0.5}, norm(0.5, 0.3, 0, 0)},
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
		{Params{FrequencyPenalty: -2, PresencePenalty: 2, LogitBias: map[int32]float32{0: -100, 7: 100}}, false},
		{Params{FrequencyPenalty: math.NaN()}, true},
		{Params{MinP: 1}, false},
		{Params{RepetitionPenalty: 1.3}, false},
		{Params{RepetitionPenalty: -1}, true},
		{Params{RepetitionPenalty: math.NaN()}, true},
		{Params{MinP: -0.1}, true},
		{Params{MinP: math.NaN()}, true},
		{Params{PresencePenalty: math.Inf(-1)}, true},
		{Params{LogitBias: map[int32]float32{-1: 1}}, true},
		{Params{LogitBias: map[int32]float32{3: float32(math.Inf(1))}}, true},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); (err != nil) != tt.fail {
			t.Errorf("Validate(%+v) = %v, want failure %v", tt.p, err, tt.fail)
		}
	}
}

// TestPenaltiesAndBias follows greedy choices under OpenAI's definitions:
// a token sampled n times loses n × frequency_penalty + presence_penalty,
// and a bias is added to its token's logit.
func TestPenaltiesAndBias(t *testing.T) {
	// Token 0 leads token 1 by 1.0, and token 1 leads token 2 by 1.0.
	row := []float32{3, 2, 1, -1}
	tests := []struct {
		name   string
		p      Params
		prompt []int32
		want   []int32
	}{
		{"none", Params{}, nil, []int32{0, 0, 0, 0}},
		// 3 - 0.6n drops below 2 at n = 2; then token 1 pays too.
		{"frequency", Params{FrequencyPenalty: 0.6}, nil, []int32{0, 0, 1, 0, 1}},
		// Presence costs each token once, however often: 0 falls to 1.5,
		// below 1's 2; then 1 falls to 0.5, and 0 leads again for good.
		{"presence", Params{PresencePenalty: 1.5}, nil, []int32{0, 1, 0, 0, 0}},
		// A negative penalty favours what was said: 0 stays ahead.
		{"negative", Params{FrequencyPenalty: -0.5, PresencePenalty: -0.5}, nil, []int32{0, 0, 0}},
		{"bias up", Params{LogitBias: map[int32]float32{3: 5}}, nil, []int32{3, 3}},
		{"bias away", Params{LogitBias: map[int32]float32{0: -100}}, nil, []int32{1, 1}},
		{"bias beyond the row is ignored", Params{LogitBias: map[int32]float32{99: 100}}, nil, []int32{0}},
		// 2 rises to 2.5; each pick then costs 3: 0, 2, 1, and 0 again,
		// whose 0 still beats 1's -1, 2's -0.5 and 3's -1.
		{"bias and penalty", Params{PresencePenalty: 3, LogitBias: map[int32]float32{2: 1.5}}, nil, []int32{0, 2, 1, 0}},
		// 2 halves the prompt's token 0 to 1.5, below token 1's 2; once
		// sampled, 1 falls to 1 and 0 leads again. A negative logit is
		// doubled: token 3 stays last.
		{"repetition", Params{RepetitionPenalty: 2}, []int32{0, 3}, []int32{1, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole, narrowed := New(tt.p, 1), New(tt.p, 1)
			whole.RememberPrompt(tt.prompt)
			narrowed.RememberPrompt(tt.prompt)
			ids := []int32{3, 1, 0, 2} // the whole row, in another order
			for i, want := range tt.want {
				got, err := whole.Sample(slices.Clone(row))
				if err != nil || got != want {
					t.Fatalf("step %d: Sample = %d, %v; want %d", i, got, err, want)
				}
				vals := []float32{row[3], row[1], row[0], row[2]}
				if got, err := narrowed.SampleTop(ids, vals); err != nil || got != want {
					t.Fatalf("step %d: SampleTop = %d, %v; want %d", i, got, err, want)
				}
			}
		})
	}
}

// TestAdjustingParamsNeedWholeRows: a device's top-k of the raw logits
// would miss the token a bias raises, so such params narrow nothing.
func TestAdjustingParamsNeedWholeRows(t *testing.T) {
	for _, p := range []Params{
		{FrequencyPenalty: 0.1}, {PresencePenalty: -0.1}, {LogitBias: map[int32]float32{5: 1}}, {RepetitionPenalty: 1.1},
		{Temperature: 0.7, TopK: 40, LogitBias: map[int32]float32{5: 1}},
	} {
		if n := p.Narrowed(); n != 0 {
			t.Errorf("%+v: Narrowed() = %d, want 0 (whole rows)", p, n)
		}
	}
}

// TestRestartReplays: a sequence that starts its answer over (after a
// failed step) draws the same tokens again from the same seed, penalties
// included.
func TestRestartReplays(t *testing.T) {
	row := make([]float32, 64)
	for i := range row {
		row[i] = float32(math.Sin(float64(i))) * 2
	}
	s := New(Params{Temperature: 1, FrequencyPenalty: 0.8, PresencePenalty: 0.4, RepetitionPenalty: 1.5}, 42)
	s.RememberPrompt([]int32{1, 2, 3})
	draws := func() []int32 {
		var out []int32
		for range 40 {
			tok, err := s.Sample(slices.Clone(row))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tok)
		}
		return out
	}
	first := draws()
	s.Restart()
	if again := draws(); !slices.Equal(first, again) {
		t.Fatalf("after Restart:\n%v\nwant\n%v", again, first)
	}
	if distinct := len(counted(first)); distinct < 10 {
		t.Fatalf("only %d distinct tokens in 40 penalised draws: the penalties did not spread them", distinct)
	}
}

func counted(toks []int32) map[int32]int {
	m := map[int32]int{}
	for _, t := range toks {
		m[t]++
	}
	return m
}

func BenchmarkSample(b *testing.B) {
	plain := Params{Temperature: 0.6, TopK: 50, TopP: 0.9}
	// Penalties over an answer of 256 tokens and 16 biased ids: the cost
	// they add is per token named, not per token of the vocabulary.
	adjusted := plain
	adjusted.FrequencyPenalty, adjusted.PresencePenalty = 0.5, 0.5
	adjusted.LogitBias = map[int32]float32{}
	for id := range int32(16) {
		adjusted.LogitBias[id*97] = -1
	}
	for _, n := range []int{291, 128256} { // the tiny model's vocabulary, Llama 3's
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchmarkSample(b, n, plain, 0) })
		b.Run(fmt.Sprint(n, "-penalised"), func(b *testing.B) { benchmarkSample(b, n, adjusted, 256) })
	}
}

func benchmarkSample(b *testing.B, n int, p Params, sampled int) {
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*0.37)) * 8
	}
	s := New(p, 1)
	row := slices.Clone(logits)
	for range sampled {
		s.Sample(row)
	}
	for b.Loop() {
		copy(row, logits) // penalties adjust the row in place
		s.Sample(row)
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

// narrowRow returns the k best of row in a shuffled order, as a device's
// top-k might hand them over.
func narrowRow(row []float32, k int, seed uint64) ([]int32, []float32) {
	s := &Sampler{}
	c := slices.Clone(s.top(row, k))
	rand.New(rand.NewPCG(seed, 0)).Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	ids, logits := make([]int32, len(c)), make([]float32, len(c))
	for i, x := range c {
		ids[i], logits[i] = x.id, x.logit
	}
	return ids, logits
}

// TestSampleTopDrawsWhatSampleDraws: on a fixed row of Llama 3's vocabulary
// size, a sampler fed the device's top-k draws token for token what a
// sampler with the same seed draws from the whole row on the host.
func TestSampleTopDrawsWhatSampleDraws(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	row := make([]float32, 128256)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 4)
	}
	for _, p := range []Params{
		{Temperature: 0},
		{Temperature: 0.6, TopK: 50, TopP: 0.9},
		{Temperature: 1, TopK: 40},
		{Temperature: 1.5, TopK: 8, TopP: 0.5},
	} {
		t.Run(fmt.Sprintf("%+v", p), func(t *testing.T) {
			k := p.Narrowed()
			if k == 0 {
				t.Fatal("these settings narrow")
			}
			host, device := New(p, 9), New(p, 9)
			seen := map[int32]bool{}
			for i := range 500 {
				ids, logits := narrowRow(row, k, uint64(i))
				want, err := host.Sample(row)
				if err != nil {
					t.Fatal(err)
				}
				got, err := device.SampleTop(ids, logits)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("draw %d: SampleTop = %d, Sample = %d", i, got, want)
				}
				seen[got] = true
			}
			if p.Temperature > 0 && p.TopP != 0.5 && len(seen) < 3 {
				t.Fatalf("only %d distinct tokens in 500 draws: the test would not notice a wrong draw", len(seen))
			}
		})
	}
	if (Params{Temperature: 1}).Narrowed() != 0 {
		t.Error("without top-k a sampler needs the whole row")
	}
}

// TestSampleTopDistribution checks SampleTop's frequencies against the
// softmax of its candidates with the chi-square bound TestDistribution uses.
func TestSampleTopDistribution(t *testing.T) {
	ids := []int32{90, 7, 1000, 3}
	logits := logitsOf(0.15, 0.5, 0.05, 0.3)
	want := map[int32]float64{7: 0.5, 3: 0.3, 90: 0.15, 1000: 0.05}
	s := New(Params{Temperature: 1, TopK: 4}, 5)
	const draws = 40000
	counts := map[int32]int{}
	for range draws {
		id, err := s.SampleTop(ids, logits)
		if err != nil {
			t.Fatal(err)
		}
		counts[id]++
	}
	var chi2 float64
	for id, p := range want {
		d := float64(counts[id]) - p*draws
		chi2 += d * d / (p * draws)
	}
	if chi2 > 20.5 {
		t.Fatalf("chi-square %.1f too large: counts %v, want %v", chi2, counts, want)
	}
	if _, err := s.SampleTop(nil, nil); err == nil {
		t.Error("no candidates: want an error")
	}
}

// TestRankKeyOrdersAsBetter: the packed keys sort exactly as better does,
// across signs, zeros, infinities and ties.
func TestRankKeyOrdersAsBetter(t *testing.T) {
	values := []float32{float32(math.Inf(-1)), -3.5, -1, -1e-30, float32(math.Copysign(0, -1)), 0, 1e-30, 0.5, 2, 2, float32(math.Inf(1))}
	var c []candidate
	for i, v := range values {
		c = append(c, candidate{id: int32(i), logit: v}, candidate{id: int32(100 + i), logit: v})
	}
	for _, a := range c {
		for _, b := range c {
			want := better(a, b)
			ka, kb := rankKey(a.logit, a.id), rankKey(b.logit, b.id)
			got := 0
			switch {
			case ka < kb:
				got = -1
			case ka > kb:
				got = 1
			}
			if (want < 0) != (got < 0) || (want > 0) != (got > 0) {
				t.Errorf("%v vs %v: better %d, keys %d", a, b, want, got)
			}
		}
	}
}

// TestRowLogprobs: log-probabilities are the logits less their
// log-sum-exp, NaN counts as impossible, and the top are the most likely
// first, ties to the lower id.
func TestRowLogprobs(t *testing.T) {
	row := logitsOf(0.5, 0.2, 0.2, 0, 0.1)
	row = append(row, float32(math.NaN()))
	for i := range row {
		row[i] += 3 // a shift changes no probability
	}
	lse, top := RowLogprobs(row, 3)
	if got := float64(row[0]) - lse; math.Abs(got-math.Log(0.5)) > 1e-6 {
		t.Fatalf("token 0: %v, want log 0.5", got)
	}
	want := []Logprob{{0, math.Log(0.5)}, {1, math.Log(0.2)}, {2, math.Log(0.2)}}
	if len(top) != len(want) {
		t.Fatalf("top %v, want %v", top, want)
	}
	for i := range want {
		if top[i].ID != want[i].ID || math.Abs(top[i].Logprob-want[i].Logprob) > 1e-6 {
			t.Fatalf("top %v, want %v", top, want)
		}
	}
	if _, top := RowLogprobs(row, 0); top != nil {
		t.Fatalf("top 0 gave %v", top)
	}
	if lse, top := RowLogprobs(logitsOf(0, 0), 2); !math.IsInf(lse, -1) || top != nil {
		t.Fatalf("an impossible row: %v %v", lse, top)
	}
}

// BenchmarkRowLogprobs is what a token of a job with logprobs costs the
// host besides sampling: a log-sum-exp over the row and its top 5.
func BenchmarkRowLogprobs(b *testing.B) {
	for _, n := range []int{291, 128256} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			row := make([]float32, n)
			for i := range row {
				row[i] = float32(math.Sin(float64(i)*0.37)) * 8
			}
			for b.Loop() {
				RowLogprobs(row, 5)
			}
		})
	}
}

func TestExpNonPositive(t *testing.T) {
	for x := -expCutoff + 1e-9; x <= 0; x += 0.0137 {
		if got, want := expNonPositive(x), math.Exp(x); math.Abs(got-want) > 1e-9*want {
			t.Fatalf("exp(%v) = %v, want %v", x, got, want)
		}
	}
	if got := expNonPositive(0); got != 1 {
		t.Fatalf("exp(0) = %v", got)
	}
}
