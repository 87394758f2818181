package structured

import (
	"container/list"
	"crypto/sha256"
	"sync"

	"github.com/genq/genq/internal/structured/grammar"
)

// Cache keeps compiled grammars by the SHA-256 of the schema's bytes, the
// least recently used dropped beyond its count or its bytes (MaxBytes). The same schema sent again
// (a client's tool definitions repeat with every request) skips the
// compile and keeps the token masks already worked out. Safe for
// concurrent use.
type Cache struct {
	// ClosedObjects closes every object schema (Options.ClosedObjects), as
	// a request's strict: true does for its own: a worker's setting. Set it
	// before the cache is used.
	ClosedObjects bool
	// MaxBytes bounds the grammars' bytes (Grammar.size; their masks are
	// bounded by the Vocab's store); 0 is DefaultGrammarBytes. Set it
	// before the cache is used.
	MaxBytes int64

	mu        sync.Mutex
	max       int
	bytes     int64
	evictions uint64
	order     *list.List // of *cacheEntry, most recent first
	byKey     map[[sha256.Size]byte]*list.Element
}

// DefaultGrammarBytes bounds a Cache's grammars unless MaxBytes says
// otherwise: the largest grammar a schema may compile to (MaxNodes) is
// tens of megabytes.
const DefaultGrammarBytes = 32 << 20

type cacheEntry struct {
	key  [sha256.Size]byte
	g    *grammar.Grammar
	size int64
}

// CacheStats is what a Cache holds, for metrics.
type CacheStats struct {
	Grammars  int
	Bytes     int64 // the grammars' own, their masks aside
	Limit     int64
	Evictions uint64
}

// Stats reports what c holds.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Grammars: c.order.Len(), Bytes: c.bytes, Limit: c.maxBytes(), Evictions: c.evictions}
}

func (c *Cache) maxBytes() int64 {
	if c.MaxBytes <= 0 {
		return DefaultGrammarBytes
	}
	return c.MaxBytes
}

// NewCache returns a cache of at most size grammars (at least one).
func NewCache(size int) *Cache {
	return &Cache{max: max(size, 1), order: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}
}

// Compile returns the grammar of schema, compiled once. Schemas that fail
// are not kept: their errors come back each time.
func (c *Cache) Compile(schema []byte) (*grammar.Grammar, error) {
	return c.CompileWith(schema, Options{})
}

// CompileWith is Compile as opts say, and the cache's ClosedObjects.
func (c *Cache) CompileWith(schema []byte, opts Options) (*grammar.Grammar, error) {
	opts.ClosedObjects = opts.ClosedObjects || c.ClosedObjects
	key := schema
	switch {
	case opts.Strict:
		key = append([]byte("strict\x00"), schema...)
	case opts.ClosedObjects:
		key = append([]byte("closed\x00"), schema...)
	}
	return c.compileKeyed(sha256.Sum256(key), func() (*grammar.Grammar, error) { return CompileWith(schema, opts) })
}

// compileKeyed returns the grammar kept under key, compiling it once.
func (c *Cache) compileKeyed(key [sha256.Size]byte, compile func() (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	if g := c.get(key); g != nil {
		return g, nil
	}
	g, err := compile()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok { // compiled meanwhile by another caller
		c.order.MoveToFront(el)
		return el.Value.(*cacheEntry).g, nil
	}
	e := &cacheEntry{key, g, g.Bytes()}
	c.byKey[key] = c.order.PushFront(e)
	c.bytes += e.size
	for c.order.Len() > c.max || c.bytes > c.maxBytes() && c.order.Len() > 1 {
		c.evict(c.order.Back())
	}
	return g, nil
}

// evict drops a grammar and empties its masks: a step still holding the
// grammar works out what it needs again. c.mu is held.
func (c *Cache) evict(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.order.Remove(el)
	delete(c.byKey, e.key)
	c.bytes -= e.size
	c.evictions++
	e.g.ReleaseMasks()
}

func (c *Cache) get(key [sha256.Size]byte) *grammar.Grammar {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheEntry).g
	}
	return nil
}

// Len is the number of grammars held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
