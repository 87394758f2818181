package grammar_test

import (
	"github.com/genq/genq/internal/structured"
	"github.com/genq/genq/internal/structured/grammar"
)

// The runtime's tests compile their grammars with the real compiler: an
// external test package may import it, the runtime's own tests may not.
func init() {
	grammar.Compile = structured.Compile
	grammar.FormatsGrammar = structured.FormatsGrammar
}
