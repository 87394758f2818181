// Package utf8stream turns the raw bytes of decoded tokens into valid UTF-8.
package utf8stream

import (
	"strings"
	"unicode/utf8"
)

// Stream turns the raw bytes of decoded tokens into valid UTF-8. A byte-
// level BPE token can end in the middle of a character, so the incomplete
// tail is held back until the next token completes it; bytes that can never
// become valid become U+FFFD, the way Hugging Face decodes with
// errors="replace".
type Stream struct {
	pending []byte
}

// Write adds the bytes of one token and returns the text that is now final.
func (s *Stream) Write(piece string) string {
	s.pending = append(s.pending, piece...)
	cut := len(s.pending) - incompleteSuffix(s.pending)
	out := strings.ToValidUTF8(string(s.pending[:cut]), "\uFFFD")
	s.pending = append(s.pending[:0], s.pending[cut:]...)
	return out
}

// Flush ends the stream: bytes still held back never became a character.
func (s *Stream) Flush() string {
	if len(s.pending) == 0 {
		return ""
	}
	s.pending = s.pending[:0]
	return "\uFFFD"
}

// incompleteSuffix is the length of the tail of b that starts a multi-byte
// character whose remaining bytes have not arrived yet.
func incompleteSuffix(b []byte) int {
	// A character is at most 4 bytes, so only the last 3 can be waiting.
	for n := 1; n <= 3 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c < 0x80 {
			return 0 // ASCII: nothing after it is part of an earlier character
		}
		if !utf8.RuneStart(c) {
			continue // a continuation byte: look further back for its start
		}
		var need int
		switch {
		case c&0xE0 == 0xC0:
			need = 2
		case c&0xF0 == 0xE0:
			need = 3
		case c&0xF8 == 0xF0:
			need = 4
		default:
			return 0 // not a valid start byte: it will become U+FFFD now
		}
		if n < need && !utf8.FullRune(b[len(b)-n:]) {
			return n
		}
		return 0
	}
	return 0
}
