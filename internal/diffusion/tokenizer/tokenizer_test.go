package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A hand-made CLIP vocabulary; expected ids below were worked out by hand
// from the merge ranks.
func handCLIP(t *testing.T, pad string) *CLIP {
	t.Helper()
	vocab := map[string]int{
		"a": 0, "c": 1, "t": 2, "a</w>": 3, "t</w>": 4, "ca": 5, "cat</w>": 6,
		"!": 7, "!</w>": 8, CLIPStart: 9, CLIPEnd: 10, "at</w>": 11, "s</w>": 12,
	}
	merges := [][2]string{{"c", "a"}, {"ca", "t</w>"}, {"a", "t</w>"}}
	c, err := NewCLIP(vocab, merges, pad)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCLIPTokens(t *testing.T) {
	c := handCLIP(t, CLIPEnd)
	tests := []struct {
		text string
		want []int
	}{
		{"cat", []int{6}},            // c a → ca (rank 0), ca t</w> → cat</w> (rank 1)
		{"at", []int{11}},            // a t</w> (rank 2)
		{"Cat!", []int{6, 8}},        // lower-cased; "!" is its own word
		{"a", []int{3}},              // a single letter still ends the word
		{"cats", []int{5, 2, 12}},    // ca t s</w>: "ca t" is no merge, only "ca t</w>" is
		{"  CAT \n a ", []int{6, 3}}, // whitespace collapsed
		{"x", []int{10}},             // not in vocabulary: the end token stands in
		{"", nil},
	}
	for _, tt := range tests {
		if got := c.Tokens(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("Tokens(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

func TestCLIPEncodePadsAndTruncates(t *testing.T) {
	tests := []struct {
		pad    string
		text   string
		length int
		want   []int64
	}{
		{CLIPEnd, "cat", 5, []int64{9, 6, 10, 10, 10}}, // CLIP-L pads with its end token
		{"!", "cat", 5, []int64{9, 6, 10, 7, 7}},       // SD3's CLIP-G pads with "!"
		{"!", "cat cat cat", 4, []int64{9, 6, 6, 10}},  // cut to fit, end token kept
		{CLIPEnd, "", 3, []int64{9, 10, 10}},
	}
	for _, tt := range tests {
		c := handCLIP(t, tt.pad)
		if got := c.Encode(tt.text, tt.length); !slices.Equal(got, tt.want) {
			t.Errorf("pad %q: Encode(%q, %d) = %v, want %v", tt.pad, tt.text, tt.length, got, tt.want)
		}
	}
}

func TestLoadCLIPReadsFilesAndPadToken(t *testing.T) {
	dir := t.TempDir()
	vocab := map[string]int{"c": 0, "a": 1, "t</w>": 2, "ca": 3, "cat</w>": 4, "!": 5, CLIPStart: 6, CLIPEnd: 7}
	writeJSON(t, filepath.Join(dir, "vocab.json"), vocab)
	writeFile(t, filepath.Join(dir, "merges.txt"), "#version: 0.2\nc a\nca t</w>\n")
	writeJSON(t, filepath.Join(dir, "special_tokens_map.json"), map[string]any{
		"pad_token": map[string]any{"content": "!", "lstrip": false},
	})
	c, err := LoadCLIP(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Encode("cat", 4), []int64{6, 4, 7, 5}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

func TestByteSymbolsOrder(t *testing.T) {
	syms := ByteSymbols()
	if len(syms) != 256 {
		t.Fatalf("%d symbols, want 256", len(syms))
	}
	// CLIP's vocabulary starts with "!" (id 0) and its space stand-in is Ġ.
	if syms[0] != "!" || syms[93] != "~" || !slices.Contains(syms, "Ġ") {
		t.Errorf("unexpected order: %q … %q", syms[0], syms[93])
	}
}

// A hand-made unigram vocabulary; the best segmentations below were summed
// by hand.
func handPieces() []Piece {
	return []Piece{
		{"<pad>", 0, true}, {"</s>", 0, true}, {"<unk>", 0, true},
		{"▁", -2, false}, {"▁c", -3, false}, {"at", -1.5, false}, {"▁cat", -4, false},
		{"a", -2, false}, {"t", -2, false}, {"c", -2, false}, {"▁ca", -2.5, false}, {"s", -3, false},
	}
}

func TestT5Tokens(t *testing.T) {
	tok, err := NewT5(handPieces(), 2)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want []int
	}{
		{"cat", []int{6}},         // ▁cat -4 beats ▁ca+t -4.5 and ▁c+at -4.5
		{"cats", []int{6, 11}},    // ▁cat+s -7 beats ▁ca+t+s -7.5
		{"a cat", []int{3, 7, 6}}, // "▁a" is no piece: ▁ + a
		{"cxx", []int{4, 2}},      // ▁c, then two unknown x (each -4-10) merged into one <unk>
		{" cat  ", []int{6}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := tok.Tokens(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("Tokens(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
	if got, want := tok.Encode("cat", 4), []int64{6, 1, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("Encode pads with <pad> after </s>: got %v, want %v", got, want)
	}
	if got, want := tok.Encode("cats cats", 3), []int64{6, 11, 1}; !slices.Equal(got, want) {
		t.Errorf("Encode truncates before </s>: got %v, want %v", got, want)
	}
}

func TestLoadT5FromEitherFile(t *testing.T) {
	pieces := handPieces()
	jsonDir, spDir := t.TempDir(), t.TempDir()

	var vocab [][]any
	for _, p := range pieces {
		vocab = append(vocab, []any{p.Text, p.Score})
	}
	writeJSON(t, filepath.Join(jsonDir, "tokenizer.json"), map[string]any{
		"added_tokens": []map[string]any{{"id": 0, "content": "<pad>", "special": true}, {"id": 1, "content": "</s>", "special": true}, {"id": 2, "content": "<unk>", "special": true}},
		"model":        map[string]any{"type": "Unigram", "unk_id": 2, "vocab": vocab},
	})
	writeFile(t, filepath.Join(spDir, "spiece.model"), string(MarshalSentencePiece(pieces, 2)))

	for _, dir := range []string{jsonDir, spDir} {
		tok, err := LoadT5(dir)
		if err != nil {
			t.Fatalf("LoadT5(%s): %v", dir, err)
		}
		if got, want := tok.Encode("a cats cxx", 8), []int64{3, 7, 6, 11, 4, 2, 1, 0}; !slices.Equal(got, want) {
			t.Errorf("%s: Encode = %v, want %v", dir, got, want)
		}
	}
	if _, err := LoadT5(t.TempDir()); err == nil || !strings.Contains(err.Error(), "spiece.model") {
		t.Errorf("empty dir: got %v, want an error naming the files", err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Cluster lengths worked out by hand from UAX #29's rules.
func TestGraphemeLen(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"ab", 1},
		{"e\u0301x", 3},       // base + combining acute
		{"o\u0308\u0304x", 5}, // two marks
		{"\r\nx", 2},          // CR LF is one cluster
		{"\n\u0301", 1},       // nothing extends a control
		{"👍🏽x", 8},            // skin-tone modifier extends
		{"👨\u200d👩x", 11},     // emoji ZWJ emoji
		{"a\u200d👩", 4},       // ZWJ extends a, but a is no emoji: 👩 starts anew
		{"\u0600a", 3},        // a prepended mark joins what follows
		{"\u0915\u093f", 6},   // Devanagari spacing vowel sign
		{"🇯🇵", 4},             // regional indicators: pairs are left out (8 bytes, looked up per character anyway)
		{"\u1100\u1161", 3},   // Hangul jamo sequences are left out too (6 bytes)
	}
	for _, tt := range tests {
		if got := graphemeLen(tt.s); got != tt.want {
			t.Errorf("graphemeLen(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}
