// Package sample turns a row of logits into the next token: greedy, or
// temperature sampling narrowed by top-k, top-p and min-p, after OpenAI's
// penalties and biases, from a seeded source so a fixed seed replays the
// same choices; and scores rows for log-probabilities.
package sample

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Params are the knobs of one sequence's sampler. The order they apply in:
// penalties and biases on the logits, then Hugging Face's temperature,
// top-k, and top-p with min-p.
type Params struct {
	// Temperature <= 0 means greedy: always the most likely token.
	Temperature float64
	// TopK keeps only the k most likely tokens; 0 keeps them all.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP; 0 or >= 1 keeps them all.
	TopP float64
	// MinP keeps only the tokens at least MinP times as likely as the most
	// likely one, at the temperature; 0 keeps them all.
	MinP float64

	// FrequencyPenalty and PresencePenalty lower the logit of every token
	// the sequence has sampled so far, before anything else: by
	// FrequencyPenalty times the token's count, and by PresencePenalty
	// once (OpenAI's definition; negative values raise them). The prompt's
	// tokens do not count, as in vLLM.
	FrequencyPenalty, PresencePenalty float64
	// LogitBias is added to the logits of the token ids it names.
	LogitBias map[int32]float32
	// RepetitionPenalty divides the positive logits, and multiplies the
	// negative ones, of every token in the prompt (RememberPrompt) or
	// sampled so far: Hugging Face's and vLLM's. 0 and 1 are none.
	RepetitionPenalty float64
}

func (p Params) repeats() bool { return p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1 }

// Adjusts reports whether Sample changes the logits it is given (penalties,
// biases).
func (s *Sampler) Adjusts() bool { return s.params.adjusts() }

// adjusts reports whether the params change logits before selection, so a
// row must be seen whole: a device's top-k of the raw logits may miss a
// token that a bias raises or a penalty lets overtake.
func (p Params) adjusts() bool {
	return p.FrequencyPenalty != 0 || p.PresencePenalty != 0 || len(p.LogitBias) > 0 || p.repeats()
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
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("min-p %v must be in [0, 1]", p.MinP)
	case !(p.RepetitionPenalty >= 0) || math.IsInf(p.RepetitionPenalty, 0):
		return fmt.Errorf("repetition penalty %v must be a finite number above 0", p.RepetitionPenalty)
	case !isFinite(p.FrequencyPenalty) || !isFinite(p.PresencePenalty):
		return fmt.Errorf("penalties %v and %v must be finite numbers", p.FrequencyPenalty, p.PresencePenalty)
	}
	for id, bias := range p.LogitBias {
		if id < 0 || !isFinite(float64(bias)) {
			return fmt.Errorf("logit bias %v for token %d: want a token id and a finite number", bias, id)
		}
	}
	return nil
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Sampler draws tokens for one sequence. It is not safe for concurrent use;
// each sequence owns one, which is also what makes a seed reproducible no
// matter how sequences interleave in a batch.
type Sampler struct {
	params Params
	seed   uint64
	rng    *rand.Rand
	// counts are the sampled tokens' counts, for the penalties; seen the
	// prompt's and sampled tokens, for the repetition penalty.
	counts map[int32]int32
	seen   map[int32]bool
	prompt []int32
	// Reused between calls: sampling runs once per token.
	cands []candidate
	keys  []uint64
	probs []float64
}

// New returns a sampler whose draws are fixed by seed.
func New(p Params, seed uint64) *Sampler {
	s := &Sampler{params: p, seed: seed}
	s.Restart()
	return s
}

// Restart forgets the tokens sampled so far and rewinds the seeded source,
// for a sequence that starts its answer over: the same seed then draws the
// same answer again.
func (s *Sampler) Restart() {
	s.rng = rand.New(rand.NewPCG(s.seed, s.seed^0x9e3779b97f4a7c15))
	if s.params.FrequencyPenalty != 0 || s.params.PresencePenalty != 0 {
		s.counts = make(map[int32]int32)
	}
	s.forgetAnswer()
}

// RememberPrompt gives the repetition penalty the prompt's tokens.
func (s *Sampler) RememberPrompt(tokens []int32) {
	s.prompt = tokens
	s.forgetAnswer()
}

// forgetAnswer leaves the repetition penalty only the prompt's tokens.
func (s *Sampler) forgetAnswer() {
	if !s.params.repeats() {
		return
	}
	s.seen = make(map[int32]bool, len(s.prompt))
	for _, t := range s.prompt {
		s.seen[t] = true
	}
}

type candidate struct {
	id    int32
	logit float32
}

// Sample picks a token id from logits. NaN logits are never picked. When
// the params set penalties or biases, it applies them to logits in place:
// a row of logits is sampled once.
func (s *Sampler) Sample(logits []float32) (int32, error) {
	if len(logits) == 0 {
		return 0, fmt.Errorf("sample: empty logits")
	}
	if s.params.adjusts() {
		s.adjustRow(logits)
	}
	var tok int32
	var err error
	if s.params.Temperature <= 0 {
		tok, err = greedy(logits)
	} else {
		tok, err = s.draw(s.top(logits, s.params.TopK))
	}
	s.count(tok, err)
	return tok, err
}

// adjustRow applies the penalties and biases to a whole row, in vLLM's
// order (the repetition penalty, then frequency and presence) with the
// biases last: only the tokens they name are touched.
func (s *Sampler) adjustRow(logits []float32) {
	for id := range s.seen {
		if int(id) < len(logits) {
			logits[id] = s.repeat(logits[id])
		}
	}
	for id, n := range s.counts {
		if int(id) < len(logits) {
			logits[id] -= s.penalty(n)
		}
	}
	for id, bias := range s.params.LogitBias {
		if int(id) < len(logits) {
			logits[id] += bias
		}
	}
}

// adjusted is one candidate's logit after the penalties and biases.
func (s *Sampler) adjusted(id int32, logit float32) float32 {
	if s.seen[id] {
		logit = s.repeat(logit)
	}
	return logit - s.penalty(s.counts[id]) + s.params.LogitBias[id]
}

// repeat is a seen token's logit under the repetition penalty: always less
// likely for a penalty above 1.
func (s *Sampler) repeat(logit float32) float32 {
	if logit > 0 {
		return float32(float64(logit) / s.params.RepetitionPenalty)
	}
	return float32(float64(logit) * s.params.RepetitionPenalty)
}

// penalty is what the penalties take from a token sampled n times.
func (s *Sampler) penalty(n int32) float32 {
	if n == 0 {
		return 0
	}
	return float32(float64(n)*s.params.FrequencyPenalty + s.params.PresencePenalty)
}

func (s *Sampler) count(tok int32, err error) {
	if err != nil {
		return
	}
	if s.counts != nil {
		s.counts[tok]++
	}
	if s.seen != nil {
		s.seen[tok] = true
	}
}

// Narrowed reports how many of a row's best logits SampleTop needs to draw
// exactly what Sample would draw from the whole row: 1 when greedy, TopK
// otherwise, and 0 when it needs the whole row (no top-k).
func (p Params) Narrowed() int {
	switch {
	case p.adjusts():
		return 0
	case p.Temperature <= 0:
		return 1
	case p.TopK > 0:
		return p.TopK
	}
	return 0
}

// SampleTop picks a token id from a row already narrowed to its best
// candidates, elsewhere (on the device, in the step's own graph): ids and
// their logits, in any order. Given at least Params.Narrowed candidates, it
// draws what Sample draws from the whole row with the same seed, ties
// aside: candidates are ordered the same way, lower id first on equal
// logits, before the same draw.
func (s *Sampler) SampleTop(ids []int32, logits []float32) (int32, error) {
	if len(ids) == 0 || len(ids) != len(logits) {
		return 0, fmt.Errorf("sample: %d candidate ids for %d logits", len(ids), len(logits))
	}
	c := s.cands[:0]
	adjusts := s.params.adjusts()
	for i, l := range logits {
		if adjusts {
			l = s.adjusted(ids[i], l)
		}
		if l == l { // not NaN
			c = append(c, candidate{id: ids[i], logit: l})
		}
	}
	s.cands = c
	if len(c) == 0 {
		return 0, fmt.Errorf("sample: every logit is NaN")
	}
	slices.SortFunc(c, better)
	if s.params.Temperature <= 0 {
		s.count(c[0].id, nil)
		return c[0].id, nil
	}
	if k := s.params.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	tok, err := s.draw(c)
	s.count(tok, err)
	return tok, err
}

// draw samples from candidates sorted from most to least likely: softmax at
// the temperature, then top-p, then one draw from the seeded source.
func (s *Sampler) draw(cands []candidate) (int32, error) {
	if len(cands) == 0 {
		return 0, fmt.Errorf("sample: every logit is NaN")
	}

	// Softmax over the survivors at the temperature; subtracting the max
	// keeps exp from overflowing.
	maxLogit := float64(cands[0].logit)
	probs := s.probs[:0]
	var sum float64
	for _, c := range cands {
		p := math.Exp((float64(c.logit) - maxLogit) / s.params.Temperature)
		probs = append(probs, p)
		sum += p
	}
	s.probs = probs

	keep := len(cands)
	if m := s.params.MinP; m > 0 {
		// probs[0] is the most likely token's. The threshold is relative
		// to it, so min-p keeps the same tokens before top-p or after it
		// (vLLM's order), as long as top-p sums over every candidate.
		for keep > 1 && probs[keep-1] < m*probs[0] {
			keep--
		}
	}
	if p := s.params.TopP; p > 0 && p < 1 {
		var cum float64
		for i := range probs {
			cum += probs[i] / sum
			if cum >= p {
				keep = min(keep, i+1)
				break
			}
		}
	}

	var total float64
	for _, p := range probs[:keep] {
		total += p
	}
	r := s.rng.Float64() * total
	for i, p := range probs[:keep] {
		r -= p
		if r < 0 {
			return cands[i].id, nil
		}
	}
	return cands[keep-1].id, nil // rounding left r a hair above 0
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
// most to least likely, ties broken by the lower id so draws are
// reproducible. It selects the k best in linear time before sorting only
// them: sampling runs once per token, over vocabularies of 128k.
func (s *Sampler) top(logits []float32, k int) []candidate {
	if k > 0 && k < len(logits)/16 {
		return s.topHeap(logits, k)
	}
	keys := s.keys[:0]
	for i, l := range logits {
		if l == l { // not NaN
			keys = append(keys, rankKey(l, int32(i)))
		}
	}
	s.keys = keys
	if k > 0 && k < len(keys) {
		selectLowest(keys, k)
		keys = keys[:k]
	}
	slices.Sort(keys)
	c := s.cands[:0]
	for _, key := range keys {
		id := int32(uint32(key))
		c = append(c, candidate{id: id, logit: logits[id]})
	}
	s.cands = c
	return c
}

// rankKey packs a candidate into one integer that sorts as better does:
// ascending keys are descending logits, then ascending ids. Comparing
// integers inline is much faster than calling better, and sampling runs
// once per token of every sequence (docs/benchmarks.md has the figures).
func rankKey(logit float32, id int32) uint64 {
	if logit == 0 {
		logit = 0 // -0 ties with +0, as in better
	}
	b := math.Float32bits(logit)
	if b>>31 == 1 {
		b = ^b // negative: larger magnitude is smaller
	} else {
		b |= 1 << 31
	}
	// b now ascends with the logit; its complement descends.
	return uint64(^b)<<32 | uint64(uint32(id))
}

// selectLowest moves the k lowest keys to the front of keys, in no
// particular order: quickselect with a middle pivot (keys are distinct).
func selectLowest(keys []uint64, k int) {
	lo, hi := 0, len(keys)-1
	for lo < hi {
		pivot := keys[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for keys[i] < pivot {
				i++
			}
			for pivot < keys[j] {
				j--
			}
			if i <= j {
				keys[i], keys[j] = keys[j], keys[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}

// topHeap is top for a k much smaller than the vocabulary: a min-heap of the
// k best so far rejects most logits with one comparison and never copies the
// vocabulary, which on a large vocabulary beats selecting over a copy.
func (s *Sampler) topHeap(logits []float32, k int) []candidate {
	h := minHeap(s.cands[:0])
	for i, l := range logits {
		if l != l {
			continue
		}
		c := candidate{id: int32(i), logit: l}
		if len(h) < k {
			heap.Push(&h, c)
		} else if better(c, h[0]) < 0 {
			h[0] = c
			heap.Fix(&h, 0)
		}
	}
	s.cands = h
	slices.SortFunc(h, better)
	return h
}

// minHeap keeps the worst of the best k on top.
type minHeap []candidate

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return better(h[i], h[j]) > 0 }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// better orders candidates from most to least likely, lower id first on ties.
func better(a, b candidate) int {
	switch {
	case a.logit > b.logit:
		return -1
	case a.logit < b.logit:
		return 1
	}
	return int(a.id - b.id)
}

// Logprob is a token id and its log-probability.
type Logprob struct {
	ID      int32
	Logprob float64
}

// RowLogprobs returns what log-probabilities need of a row of raw logits:
// its log-sum-exp, so that a token's log-probability is its logit minus it,
// and the top most likely tokens with theirs, most likely first (ties to
// the lower id). NaN logits count as impossible.
func RowLogprobs(row []float32, top int) (logSumExp float64, best []Logprob) {
	maxLogit := math.Inf(-1)
	for _, l := range row {
		if float64(l) > maxLogit {
			maxLogit = float64(l)
		}
	}
	if math.IsInf(maxLogit, -1) {
		return maxLogit, nil // nothing is possible
	}
	var sum float64
	for _, l := range row {
		if d := float64(l) - maxLogit; d > -expCutoff { // false for NaN
			sum += expNonPositive(d)
		}
	}
	logSumExp = maxLogit + math.Log(sum)
	if top > 0 {
		var s Sampler
		for _, c := range s.top(row, top) {
			best = append(best, Logprob{ID: c.id, Logprob: float64(c.logit) - logSumExp})
		}
	}
	return logSumExp, best
}

// expCutoff: e^-expCutoff is below 1e-30, nothing next to the largest
// term's 1 even summed over a vocabulary.
const expCutoff = 70

// expNonPositive is e^x for x in (-expCutoff, 0], to about 1e-10 relative:
// x = n·ln2 + r with |r| <= ln2/2, e^r by its Taylor series to r^8, times
// 2^n. The log-sum-exp of a 128,256-token row spends most of its time
// here, and math.Exp takes about three times as long.
func expNonPositive(x float64) float64 {
	const (
		log2e = 1.4426950408889634
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
	)
	n := float64(int64(x*log2e - 0.5)) // rounds x·log2e to nearest: it is <= 0
	r := x - n*ln2Hi - n*ln2Lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320))))))))
	return p * math.Float64frombits(uint64(int64(n)+1023)<<52)
}
