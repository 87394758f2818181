package grammar

import (
	"testing"

	"github.com/genq/genq/internal/structured/vocabtest"
)

// Compile and FormatsGrammar are the schema compiler's, set by
// compile_test.go: the runtime cannot import its compiler, but its tests
// want real grammars.
var (
	Compile        func(schema []byte) (*Grammar, error)
	FormatsGrammar func() *Grammar
)

// llama3 is Llama 3's vocabulary (vocabtest.Llama3) and its end-of-turn
// token.
func llama3(t testing.TB) (*Vocab, [][]byte, int32) {
	t.Helper()
	toks := vocabtest.Llama3(t)
	return NewVocab(toks, []int32{vocabtest.Llama3EOS}), toks, vocabtest.Llama3EOS
}
