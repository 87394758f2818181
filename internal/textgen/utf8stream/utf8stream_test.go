package utf8stream

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStreamHoldsBackIncompleteCharacters(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   []string // what each Write returns
		flush  string
	}{
		{"ascii passes through", []string{"he", "llo"}, []string{"he", "llo"}, ""},
		{"two-byte char split", []string{"caf\xc3", "\xa9!"}, []string{"caf", "é!"}, ""},
		{"three-byte char over three tokens", []string{"\xe2", "\x82", "\xac"}, []string{"", "", "€"}, ""},
		{"four-byte emoji split 1+3", []string{"\xf0", "\x9f\x98\x80x"}, []string{"", "😀x"}, ""},
		{"four-byte emoji split 3+1", []string{"a\xf0\x9f\x98", "\x80"}, []string{"a", "😀"}, ""},
		{"stray continuation byte is replaced at once", []string{"a\x80b"}, []string{"a\uFFFDb"}, ""},
		{"invalid start byte is replaced at once", []string{"\xffz"}, []string{"\uFFFDz"}, ""},
		{"interrupted character is replaced", []string{"\xe2\x82", "A"}, []string{"", "\uFFFDA"}, ""},
		{"incomplete tail at the end becomes U+FFFD", []string{"ok\xe2\x82"}, []string{"ok"}, "\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Stream
			var all strings.Builder
			for i, p := range tt.pieces {
				got := s.Write(p)
				if got != tt.want[i] {
					t.Fatalf("Write(%q) = %q, want %q", p, got, tt.want[i])
				}
				if !utf8.ValidString(got) {
					t.Fatalf("Write(%q) returned invalid UTF-8 %q", p, got)
				}
				all.WriteString(got)
			}
			if got := s.Flush(); got != tt.flush {
				t.Fatalf("Flush() = %q, want %q", got, tt.flush)
			}
		})
	}
}

// TestStreamAnySplit cuts valid text at every byte boundary: the joined
// output must be the input, whatever the split.
func TestStreamAnySplit(t *testing.T) {
	text := "añb€c😀d"
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			var s Stream
			got := s.Write(text[:i]) + s.Write(text[i:j]) + s.Write(text[j:]) + s.Flush()
			if got != text {
				t.Fatalf("split at %d,%d: got %q, want %q", i, j, got, text)
			}
		}
	}
}

// FuzzStream: whatever the bytes and wherever tokens cut them, the output is
// valid UTF-8, and valid input comes back unchanged.
// TestWriteAtPlacesPieces: where each token's piece starts in the text,
// with the bytes an earlier piece held back coming out before it.
func TestWriteAtPlacesPieces(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		starts []int // absolute, in the whole output
		out    string
	}{
		{"ASCII", []string{"ab", "c"}, []int{0, 2}, "abc"},
		{"a piece inside a character starts at the character", []string{"a\xe2\x82", "\xacb"}, []int{0, 1}, "a€b"},
		{"a held byte alone waits", []string{"x", "\xe2", "\x82\xac"}, []int{0, 1, 1}, "x€"},
		{"held bytes that fail come out first", []string{"\x05\xe2", "3"}, []int{0, 4}, "\x05\uFFFD3"},
		{"an invalid run with the next piece's bytes is one character", []string{"\xe2", "\xff3"}, []int{0, 0}, "\uFFFD3"},
		{"a valid U+FFFD is a character", []string{"\uFFFD", "a"}, []int{0, 3}, "\uFFFDa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Stream
			out := ""
			for i, piece := range tt.pieces {
				text, start := s.WriteAt(piece)
				if got := len(out) + start; got != tt.starts[i] {
					t.Errorf("piece %d (%q) starts at %d, want %d", i, piece, got, tt.starts[i])
				}
				out += text
			}
			if out += s.Flush(); out != tt.out {
				t.Fatalf("output %q, want %q", out, tt.out)
			}
		})
	}
}

func FuzzStream(f *testing.F) {
	f.Add([]byte("añb€c😀d"), uint8(3), uint8(5))
	f.Add([]byte("\xff\xe2\x82"), uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, cut1, cut2 uint8) {
		i := min(int(cut1), len(in))
		j := min(max(i, int(cut2)), len(in))
		var s Stream
		out := ""
		for _, at := range [][2]int{{0, i}, {i, j}, {j, len(in)}} {
			piece := in[at[0]:at[1]]
			text, start := s.WriteAt(string(piece))
			if start < 0 || start > len(text) || start < len(text) && !utf8.RuneStart(text[start]) {
				t.Fatalf("piece %q of %q: start %d in %q", piece, in, start, text)
			}
			// Valid input comes out byte for byte: a piece that starts a
			// character starts where it was.
			if utf8.Valid(in) && len(piece) > 0 && utf8.RuneStart(piece[0]) && len(out)+start != at[0] {
				t.Fatalf("piece %q of valid %q placed at %d, not %d", piece, in, len(out)+start, at[0])
			}
			out += text
		}
		out += s.Flush()
		if !utf8.ValidString(out) {
			t.Fatalf("invalid output %q from %q", out, in)
		}
		if utf8.Valid(in) && out != string(in) {
			t.Fatalf("valid input %q came back as %q", in, out)
		}
	})
}
