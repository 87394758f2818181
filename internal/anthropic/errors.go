package anthropic

import "github.com/genq/genq/internal/genq"

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
// read.
func ErrorOf(err error) Error {
	return Error{Type: errorType(genq.ErrorCode(err)), Message: genq.ErrorMessage(err)}
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
