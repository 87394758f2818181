package textgen

import (
	"errors"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// errStreamRestarted fails a streamed answer that a failed step would
// start over: its first text is already with its caller.
var errStreamRestarted = errors.New("a failed step would restart an answer already streamed")

// emitSafe hands the request's emit the text sampled since the last call,
// less the tail that could still be the start of a stop string: cutAtStop
// may yet remove that tail, and a streamed piece is never taken back.
func (seq *sequence) emitSafe() {
	if seq.req == nil || seq.req.emit == nil {
		return
	}
	text := seq.text.String()
	if safe := len(text) - stopPrefixLen(text, seq.req.stop); safe > seq.emitted {
		seq.emitUpTo(text, safe, false)
	}
}

// emitRest hands emit what is left of a complete answer, so the pieces join
// into exactly the result's text.
func (seq *sequence) emitRest() {
	if seq.req == nil || seq.req.emit == nil {
		return
	}
	if text := seq.text.String(); len(text) > seq.emitted || len(seq.logprobs) > seq.emittedLP {
		seq.emitUpTo(text, len(text), true)
	}
}

// emitUpTo hands emit text up to end, with the entries of the tokens that
// start before it, or with all of them when the answer is complete. An
// entry never comes before its token's first character, which a stop
// string could still cut off with it.
func (seq *sequence) emitUpTo(text string, end int, complete bool) {
	piece := genq.TextPiece{Text: text[seq.emitted:end]}
	if seq.emitted == 0 && seq.emittedLP == 0 && seq.emittedReasoning == 0 { // the first piece names the prompt's counts
		piece.PromptTokens, piece.CachedTokens = len(seq.req.prompt), seq.cached
	}
	n := seq.emittedLP
	for n < len(seq.logprobs) && (seq.logprobs[n].Offset < end || complete) {
		n++
	}
	piece.Logprobs = seq.logprobs[seq.emittedLP:n:n]
	seq.req.emit(piece)
	seq.emitted, seq.emittedLP = end, n
}

// stopPrefixLen is the length of the longest tail of text that is a proper
// start of one of stops. The tail begins where a stop string's first byte
// matches, and stop strings are valid UTF-8, so cutting there keeps both
// sides whole characters.
func stopPrefixLen(text string, stops []string) int {
	longest := 0
	for _, stop := range stops {
		for n := min(len(stop)-1, len(text)); n > longest; n-- {
			if strings.HasSuffix(text, stop[:n]) {
				longest = n
				break
			}
		}
	}
	return longest
}
