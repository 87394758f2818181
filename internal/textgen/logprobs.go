package textgen

import (
	"math"
	"slices"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen/sample"
	"github.com/genq/genq/internal/textgen/utf8stream"
)

// rowLogprob is what a sampled row says of its token: its log-probability
// under the raw logits' softmax, and the most likely tokens with theirs.
type rowLogprob struct {
	logprob float64
	top     []sample.Logprob
}

// sampleWithLogprob samples a token from row with sampler and measures it
// against the raw logits, with the topLogprobs most likely tokens, before
// the sampler's penalties and biases change the row in place: the model's
// own distribution, as vLLM reports it. ban, when set, takes tokens out of
// the draw once the row is measured.
func sampleWithLogprob(sampler *sample.Sampler, topLogprobs int, row []float32, ban func([]float32)) (int32, *rowLogprob, error) {
	logSumExp, top := sample.RowLogprobs(row, topLogprobs)
	if ban != nil {
		ban(row) // the banned are never drawn, so raw[tok] below is untouched
	}
	raw := row
	if sampler.Adjusts() {
		raw = slices.Clone(row)
	}
	tok, err := sampler.Sample(row)
	if err != nil {
		return 0, nil, err
	}
	return tok, &rowLogprob{logprob: float64(raw[tok]) - logSumExp, top: top}, nil
}

// tokenLogprob is the entry of a token whose text is piece and starts at
// offset in the answer.
func (tm *textModel) tokenLogprob(piece string, offset int, lp *rowLogprob) genq.TokenLogprob {
	entry := genq.TokenLogprob{Logprob: logprobOf(piece, lp.logprob), Offset: offset}
	for _, t := range lp.top {
		entry.Top = append(entry.Top, logprobOf(string(tm.vocab.Text(t.ID)), t.Logprob))
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

// echoPrompt is the prompt of an echoing request as the answer gives it
// back: the text of its tokens that are text and, when scored, an entry
// per token, the first of which nothing scores (its logprob is 0 and it
// has no alternatives).
func (tm *textModel) echoPrompt(prompt []int32, scored bool, scores []*rowLogprob) (string, []genq.TokenLogprob) {
	var text strings.Builder
	var utf8 utf8stream.Stream
	var entries []genq.TokenLogprob
	for i, tok := range prompt {
		piece := string(tm.vocab.Text(tok))
		start := text.Len()
		if !tm.vocab.IsControl(tok) {
			out, at := utf8.WriteAt(piece)
			start += at
			text.WriteString(out)
		}
		if !scored {
			continue
		}
		entry := genq.TokenLogprob{Logprob: logprobOf(piece, 0), Offset: start}
		if i > 0 && i-1 < len(scores) {
			entry = tm.tokenLogprob(piece, start, scores[i-1])
		}
		entries = append(entries, entry)
	}
	text.WriteString(utf8.Flush())
	return text.String(), entries
}
