// Package openai is OpenAI's API in genq's words, with no server and no
// queue: the wire shapes of its requests, answers, chunks and errors; the
// decoders that turn a request body into the jobs it asks for, refusing
// bad input with genq.Invalid; and the renderers that turn results into
// OpenAI's objects, log-probabilities included. Only what genq can honour
// is accepted. The rest of OpenAI's fields are ignored, except those whose
// silent loss would hand back another kind of answer than the one asked
// for: tool calls, JSON output, best_of and suffix are refused with a
// message that says so, as are echo in a chat and echo with streaming.
package openai
