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
	out, _ := s.WriteAt(piece)
	return out
}

// WriteAt is Write, and also says where in the stream's output the piece
// starts: at start bytes into the returned text is the character that holds
// the piece's first byte (bytes held back from an earlier piece come out
// before it, whole or as U+FFFD), and start is len(text) when that byte is
// held back itself, to come out next.
func (s *Stream) WriteAt(piece string) (text string, start int) {
	held := len(s.pending)
	s.pending = append(s.pending, piece...)
	cut := len(s.pending) - incompleteSuffix(s.pending)
	text = strings.ToValidUTF8(string(s.pending[:cut]), "\uFFFD")
	start = len(text)
	if held < cut {
		start = outputOffset(s.pending[:cut], held)
	}
	s.pending = append(s.pending[:0], s.pending[cut:]...)
	return text, start
}

// outputOffset walks in as strings.ToValidUTF8 does (each run of invalid
// bytes becomes one U+FFFD) and returns where, in its output, the character
// or run holding in[at] starts.
func outputOffset(in []byte, at int) int {
	out := 0
	for i := 0; i < len(in); {
		r, size := utf8.DecodeRune(in[i:])
		if r != utf8.RuneError || size > 1 {
			if at < i+size {
				return out
			}
			i += size
			out += size
			continue
		}
		// A run of invalid bytes: one replacement.
		for i < len(in) {
			if r, size := utf8.DecodeRune(in[i:]); r != utf8.RuneError || size > 1 {
				break
			}
			i++
		}
		if at < i {
			return out
		}
		out += len("\uFFFD")
	}
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
