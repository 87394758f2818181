package anthropic

import (
	"fmt"

	"github.com/genq/genq/internal/genq"
)

// ErrorResponse is the Messages API's error shape, which its SDKs parse.
type ErrorResponse struct {
	Type  string `json:"type"` // "error"
	Error Error  `json:"error"`
}

// Error is an error in the API's words: the SDKs pick their error class
// from the status; Type names it.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ErrorOf is err in the API's words, its message the one its user may
// read. A conversation the context cannot hold is said in Anthropic's own
// words, which Claude Code reads: a max_tokens past what the context
// leaves after the prompt, so that it asks for fewer; a prompt past the
// context, so that it compacts the conversation.
func ErrorOf(err error) Error {
	e := Error{Type: errorType(genq.ErrorCode(err)), Message: genq.ErrorMessage(err)}
	if ce, ok := genq.ContextExceededOf(err); ok {
		e.Message = contextMessage(ce)
	}
	return e
}

// contextMessage is ce in the Messages API's words.
func contextMessage(ce genq.ContextExceeded) string {
	if ce.Answer > 0 {
		return fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again",
			ce.Prompt, ce.Answer, ce.Context)
	}
	return fmt.Sprintf("prompt is too long: %d tokens > %d maximum", ce.Prompt, ce.Context)
}

// Response is err as a whole error body.
func Response(err error) ErrorResponse { return ErrorResponse{Type: "error", Error: ErrorOf(err)} }

func errorType(code genq.Code) string {
	switch code {
	case genq.Invalid:
		return "invalid_request_error"
	case genq.TooLarge:
		return "request_too_large"
	case genq.Unauthorized:
		return "authentication_error"
	case genq.NotFound:
		return "not_found_error"
	case genq.Overloaded:
		return "rate_limit_error"
	case genq.Unavailable:
		return "overloaded_error"
	case genq.Timeout:
		return "timeout_error"
	}
	return "api_error"
}
