package structured

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Cache keeps compiled grammars by the SHA-256 of the schema's bytes, the
// least recently used dropped beyond its size. The same schema sent again
// (a client's tool definitions repeat with every request) skips the
// compile and keeps the token masks already worked out. Safe for
// concurrent use.
type Cache struct {
	// ClosedObjects closes every object schema (Options.ClosedObjects), as
	// a request's strict: true does for its own: a worker's setting. Set it
	// before the cache is used.
	ClosedObjects bool

	mu    sync.Mutex
	max   int
	order *list.List // of *cacheEntry, most recent first
	byKey map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key [sha256.Size]byte
	g   *Grammar
}

// NewCache returns a cache of at most size grammars (at least one).
func NewCache(size int) *Cache {
	return &Cache{max: max(size, 1), order: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}
}

// Compile returns the grammar of schema, compiled once. Schemas that fail
// are not kept: their errors come back each time.
func (c *Cache) Compile(schema []byte) (*Grammar, error) { return c.CompileWith(schema, Options{}) }

// CompileWith is Compile as opts say, and the cache's ClosedObjects.
func (c *Cache) CompileWith(schema []byte, opts Options) (*Grammar, error) {
	opts.ClosedObjects = opts.ClosedObjects || c.ClosedObjects
	key := schema
	switch {
	case opts.Strict:
		key = append([]byte("strict\x00"), schema...)
	case opts.ClosedObjects:
		key = append([]byte("closed\x00"), schema...)
	}
	return c.compileKeyed(sha256.Sum256(key), func() (*Grammar, error) { return CompileWith(schema, opts) })
}

// compileKeyed returns the grammar kept under key, compiling it once.
func (c *Cache) compileKeyed(key [sha256.Size]byte, compile func() (*Grammar, error)) (*Grammar, error) {
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
	c.byKey[key] = c.order.PushFront(&cacheEntry{key, g})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.byKey, old.Value.(*cacheEntry).key)
	}
	return g, nil
}

func (c *Cache) get(key [sha256.Size]byte) *Grammar {
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
