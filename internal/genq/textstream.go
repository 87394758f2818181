package genq

import "context"

// TextStreamer is a Backend that can hand out an answer's text while it is
// being generated. The worker uses it for jobs that ask to stream; a
// backend without it (images) answers them whole.
type TextStreamer interface {
	// GenerateStream is Generate, and calls emit with each new piece of the
	// answer's text, in order, from one goroutine at a time. Every piece is
	// whole UTF-8, never holds text the final answer does not (text that
	// may turn out to start a stop string is held back), and the pieces of
	// a successful run join into exactly the result's text, their
	// log-probabilities (when the job asks for them) into the result's.
	// emit must not block; it may be called until GenerateStream returns.
	GenerateStream(ctx context.Context, job Job, progress func(Progress), emit func(TextPiece)) (Result, error)
}

// TextPiece is a piece of a streamed answer: its text and, when the job
// asked for them, the entries of the tokens whose characters start in it
// (their offsets count from the start of the whole answer).
type TextPiece struct {
	Text string
	// Reasoning is the next piece of the answer's reasoning
	// (TextResult.Reasoning), which comes before any of its text: the
	// pieces' Reasoning joins into the result's reasoning as their Text
	// joins into its text. A piece may carry both, the reasoning first.
	Reasoning string
	Logprobs  []TokenLogprob
	// PromptTokens and CachedTokens, on a run's first piece only (0 on
	// the others, and from a backend that does not count them), are the
	// prompt's tokens and those of them the prefix cache held: what the
	// result's usage will say, known before the answer's first text, for
	// a stream that names them at its start (Anthropic's message_start).
	PromptTokens, CachedTokens int
}

// ImageStreamer is a Backend that can hand out previews of an image while
// it is being made. The worker uses it for image jobs that ask to stream.
type ImageStreamer interface {
	// GenerateImageStream is Generate, and calls emit with each of the
	// job's PartialImages previews, in order, from the job's goroutine.
	// emit must not block.
	GenerateImageStream(ctx context.Context, job Job, progress func(Progress), emit func(ImagePiece)) (Result, error)
}

// ImagePiece is a preview of a streamed image: its place among the
// previews, from 0, and its encoded bytes.
type ImagePiece struct {
	Index       int
	ContentType string
	Data        []byte
}
