package ggml

import (
	"log/slog"

	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/tokenizer"
)

// engine is the loaded model as steps run on it: the scheduler's, the
// unbatched loop's, the reservation's and the shared prefix's. Open builds
// it once; afterwards only the cache its graph owns changes.
type engine struct {
	model model.Model // its backend gives each step its ml.Context
	graph stepGraph
	tok   tokenizer.Tokenizer
	vocab vocabInfo
	log   *slog.Logger

	slots, batchSize int
	maxNewTokens     int  // an answer's limit when its request sets none
	ignoreEOS        bool // Config.IgnoreEOS
	pipeline         bool // Config.Pipeline, resolved by Open

	// prefix holds the tokens every prompt starts with (BOS, the system
	// message, the user header). They are computed once, at start-up, into
	// the cache sequence prefixSeq, and each new sequence shares them.
	prefix []int32

	// narrowK is the most candidates per row a step's graph may hand the
	// sampler, or 0 when whole rows of logits reach the host. A step narrows
	// when it samples at least narrowMinRows rows, to the most its rows'
	// samplers need (stepNarrowK).
	narrowK, narrowMinRows int
}

// prefixSeq is the cache sequence that keeps the shared prompt prefix.
func (e *engine) prefixSeq() int { return e.slots }

func (e *engine) close() {
	if e.graph != nil {
		e.graph.close()
		e.graph = nil
	}
	if e.model != nil {
		e.model.Backend().Close()
		e.model = nil
	}
}
