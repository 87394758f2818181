// Package vocabtest holds the vocabularies the tests of constrained
// decoding mask over, shared by the schema compiler's tests and the grammar
// runtime's: a small one built to stress the masks, and Llama 3's.
package vocabtest

import (
	"encoding/hex"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Small is a small vocabulary built to stress the masks: every single
// byte (controls, invalid UTF-8 bytes and all), JSON pieces that cross
// token boundaries the way real tokenizers' do, words, escapes, multi-byte
// UTF-8 whole and cut in half. Its last token is the end of sequence.
func Small() ([][]byte, int32) {
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	pieces := []string{
		`{"`, `":`, `",`, `"}`, `"]`, `},`, `}]`, `[{`, `[]`, `{}`, `", "`, `": "`, `":"`, `"}}`, `"}]}`,
		`true`, `false`, `null`, `tr`, `ue`, `nul`, `null,`, `true]`, `0.`, `1e`, `-1`, `12`, `345`, `.5`, `E+`, `1,`, `2}`, `00`,
		`name`, ` name`, `"name`, `name"`, `age`, `type`, `value`, `children`, `hello`, ` world`, `red`, `blue`,
		`celsius`, `query`, `location`, `unit`, `"location":"`, `op`, `args`, `head`, `next`, `kind`, `circle`,
		` "`, "\n ", "\n  ", "\n    ", `  `, ` :`, `, `, ` }`,
		`\n`, `\u00e9`, `\"`, `\u12`, `\ud800`, `\\`, `\/`,
		"é", "名前", "✓", "\xe5\x90", "\x90\x8d", "ü", "état", "prêt",
	}
	for _, p := range pieces {
		toks = append(toks, []byte(p))
	}
	toks = append(toks, []byte("<eos>"))
	return toks, int32(len(toks) - 1)
}

// Llama3EOS is Llama 3's <|eot_id|>, the end of an answer.
const Llama3EOS = 128009

// Llama3 is Llama 3's vocabulary, as scripts/fetch-vocab.sh writes it to
// .cache/llama3-vocab.hex at the repository's root; the test is skipped
// without it.
func Llama3(t testing.TB) [][]byte {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "..", ".cache", "llama3-vocab.hex"))
	if err != nil {
		t.Skip("no .cache/llama3-vocab.hex: run scripts/fetch-vocab.sh")
	}
	var toks [][]byte
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, b)
	}
	return toks
}

// Allowed lists the token ids a mask allows, in order.
func Allowed(mask []uint64) []int32 {
	var ids []int32
	for i, x := range mask {
		for x != 0 {
			b := bits.TrailingZeros64(x)
			ids = append(ids, int32(i*64+b))
			x &= x - 1
		}
	}
	return ids
}
