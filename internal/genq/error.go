package genq

import (
	"errors"
	"fmt"
)

// Code is the machine-readable class of an application error. The same code
// travels in a worker's error reply over NATS and decides the HTTP status in
// exactly one place (httpapi's status mapping).
type Code string

const (
	Invalid      Code = "invalid"      // the request cannot be served as sent
	Unauthorized Code = "unauthorized" // the caller did not prove it may ask
	NotFound     Code = "not_found"    // no such route, or no such stored result
	TooLarge     Code = "too_large"    // the request body is over its limit
	Overloaded   Code = "overloaded"   // the queue is full: retry later
	Unavailable  Code = "unavailable"  // a dependency is down, or the job was given up
	Timeout      Code = "timeout"      // the job was not done by its deadline
	Canceled     Code = "canceled"     // the caller went away
	Internal     Code = "internal"     // a bug or an unexpected fault
)

// Error is genq's application error. Message is safe to show to a user;
// whatever is wrapped in Err is for the logs only.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Field names the request's field at fault, where the error knows it
	// ("max_tokens", "messages"): OpenAI's param, and the api's log.
	Field string
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error whose message is shown to users.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError builds an Error that shows message to users and keeps err for the logs.
func WrapError(code Code, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, Internal for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ErrorMessage returns the user-facing message of err. Errors that are not
// *Error never leak their text: they become a generic message.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// ErrorField returns the field the first *Error in err's chain that names
// one names, or "".
func ErrorField(err error) string {
	var e *Error
	for errors.As(err, &e) {
		if e.Field != "" {
			return e.Field
		}
		err = e.Err
	}
	return ""
}

// ErrChanged is a store's error when a record changed since it was read:
// another writer came first, and the caller reads it again.
var ErrChanged = errors.New("the record changed since it was read")
