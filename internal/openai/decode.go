package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
)

// Decode reads a request body into v: one JSON object, valid UTF-8, fields
// of the right types.
func Decode(body []byte, v any) error {
	if !utf8.Valid(body) {
		return genq.Errorf(genq.Invalid, "request body is not valid UTF-8")
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if len(t) == 0 {
			return genq.Errorf(genq.Invalid, "request body is not valid JSON: unexpected end of input")
		}
		return genq.Errorf(genq.Invalid, "request body must be a JSON object")
	}
	err := json.Unmarshal(body, v)
	var typeErr *json.UnmarshalTypeError
	var appErr *genq.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &appErr):
		return appErr
	case errors.As(err, &typeErr):
		return genq.Errorf(genq.Invalid, "%s must be %s, not %s", jsonField(typeErr.Field), jsonTypeName(typeErr.Type.String()), typeErr.Value)
	}
	return Malformed(err)
}

// jsonField is a decoding error's path to a field as the client wrote it:
// encoding/json names the embedded struct the field came through
// ("Params.temperature"), which the client never saw.
func jsonField(path string) string {
	return strings.ReplaceAll(path, "Params.", "")
}

func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	return "an object"
}

// Malformed is the refusal of a body that is not JSON.
func Malformed(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return genq.Errorf(genq.Invalid, "request body is not valid JSON: unexpected end of input")
	}
	return genq.Errorf(genq.Invalid, "request body is not valid JSON: %s", jsonMessage(err))
}

// jsonMessage keeps the decoder's description of a syntax error, which names
// the offending character, and nothing else.
func jsonMessage(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("%s (at byte %d)", syn.Error(), syn.Offset)
	}
	return err.Error()
}
