package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// requestBody reads the request's body, or answers the error in render's
// shape. A body over the limit is read on and dropped first, so that a
// client that writes its whole body before reading gets the 413, not a
// connection reset.
func (s *Server) requestBody(w http.ResponseWriter, r *http.Request, render errorRenderer) ([]byte, bool) {
	return s.requestBodyOf(w, r, render, s.cfg.MaxBodyBytes)
}

// v1RequestBody is requestBody on OpenAI's routes, under their limit.
func (s *Server) v1RequestBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	return s.requestBodyOf(w, r, writeV1Error, cmp.Or(s.cfg.MaxV1BodyBytes, s.cfg.MaxBodyBytes))
}

func (s *Server) requestBodyOf(w http.ResponseWriter, r *http.Request, render errorRenderer, limit int64) ([]byte, bool) {
	body, err := readBody(w, r, limit)
	if err != nil {
		if genq.ErrorCode(err) == genq.TooLarge {
			discardBody(w, r)
		}
		s.rejectAs(w, err, render)
		return nil, false
	}
	return body, true
}

// readBody reads at most limit bytes of the request body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	// A declared length over the limit is refused before a byte is read.
	if r.ContentLength > limit {
		return nil, genq.Errorf(genq.TooLarge, "request body is over the limit of %d bytes", limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, genq.Errorf(genq.TooLarge, "request body is over the limit of %d bytes", limit)
	case err != nil:
		return nil, genq.WrapError(genq.Invalid, err, "request body could not be read")
	}
	return body, nil
}

// maxDiscard bounds how much of a refused body the api reads only to throw
// away. The server's read timeout bounds the time it may take.
const maxDiscard = 16 << 20

// discardBody reads and drops what the client still has to send of a body
// the api refuses, and asks for the connection to close after the answer.
// A client that writes its whole body before reading (Python's urllib, for
// one) otherwise never sees the answer: net/http reads at most 256 KiB of
// an unread body, and closing a socket with unread bytes makes the kernel
// send a reset in place of the answer. A client that sent
// "Expect: 100-continue" is waiting for permission to send and gets none,
// so there is nothing to read; a body declared over the cap is not worth
// reading.
func discardBody(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if r.Body == nil || r.ContentLength == 0 || r.ContentLength > maxDiscard ||
		strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, maxDiscard)
}

// decodePrompt checks a /generate body and returns its text. The body must
// be one JSON object; of its fields only text is used, and it must be a
// non-empty string of at most maxPrompt bytes.
func decodePrompt(body []byte, maxPrompt int) (string, error) {
	if !utf8.Valid(body) {
		return "", genq.Errorf(genq.Invalid, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return "", openai.Malformed(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return "", genq.Errorf(genq.Invalid, "request body must be a JSON object")
	}
	var text json.RawMessage
	seen := false
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return "", openai.Malformed(err)
		}
		key, _ := keyTok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return "", openai.Malformed(err)
		}
		if key != "text" {
			continue
		}
		// Two texts are ambiguous: parsers disagree on which one wins.
		if seen {
			return "", genq.Errorf(genq.Invalid, `field "text" appears more than once`)
		}
		seen, text = true, value
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return "", openai.Malformed(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", genq.Errorf(genq.Invalid, "request body has data after the JSON object")
	}
	return promptOf(text, maxPrompt)
}

func promptOf(raw json.RawMessage, maxPrompt int) (string, error) {
	var text string // a missing or null text is as empty
	if len(raw) != 0 && string(raw) != "null" {
		if raw[0] != '"' {
			return "", genq.Errorf(genq.Invalid, "text must be a string, not %s", jsonKind(raw[0]))
		}
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", openai.Malformed(err)
		}
	}
	if err := genq.ValidateText(text); err != nil {
		return "", err
	}
	switch {
	case len(text) > maxPrompt:
		return "", genq.Errorf(genq.Invalid, "text is %d bytes long; the limit is %d", len(text), maxPrompt)
	case strings.ContainsRune(text, 0):
		return "", genq.Errorf(genq.Invalid, "text must not contain NUL characters")
	}
	return text, nil
}

func jsonKind(first byte) string {
	switch first {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
