package natsqueue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// follower checks a stream's chunks and passes on only text that belongs
// to one consistent answer. It follows the run of the highest attempt
// while nothing is forwarded; once text is forwarded, another run, or a
// chunk out of sequence, breaks the stream.
type follower struct {
	attempt int
	next    int
	sent    strings.Builder
	entries int // log-probability entries forwarded
	// reasoned is the reasoning forwarded (chunks with Genq-Part
	// reasoning), which comes before any text.
	reasoned strings.Builder
}

// errStreamBroken is what a producer reports when the chunks it forwarded
// cannot be continued consistently.
func errStreamBroken(format string, args ...any) error {
	return genq.Errorf(genq.Unavailable, "the answer's stream broke off: %s; retry", fmt.Sprintf(format, args...))
}

// chunk returns the piece of m to forward (empty for none), or an error
// that ends the stream.
func (f *follower) chunk(m *nats.Msg) (genq.TextPiece, error) {
	attempt := atoiOr0(m.Header.Get(HeaderAttempt))
	seq := atoiOr0(m.Header.Get(HeaderChunkSeq))
	switch {
	case attempt < f.attempt:
		return genq.TextPiece{}, nil // a run already superseded, still going
	case attempt > f.attempt && f.sent.Len()+f.reasoned.Len() > 0:
		return genq.TextPiece{}, errStreamBroken("the worker stopped after %d bytes and attempt %d started over", f.sent.Len()+f.reasoned.Len(), attempt)
	case attempt > f.attempt:
		f.attempt, f.next = attempt, 1
	}
	if seq != f.next {
		return genq.TextPiece{}, errStreamBroken("chunk %d of attempt %d came where chunk %d was due", seq, attempt, f.next)
	}
	piece := genq.TextPiece{Text: string(m.Data)}
	if m.Header.Get(HeaderPart) == PartReasoning {
		piece = genq.TextPiece{Reasoning: string(m.Data)}
		if f.sent.Len() > 0 {
			return genq.TextPiece{}, errStreamBroken("chunk %d of attempt %d is reasoning after the text", seq, attempt)
		}
	}
	if raw := m.Header.Get(HeaderLogprobs); raw != "" {
		if err := json.Unmarshal([]byte(raw), &piece.Logprobs); err != nil {
			return genq.TextPiece{}, errStreamBroken("chunk %d of attempt %d has log-probabilities genq could not read", seq, attempt)
		}
	}
	if prompt, cached, ok := strings.Cut(m.Header.Get(HeaderPromptTokens), " "); ok {
		piece.PromptTokens, piece.CachedTokens = atoiOr0(prompt), atoiOr0(cached)
	}
	f.next++
	if piece.Reasoning != "" {
		f.reasoned.Write(m.Data)
		return piece, nil
	}
	f.sent.Write(m.Data)
	f.entries += len(piece.Logprobs)
	return piece, nil
}

// final checks the answer against the text forwarded, and returns what of
// it is still to forward: chunks lost at the end of a run are made up from
// the answer, which holds the whole text and every log-probability. The
// answer's body is replaced by the bytes read.
func (f *follower) final(a *genq.ReceivedResult) (genq.TextPiece, error) {
	data, err := io.ReadAll(io.LimitReader(a.Body, genq.MaxTextResultBytes))
	a.Body.Close()
	if err != nil {
		return genq.TextPiece{}, genq.WrapError(genq.Unavailable, err, "the result could not be read")
	}
	a.Body = io.NopCloser(bytes.NewReader(data))
	var out genq.TextResult
	if err := json.Unmarshal(data, &out); err != nil {
		return genq.TextPiece{}, genq.WrapError(genq.Internal, err, "the worker sent a text result genq could not read")
	}
	sent, reasoned := f.sent.String(), f.reasoned.String()
	switch {
	case sent+reasoned != "" && a.Attempt != f.attempt:
		return genq.TextPiece{}, errStreamBroken("the answer came from attempt %d, the text streamed from attempt %d", a.Attempt, f.attempt)
	case !strings.HasPrefix(out.GeneratedText, sent):
		return genq.TextPiece{}, errStreamBroken("the answer does not continue the text streamed")
	case !strings.HasPrefix(out.Reasoning, reasoned) || sent != "" && out.Reasoning != reasoned:
		return genq.TextPiece{}, errStreamBroken("the answer does not continue the reasoning streamed")
	case f.entries > len(out.Logprobs):
		return genq.TextPiece{}, errStreamBroken("%d log-probabilities streamed, the answer has %d", f.entries, len(out.Logprobs))
	}
	return genq.TextPiece{Text: out.GeneratedText[len(sent):], Reasoning: out.Reasoning[len(reasoned):], Logprobs: out.Logprobs[f.entries:]}, nil
}
