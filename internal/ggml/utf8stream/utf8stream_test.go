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
func FuzzStream(f *testing.F) {
	f.Add([]byte("añb€c😀d"), uint8(3), uint8(5))
	f.Add([]byte("\xff\xe2\x82"), uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, cut1, cut2 uint8) {
		i := min(int(cut1), len(in))
		j := min(max(i, int(cut2)), len(in))
		var s Stream
		out := s.Write(string(in[:i])) + s.Write(string(in[i:j])) + s.Write(string(in[j:])) + s.Flush()
		if !utf8.ValidString(out) {
			t.Fatalf("invalid output %q from %q", out, in)
		}
		if utf8.Valid(in) && out != string(in) {
			t.Fatalf("valid input %q came back as %q", in, out)
		}
	})
}
