// Package tokenizer turns prompts into the token ids the SD3 text encoders
// take: CLIP's byte-level BPE (vocab.json + merges.txt) and T5's unigram
// model (tokenizer.json or spiece.model). It reads the files that diffusers
// exports keep in tokenizer/, tokenizer_2/ and tokenizer_3/.
package tokenizer

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// CLIP special tokens, as in every CLIP vocabulary.
const (
	CLIPStart = "<|startoftext|>"
	CLIPEnd   = "<|endoftext|>"
	// CLIPWordEnd marks the last symbol of a word in CLIP's vocabulary.
	CLIPWordEnd = "</w>"
)

// clipPattern is CLIP's pre-tokenizer: specials, English contractions,
// letter runs, single digits, and runs of other non-space symbols.
var clipPattern = regexp.MustCompile(`<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+`)

var whitespace = regexp.MustCompile(`\s+`)

// CLIP is a CLIP BPE tokenizer. It is safe for concurrent use.
type CLIP struct {
	vocab map[string]int
	ranks map[[2]string]int
	start int
	end   int
	pad   int
}

// LoadCLIP reads vocab.json and merges.txt from dir, and the pad token from
// special_tokens_map.json or tokenizer_config.json (CLIP-L pads with
// <|endoftext|>, SD3's CLIP-G with "!").
func LoadCLIP(dir string) (*CLIP, error) {
	var vocab map[string]int
	if err := readJSON(filepath.Join(dir, "vocab.json"), &vocab); err != nil {
		return nil, err
	}
	merges, err := readMerges(filepath.Join(dir, "merges.txt"))
	if err != nil {
		return nil, err
	}
	pad, err := padToken(dir)
	if err != nil {
		return nil, err
	}
	if pad == "" {
		pad = CLIPEnd
	}
	return NewCLIP(vocab, merges, pad)
}

// NewCLIP builds a tokenizer from a vocabulary, merges in rank order, and
// the pad token's text.
func NewCLIP(vocab map[string]int, merges [][2]string, pad string) (*CLIP, error) {
	c := &CLIP{vocab: vocab, ranks: make(map[[2]string]int, len(merges))}
	for i, m := range merges {
		if _, seen := c.ranks[m]; !seen {
			c.ranks[m] = i
		}
	}
	for _, s := range []struct {
		tok string
		dst *int
	}{{CLIPStart, &c.start}, {CLIPEnd, &c.end}, {pad, &c.pad}} {
		id, ok := vocab[s.tok]
		if !ok {
			return nil, fmt.Errorf("clip vocabulary has no %q token", s.tok)
		}
		*s.dst = id
	}
	return c, nil
}

// PadID is the id that fills a sequence after its end token.
func (c *CLIP) PadID() int { return c.pad }

// Tokens splits text into BPE token ids, without start, end or padding.
func (c *CLIP) Tokens(text string) []int {
	text = strings.ToLower(strings.TrimSpace(whitespace.ReplaceAllString(norm.NFC.String(text), " ")))
	var ids []int
	for _, word := range clipPattern.FindAllString(text, -1) {
		if id, ok := c.vocab[word]; ok && (word == CLIPStart || word == CLIPEnd) {
			ids = append(ids, id)
			continue
		}
		for _, sym := range c.bpe(byteLevel(word)) {
			id, ok := c.vocab[sym]
			if !ok {
				// A real CLIP vocabulary holds every byte symbol, so this only
				// happens with a partial vocabulary; CLIP's unknown is its end token.
				id = c.end
			}
			ids = append(ids, id)
		}
	}
	return ids
}

// Encode returns exactly length ids: start, as many tokens as fit, end,
// then padding — what CLIP's text encoders take (length 77).
func (c *CLIP) Encode(text string, length int) []int64 {
	if length < 2 {
		length = 2
	}
	toks := c.Tokens(text)
	if len(toks) > length-2 {
		toks = toks[:length-2]
	}
	out := make([]int64, 0, length)
	out = append(out, int64(c.start))
	for _, t := range toks {
		out = append(out, int64(t))
	}
	out = append(out, int64(c.end))
	for len(out) < length {
		out = append(out, int64(c.pad))
	}
	return out
}

// bpe merges the symbols of one word, lowest rank first, until no pair of
// neighbours has a merge. The last symbol carries the word-end mark.
func (c *CLIP) bpe(word []string) []string {
	if len(word) == 0 {
		return nil
	}
	word[len(word)-1] += CLIPWordEnd
	for len(word) > 1 {
		best, bestRank := -1, int(^uint(0)>>1)
		for i := 0; i+1 < len(word); i++ {
			if r, ok := c.ranks[[2]string{word[i], word[i+1]}]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		pair := [2]string{word[best], word[best+1]}
		merged := word[:0:0]
		for i := 0; i < len(word); i++ {
			if i+1 < len(word) && word[i] == pair[0] && word[i+1] == pair[1] {
				merged = append(merged, pair[0]+pair[1])
				i++
				continue
			}
			merged = append(merged, word[i])
		}
		word = merged
	}
	return word
}

// byteLevel maps each byte of s to its printable stand-in symbol.
func byteLevel(s string) []string {
	out := make([]string, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, string(byteToRune[s[i]]))
	}
	return out
}

// byteToRune is GPT-2's bytes_to_unicode table: printable bytes stand for
// themselves, the others are moved to U+0100 and up, so every byte has a
// visible, whitespace-free symbol.
var byteToRune = func() [256]rune {
	var table [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xa1 <= b && b <= 0xac) || (0xae <= b && b <= 0xff) {
			table[b] = rune(b)
		} else {
			table[b] = rune(256 + n)
			n++
		}
	}
	return table
}()

// ByteSymbols lists the 256 byte symbols in CLIP's vocabulary order (the
// printable ones first), which puts "!" at id 0.
func ByteSymbols() []string {
	var out []string
	for _, printable := range []bool{true, false} {
		for b := 0; b < 256; b++ {
			if (byteToRune[b] == rune(b)) == printable {
				out = append(out, string(byteToRune[b]))
			}
		}
	}
	return out
}

func readMerges(path string) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("clip merges: %w", err)
	}
	defer f.Close()
	var merges [][2]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(text, "#version") || text == "" {
			continue
		}
		a, b, ok := strings.Cut(text, " ")
		if !ok {
			return nil, fmt.Errorf("clip merges %s:%d: want two symbols, got %q", path, line, text)
		}
		merges = append(merges, [2]string{a, b})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("clip merges %s: %w", path, err)
	}
	return merges, nil
}

// padToken reads the pad token's text from the tokenizer's config files; ""
// means none is named. The value is a string or an AddedToken object.
func padToken(dir string) (string, error) {
	for _, name := range []string{"special_tokens_map.json", "tokenizer_config.json"} {
		var cfg struct {
			Pad json.RawMessage `json:"pad_token"`
		}
		err := readJSON(filepath.Join(dir, name), &cfg)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if len(cfg.Pad) == 0 || string(cfg.Pad) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(cfg.Pad, &s) == nil {
			return s, nil
		}
		var obj struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(cfg.Pad, &obj); err != nil {
			return "", fmt.Errorf("%s: pad_token: %w", filepath.Join(dir, name), err)
		}
		return obj.Content, nil
	}
	return "", nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
