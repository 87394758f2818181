package ggml

import (
	"math"
	"slices"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggml/sample"
)

// rowLogprob is what a sampled row says of its token: its log-probability
// under the raw logits' softmax, and the most likely tokens with theirs.
type rowLogprob struct {
	logprob float64
	top     []sample.Logprob
}

// sampleWithLogprob samples req's token from row and measures it against
// the raw logits, before the sampler's penalties and biases change the row
// in place: the model's own distribution, as vLLM reports it.
func sampleWithLogprob(req *request, row []float32) (int32, *rowLogprob, error) {
	logSumExp, top := sample.RowLogprobs(row, req.topLogprobs)
	raw := row
	if req.sampler.Adjusts() {
		raw = slices.Clone(row)
	}
	tok, err := req.sampler.Sample(row)
	if err != nil {
		return 0, nil, err
	}
	return tok, &rowLogprob{logprob: float64(raw[tok]) - logSumExp, top: top}, nil
}

// tokenLogprob is the entry of a token whose text is piece and starts at
// offset in the answer.
func (b *Backend) tokenLogprob(piece string, offset int, lp *rowLogprob) genq.TokenLogprob {
	entry := genq.TokenLogprob{Logprob: logprobOf(piece, lp.logprob), Offset: offset}
	for _, t := range lp.top {
		text, err := b.tok.Decode([]int32{t.ID})
		if err != nil {
			text = ""
		}
		entry.Top = append(entry.Top, logprobOf(text, t.Logprob))
	}
	return entry
}

func logprobOf(piece string, logprob float64) genq.Logprob {
	if math.IsNaN(logprob) || logprob < genq.MinLogprob {
		logprob = genq.MinLogprob // -Inf: JSON has no such number
	}
	bytes := make([]int, len(piece))
	for i := range len(piece) {
		bytes[i] = int(piece[i])
	}
	return genq.Logprob{Token: piece, Bytes: bytes, Logprob: logprob}
}
