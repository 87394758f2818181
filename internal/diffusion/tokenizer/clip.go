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
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// CLIP special tokens, as in every CLIP vocabulary.
const (
	CLIPStart = "<|startoftext|>"
	CLIPEnd   = "<|endoftext|>"
	// CLIPWordEnd marks the last symbol of a word in CLIP's vocabulary.
	CLIPWordEnd = "</w>"
)

// spaceClass is what Oniguruma's \s matches in Hugging Face's tokenizers
// (Unicode White_Space: \v, U+0085, no-break and ideographic spaces, line
// separators…); Go's \s is ASCII only and would leave those in the text.
const spaceClass = `\t\n\v\f\r\x{85}\p{Z}`

// clipPattern is CLIP's pre-tokenizer: specials, English contractions,
// letter runs, single digits, and runs of other non-space symbols. The
// specials are only spelled out so that they stay one word: an added token
// is found before this runs (see splitAdded), and a special that gets here
// (<|ENDOFTEXT|>, lower-cased) is byte-pair encoded like any word, as in the
// reference.
var clipPattern = regexp.MustCompile(`<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^` + spaceClass + `\p{L}\p{N}]+`)

var whitespace = regexp.MustCompile(`[` + spaceClass + `]+`)

// addedToken is a special token that is matched in the prompt's text before
// the model runs: on the raw text, or (normalized) after normalization.
type addedToken struct {
	content    string
	id         int
	normalized bool
}

// CLIP is a CLIP BPE tokenizer. It is safe for concurrent use.
type CLIP struct {
	vocab map[string]int
	ranks map[[2]string]int
	added []addedToken
	start int
	end   int
	pad   int
}

// LoadCLIP reads tokenizer.json (Hugging Face's fast tokenizer) from dir,
// or vocab.json and merges.txt when there is none, and the pad token from
// special_tokens_map.json or tokenizer_config.json (CLIP-L pads with
// <|endoftext|>, SD3's CLIP-G with "!").
func LoadCLIP(dir string) (*CLIP, error) {
	vocab, merges, added, err := readBPEJSON(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, fs.ErrNotExist) {
		if err = readJSON(filepath.Join(dir, "vocab.json"), &vocab); err != nil {
			return nil, fmt.Errorf("clip tokenizer: %s has neither tokenizer.json nor a readable vocab.json: %w", dir, err)
		}
		merges, err = readMerges(filepath.Join(dir, "merges.txt"))
	}
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
	c, err := NewCLIP(vocab, merges, pad)
	if err != nil {
		return nil, err
	}
	if added != nil {
		c.added = added
	}
	return c, nil
}

// readBPEJSON reads the model and added tokens of a tokenizer.json whose
// model is CLIP's: BPE with "</w>" ending each word. Merges are "a b"
// strings in older files and [a, b] pairs in newer ones.
func readBPEJSON(path string) (map[string]int, [][2]string, []addedToken, error) {
	var doc struct {
		AddedTokens []struct {
			ID         int    `json:"id"`
			Content    string `json:"content"`
			Normalized bool   `json:"normalized"`
		} `json:"added_tokens"`
		Model struct {
			Type      string            `json:"type"`
			EndOfWord *string           `json:"end_of_word_suffix"`
			Vocab     map[string]int    `json:"vocab"`
			Merges    []json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := readJSON(path, &doc); err != nil {
		return nil, nil, nil, err
	}
	if doc.Model.Type != "BPE" || doc.Model.EndOfWord == nil || *doc.Model.EndOfWord != CLIPWordEnd {
		return nil, nil, nil, fmt.Errorf("%s: model is not CLIP's (want type BPE with end_of_word_suffix %q)", path, CLIPWordEnd)
	}
	merges := make([][2]string, len(doc.Model.Merges))
	for i, raw := range doc.Model.Merges {
		var pair []string
		var s string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, nil, nil, fmt.Errorf("%s: merge %d: want two symbols, got %q", path, i, s)
			}
			merges[i] = [2]string{a, b}
		case json.Unmarshal(raw, &pair) == nil && len(pair) == 2:
			merges[i] = [2]string{pair[0], pair[1]}
		default:
			return nil, nil, nil, fmt.Errorf("%s: merge %d is neither \"a b\" nor [a, b]: %s", path, i, raw)
		}
	}
	added := make([]addedToken, 0, len(doc.AddedTokens))
	for _, a := range doc.AddedTokens {
		added = append(added, addedToken{content: a.Content, id: a.ID, normalized: a.Normalized})
	}
	return doc.Model.Vocab, merges, added, nil
}

// NewCLIP builds a tokenizer from a vocabulary, merges in rank order, and
// the pad token's text. Its special tokens are matched as CLIP's
// tokenizer.json says: <|startoftext|> after normalization, <|endoftext|>
// in the raw text only.
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
	c.added = []addedToken{{CLIPStart, c.start, true}, {CLIPEnd, c.end, false}}
	return c, nil
}

// PadID is the id that fills a sequence after its end token.
func (c *CLIP) PadID() int { return c.pad }

// Tokens splits text into BPE token ids, without start, end or padding.
// The steps are those of Hugging Face's tokenizer: added tokens found in
// the raw text, normalization (NFC, whitespace runs to one space, lower
// case), added tokens found in the normalized text, CLIP's pre-tokenizer
// pattern, byte-level symbols, BPE.
func (c *CLIP) Tokens(text string) []int {
	var ids []int
	for _, raw := range splitAdded(text, c.added, false) {
		if raw.id >= 0 {
			ids = append(ids, raw.id)
			continue
		}
		normalized := lowercase(whitespace.ReplaceAllString(norm.NFC.String(raw.text), " "))
		for _, part := range splitAdded(normalized, c.added, true) {
			if part.id >= 0 {
				ids = append(ids, part.id)
				continue
			}
			for _, word := range clipPattern.FindAllString(part.text, -1) {
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
		}
	}
	return ids
}

// piece is a stretch of text, or an added token's id (text empty).
type piece struct {
	text string
	id   int // -1 for text
}

// splitAdded cuts text around the added tokens whose normalized flag is
// normalized, leftmost first and the longest of those starting there.
func splitAdded(text string, added []addedToken, normalized bool) []piece {
	var out []piece
	for text != "" {
		at, best := -1, -1
		for i, a := range added {
			if a.normalized != normalized || a.content == "" {
				continue
			}
			j := strings.Index(text, a.content)
			if j >= 0 && (at < 0 || j < at || j == at && len(a.content) > len(added[best].content)) {
				at, best = j, i
			}
		}
		if at < 0 {
			break
		}
		if at > 0 {
			out = append(out, piece{text[:at], -1})
		}
		out = append(out, piece{"", added[best].id})
		text = text[at+len(added[best].content):]
	}
	if text != "" {
		out = append(out, piece{text, -1})
	}
	return out
}

// lowercase lower-cases each character on its own, as Rust's
// char::to_lowercase does in Hugging Face's Lowercase normalizer: İ becomes
// i and a combining dot (Go's unicode.ToLower drops the dot), and Σ is
// always σ (no final-sigma rule).
func lowercase(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == 'İ' {
			b.WriteString("i\u0307")
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
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
