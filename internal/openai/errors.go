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
func ErrorOf(err error) Error {
	code := genq.ErrorCode(err)
	return Error{Message: genq.ErrorMessage(err), Type: errorType(code), Code: string(code)}
}

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
