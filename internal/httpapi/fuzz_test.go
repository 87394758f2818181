package httpapi

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
)

// FuzzDecodePrompt feeds arbitrary request bodies to /generate's decoder:
// it must never panic, every refusal must be a 400 with a message, and every
// prompt it accepts must be one the queue can carry.
func FuzzDecodePrompt(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello"}`, `{}`, `{"text":null}`, `{"text":""}`, `{"text":1}`, `[]`, `{"text":"a","text":"b"}`,
		`{"text":"a"} x`, `{"text":"\u0000"}`, "{\"text\":\"\xff\"}", `{"a":{"b":[1,2,{"c":null}]},"text":"x"}`,
		strings.Repeat("[", 100), `{"text":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	const limit = 64
	f.Fuzz(func(t *testing.T, body []byte) {
		text, err := decodePrompt(body, limit)
		if err != nil {
			if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) == "" {
				t.Fatalf("refusal %v is not a clear 400", err)
			}
			return
		}
		if text == "" || len(text) > limit || !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			t.Fatalf("accepted %q", text)
		}
	})
}
