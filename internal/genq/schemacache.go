package genq

// SchemaCacheStats is what a text backend's structured output keeps
// between jobs: compiled grammars and the token masks of their nodes,
// each within its limit in bytes, and how many each dropped to stay so.
type SchemaCacheStats struct {
	Grammars, GrammarBytes, GrammarLimit, GrammarEvictions int64
	MaskTables, MaskBytes, MaskLimit, MaskEvictions        int64
}

// SchemaCacheReporter is a backend with structured output's caches.
type SchemaCacheReporter interface {
	SchemaCacheStats() SchemaCacheStats
}
