package tokenizer

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"google.golang.org/protobuf/encoding/protowire"
)

// Metaspace is the symbol SentencePiece puts where a space was.
const Metaspace = "▁"

// unkPenalty is how much worse than the worst piece an unknown character
// scores, as in SentencePiece and Hugging Face's Unigram model.
const unkPenalty = 10

// Piece is one entry of a unigram vocabulary; its id is its index.
type Piece struct {
	Text  string
	Score float64
	// Special pieces (pad, end, unknown, control) never match prompt text.
	Special bool
}

// T5 is a SentencePiece unigram tokenizer as T5 uses it. It is safe for
// concurrent use.
type T5 struct {
	pieces   map[string]int
	added    []addedToken
	charsmap *precompiled // nil: NFKC
	scores   []float64
	maxRunes int
	unkScore float64
	unk      int
	eos      int
	pad      int
}

// LoadT5 reads tokenizer.json (Hugging Face, model type Unigram) from dir,
// or spiece.model (SentencePiece) when there is no tokenizer.json. The
// normalization map compiled into either (T5's nmt_nfkc) is applied as
// Hugging Face's tokenizer applies it; a file without one gets NFKC.
func LoadT5(dir string) (*T5, error) {
	pieces, unk, charsmap, err := readUnigramJSON(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, fs.ErrNotExist) {
		pieces, unk, charsmap, err = readSentencePiece(filepath.Join(dir, "spiece.model"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("t5 tokenizer: %s has neither tokenizer.json nor spiece.model", dir)
		}
	}
	if err != nil {
		return nil, err
	}
	t, err := NewT5(pieces, unk)
	if err != nil {
		return nil, err
	}
	if len(charsmap) > 0 {
		if t.charsmap, err = parsePrecompiled(charsmap); err != nil {
			return nil, fmt.Errorf("t5 tokenizer %s: %w", dir, err)
		}
	}
	return t, nil
}

// NewT5 builds a tokenizer from its pieces and the id of its unknown piece.
// The end and pad ids are those of "</s>" and "<pad>".
func NewT5(pieces []Piece, unk int) (*T5, error) {
	if unk < 0 || unk >= len(pieces) {
		return nil, fmt.Errorf("t5 tokenizer: unknown id %d out of range", unk)
	}
	t := &T5{pieces: make(map[string]int, len(pieces)), scores: make([]float64, len(pieces)), unk: unk, eos: -1, pad: -1}
	minScore := math.Inf(1)
	for id, p := range pieces {
		t.scores[id] = p.Score
		switch p.Text {
		case "</s>":
			t.eos = id
		case "<pad>":
			t.pad = id
		}
		// Special pieces are found in the raw prompt, before normalization,
		// as tokenizer.json's added tokens; like Hugging Face's Unigram model,
		// the segmentation may still use every piece.
		if p.Special {
			t.added = append(t.added, addedToken{content: p.Text, id: id})
		}
		if _, dup := t.pieces[p.Text]; !dup {
			t.pieces[p.Text] = id
		}
		t.maxRunes = max(t.maxRunes, utf8.RuneCountInString(p.Text))
		minScore = min(minScore, p.Score)
	}
	if t.eos < 0 || t.pad < 0 {
		return nil, errors.New(`t5 tokenizer: vocabulary lacks "</s>" or "<pad>"`)
	}
	t.unkScore = minScore - unkPenalty
	return t, nil
}

// Tokens splits text into piece ids, without the end token. The steps are
// those of T5's tokenizer.json in Hugging Face's library: special pieces
// found in the raw text, the normalization map, words split at whitespace,
// "▁" put before each word unless it starts with one, each word cut again
// before every "▁" inside it, then Viterbi over the pieces.
func (t *T5) Tokens(text string) []int {
	var ids []int
	for _, part := range splitAdded(text, t.added, false) {
		if part.id >= 0 {
			ids = append(ids, part.id)
			continue
		}
		var normalized string
		if t.charsmap != nil {
			normalized = t.charsmap.normalize(part.text)
		} else {
			normalized = norm.NFKC.String(part.text)
		}
		for _, word := range strings.FieldsFunc(normalized, unicode.IsSpace) {
			if !strings.HasPrefix(word, Metaspace) {
				word = Metaspace + word
			}
			for word != "" {
				n := strings.Index(word[len(Metaspace):], Metaspace)
				if n < 0 {
					n = len(word)
				} else {
					n += len(Metaspace)
				}
				ids = append(ids, t.viterbi([]rune(word[:n]))...)
				word = word[n:]
			}
		}
	}
	return ids
}

// Encode returns exactly length ids: tokens that fit, the end token, then
// padding — what T5's encoder takes in SD3 (length 256).
func (t *T5) Encode(text string, length int) []int64 {
	if length < 1 {
		length = 1
	}
	toks := t.Tokens(text)
	if len(toks) > length-1 {
		toks = toks[:length-1]
	}
	out := make([]int64, 0, length)
	for _, id := range toks {
		out = append(out, int64(id))
	}
	out = append(out, int64(t.eos))
	for len(out) < length {
		out = append(out, int64(t.pad))
	}
	return out
}

// viterbi finds the segmentation of word whose pieces' scores sum highest.
// A character no piece covers becomes the unknown piece, and unknowns in a
// row merge into one, as SentencePiece does.
func (t *T5) viterbi(word []rune) []int {
	n := len(word)
	best := make([]float64, n+1)
	from := make([]int, n+1) // start of the last piece ending here
	piece := make([]int, n+1)
	for i := 1; i <= n; i++ {
		best[i] = math.Inf(-1)
		for j := max(0, i-t.maxRunes); j < i; j++ {
			if math.IsInf(best[j], -1) {
				continue
			}
			id, ok := t.pieces[string(word[j:i])]
			if !ok {
				continue
			}
			if s := best[j] + t.scores[id]; s > best[i] {
				best[i], from[i], piece[i] = s, j, id
			}
		}
		if s := best[i-1] + t.unkScore; s > best[i] {
			best[i], from[i], piece[i] = s, i-1, t.unk
		}
	}
	var rev []int
	for i := n; i > 0; i = from[i] {
		if piece[i] == t.unk && len(rev) > 0 && rev[len(rev)-1] == t.unk {
			continue
		}
		rev = append(rev, piece[i])
	}
	for l, r := 0, len(rev)-1; l < r; l, r = l+1, r-1 {
		rev[l], rev[r] = rev[r], rev[l]
	}
	return rev
}

// readUnigramJSON reads a Hugging Face tokenizer.json of model type
// Unigram, and the precompiled charsmap of its normalizer if it has one.
func readUnigramJSON(path string) ([]Piece, int, []byte, error) {
	var doc struct {
		Normalizer  *normalizerJSON `json:"normalizer"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Special bool   `json:"special"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Type  string  `json:"type"`
			UnkID *int    `json:"unk_id"`
			Vocab [][]any `json:"vocab"`
		} `json:"model"`
	}
	if err := readJSON(path, &doc); err != nil {
		return nil, 0, nil, err
	}
	if doc.Model.Type != "Unigram" {
		return nil, 0, nil, fmt.Errorf("%s: model type %q, want Unigram", path, doc.Model.Type)
	}
	pieces := make([]Piece, len(doc.Model.Vocab))
	for i, entry := range doc.Model.Vocab {
		if len(entry) != 2 {
			return nil, 0, nil, fmt.Errorf("%s: vocab entry %d is not [piece, score]", path, i)
		}
		text, ok1 := entry[0].(string)
		score, ok2 := entry[1].(float64)
		if !ok1 || !ok2 {
			return nil, 0, nil, fmt.Errorf("%s: vocab entry %d is not [piece, score]", path, i)
		}
		pieces[i] = Piece{Text: text, Score: score}
	}
	for _, a := range doc.AddedTokens {
		if a.Special && a.ID >= 0 && a.ID < len(pieces) {
			pieces[a.ID].Special = true
		}
	}
	unk := 2 // T5's
	if doc.Model.UnkID != nil {
		unk = *doc.Model.UnkID
	}
	charsmap, err := doc.Normalizer.charsmap()
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%s: normalizer: %w", path, err)
	}
	return pieces, unk, charsmap, nil
}

// normalizerJSON is a tokenizer.json normalizer, as far as genq reads it:
// the precompiled charsmap, alone or in a Sequence.
type normalizerJSON struct {
	Type        string            `json:"type"`
	Charsmap    *string           `json:"precompiled_charsmap"`
	Normalizers []*normalizerJSON `json:"normalizers"`
}

func (n *normalizerJSON) charsmap() ([]byte, error) {
	if n == nil {
		return nil, nil
	}
	if n.Type == "Precompiled" && n.Charsmap != nil {
		return base64.StdEncoding.DecodeString(*n.Charsmap)
	}
	for _, inner := range n.Normalizers {
		if b, err := inner.charsmap(); b != nil || err != nil {
			return b, err
		}
	}
	return nil, nil
}

// SentencePiece piece types (sentencepiece_model.proto).
const (
	spNormal      = 1
	spUnknown     = 2
	spControl     = 3
	spUserDefined = 4
)

// readSentencePiece reads the pieces of a SentencePiece ModelProto
// (field 1, repeated SentencePiece{piece=1, score=2, type=3}) and the
// normalizer's precompiled charsmap (field 3, NormalizerSpec{2}).
func readSentencePiece(path string) ([]Piece, int, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, nil, err
	}
	var pieces []Piece
	var charsmap []byte
	unk := -1
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, nil, fmt.Errorf("%s: %w", path, protowire.ParseError(n))
		}
		b = b[n:]
		if (num != 1 && num != 3) || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, 0, nil, fmt.Errorf("%s: %w", path, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, 0, nil, fmt.Errorf("%s: %w", path, protowire.ParseError(n))
		}
		b = b[n:]
		if num == 3 {
			if charsmap, err = parseNormalizerSpec(msg); err != nil {
				return nil, 0, nil, fmt.Errorf("%s: normalizer_spec: %w", path, err)
			}
			continue
		}
		p, kind, err := parseSentencePiece(msg)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%s: piece %d: %w", path, len(pieces), err)
		}
		if kind == spUnknown {
			unk = len(pieces)
		}
		p.Special = kind != spNormal && kind != spUserDefined
		pieces = append(pieces, p)
	}
	if unk < 0 {
		return nil, 0, nil, fmt.Errorf("%s: no unknown piece", path)
	}
	return pieces, unk, charsmap, nil
}

// parseNormalizerSpec returns the precompiled_charsmap (field 2).
func parseNormalizerSpec(b []byte) ([]byte, error) {
	var charsmap []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			charsmap, n = append([]byte(nil), v...), m
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return charsmap, nil
}

func parseSentencePiece(b []byte) (Piece, int, error) {
	var p Piece
	kind := spNormal
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return p, 0, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			s, m := protowire.ConsumeString(b)
			p.Text, n = s, m
		case num == 2 && typ == protowire.Fixed32Type:
			v, m := protowire.ConsumeFixed32(b)
			p.Score, n = float64(math.Float32frombits(v)), m
		case num == 3 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			kind, n = int(v), m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return p, 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return p, kind, nil
}

// MarshalSentencePiece encodes pieces as a minimal spiece.model, the inverse
// of what LoadT5 reads; the tiny export writes one.
func MarshalSentencePiece(pieces []Piece, unk int) []byte {
	var out []byte
	for id, p := range pieces {
		var msg []byte
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, p.Text)
		msg = protowire.AppendTag(msg, 2, protowire.Fixed32Type)
		msg = protowire.AppendFixed32(msg, math.Float32bits(float32(p.Score)))
		kind := spNormal
		switch {
		case id == unk:
			kind = spUnknown
		case p.Special:
			kind = spControl
		}
		msg = protowire.AppendTag(msg, 3, protowire.VarintType)
		msg = protowire.AppendVarint(msg, uint64(kind))
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, msg)
	}
	return out
}
