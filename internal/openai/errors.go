package openai

import "github.com/genq/genq/internal/genq"

// ErrorResponse is OpenAI's error shape, which its SDKs parse.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error is an error in OpenAI's words: the SDKs pick their error class from
// the status; Type names the class, and Code is genq's own.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// ErrorOf is err in OpenAI's words, its message the one its user may read.
// A prompt the context cannot hold has OpenAI's own code,
// context_length_exceeded, and names the input as its param, as OpenAI's
// API does: agents read them to shorten their conversation. Any other
// error that names its field has it as its param.
func ErrorOf(err error) Error {
	code := genq.ErrorCode(err)
	e := Error{Message: genq.ErrorMessage(err), Type: errorType(code), Code: string(code)}
	switch ce, ok := genq.ContextExceededOf(err); {
	case ok:
		e.Code, e.Param = CodeContextLengthExceeded, &ce.Input
	case genq.IsModelNotFound(err):
		// OpenAI's own answer to an unknown model: a 404 of this type,
		// its param null.
		e.Type, e.Code = "invalid_request_error", CodeModelNotFound
	default:
		if f := genq.ErrorField(err); f != "" {
			e.Param = &f
		}
	}
	return e
}

// CodeModelNotFound is OpenAI's code of a request for a model it does not
// serve.
const CodeModelNotFound = "model_not_found"

// CodeContextLengthExceeded is OpenAI's code of a request whose prompt and
// max_tokens its model's context cannot hold.
const CodeContextLengthExceeded = "context_length_exceeded"

func errorType(code genq.Code) string {
	switch code {
	case genq.Invalid, genq.TooLarge:
		return "invalid_request_error"
	case genq.Unauthorized:
		return "authentication_error"
	case genq.NotFound:
		return "not_found_error"
	case genq.Overloaded:
		return "rate_limit_error"
	case genq.Unavailable, genq.Timeout, genq.Canceled:
		return "service_unavailable_error"
	}
	return "server_error"
}
