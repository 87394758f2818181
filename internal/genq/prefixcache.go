package genq

// PrefixCacheStats are a text backend's prefix cache counters: prompt
// tokens reused from it and computed, since start, and the tokens it holds
// now out of the most it can hold.
type PrefixCacheStats struct {
	HitTokens, MissTokens      int64
	HeldTokens, CapacityTokens int64
}

// PrefixCacheReporter is a backend with a prefix cache.
type PrefixCacheReporter interface {
	PrefixCacheStats() PrefixCacheStats
}
