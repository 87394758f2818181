package grammar

import (
	"container/list"
	"sync"
	"unsafe"
)

// DefaultMaskBytes bounds the token masks a Vocab keeps for grammars'
// nodes (its own shared nodes aside) unless SetMaskBytes says otherwise:
// enough for the masks of hundreds of typical grammars, small beside a
// model.
const DefaultMaskBytes = 96 << 20

// maskStore bounds the node masks kept per Vocab: tables of masks (a
// grammar's, or a shared string rule's) in least recently used order,
// whole tables emptied when their bytes pass the limit. An emptied
// table's masks are worked out again on their next use.
type maskStore struct {
	mu        sync.Mutex
	limit     int64
	bytes     int64
	lru       list.List // of *nodeTable, most recently used first
	evictions uint64
}

// MaskStats is what a Vocab's mask store holds.
type MaskStats struct {
	Bytes, Limit int64  // the masks' bytes held and their bound
	Tables       int    // the tables (a grammar's or a shared rule's) holding masks
	Evictions    uint64 // tables emptied to stay within Limit
}

// SetMaskBytes bounds the bytes of the node masks v keeps (0:
// DefaultMaskBytes); past it the least recently used tables are emptied.
func (v *Vocab) SetMaskBytes(limit int64) {
	if limit <= 0 {
		limit = DefaultMaskBytes
	}
	v.store.mu.Lock()
	v.store.limit = limit
	v.store.mu.Unlock()
	v.store.shrink(nil)
}

// MaskStats reports v's mask store, for metrics.
func (v *Vocab) MaskStats() MaskStats {
	s := &v.store
	s.mu.Lock()
	defer s.mu.Unlock()
	return MaskStats{Bytes: s.bytes, Limit: s.limitOrDefault(), Tables: s.lru.Len(), Evictions: s.evictions}
}

func (s *maskStore) limitOrDefault() int64 {
	if s.limit <= 0 {
		return DefaultMaskBytes
	}
	return s.limit
}

// touch marks t used now.
func (s *maskStore) touch(t *nodeTable) {
	if t.pinned {
		return
	}
	s.mu.Lock()
	if t.el != nil {
		s.lru.MoveToFront(t.el)
	}
	s.mu.Unlock()
}

// added counts a mask of n bytes set in t, and empties the least recently
// used other tables while the store is over its limit.
func (s *maskStore) added(t *nodeTable, n int64) {
	if t.pinned {
		return
	}
	s.mu.Lock()
	t.bytes += n
	s.bytes += n
	if t.el == nil {
		t.el = s.lru.PushFront(t)
	} else {
		s.lru.MoveToFront(t.el)
	}
	s.mu.Unlock()
	s.shrink(t)
}

// shrink empties tables, least recently used first and keep never, until
// the store is within its limit; then drops the emptied tables from where
// they were found, outside the store's lock.
func (s *maskStore) shrink(keep *nodeTable) {
	var dropped []*nodeTable
	s.mu.Lock()
	for s.bytes > s.limitOrDefault() {
		el := s.lru.Back()
		if el == nil || el.Value.(*nodeTable) == keep {
			break
		}
		t := el.Value.(*nodeTable)
		s.remove(t)
		s.evictions++
		dropped = append(dropped, t)
	}
	s.mu.Unlock()
	for _, t := range dropped {
		if t.drop != nil {
			t.drop()
		}
	}
}

// release empties t now: its grammar left the grammar cache.
func (s *maskStore) release(t *nodeTable) {
	s.mu.Lock()
	if t.el != nil {
		s.remove(t)
	}
	s.mu.Unlock()
}

// remove empties t and takes it out of the order; s.mu is held. A mask a
// step sets into t meanwhile is counted again (added) and stays.
func (s *maskStore) remove(t *nodeTable) {
	for i := range t.masks {
		t.masks[i].Store(nil)
	}
	t.memo.clear()
	s.bytes -= t.bytes
	t.bytes = 0
	s.lru.Remove(t.el)
	t.el = nil
}

// size is the bytes a mask holds.
func (nm *nodeMask) size() int64 {
	return int64(unsafe.Sizeof(*nm)) + int64(cap(nm.bits))*8 + int64(cap(nm.ids)+cap(nm.escapes))*4
}

// Bytes estimates the bytes a grammar holds, its masks aside: nodes and
// their edges, and a mask slot per node for each vocabulary.
func (g *Grammar) Bytes() int64 {
	n := int64(len(g.Nodes)) * int64(unsafe.Sizeof(Node{})+8)
	for i := range g.Nodes {
		n += int64(cap(g.Nodes[i].Edges))*int64(unsafe.Sizeof(Edge{})) + int64(cap(g.Nodes[i].Eps))*4
		if r := g.Nodes[i].region; r != nil {
			n += int64(unsafe.Sizeof(*r)) + int64(len(r.need)+len(r.long))*4
		}
	}
	return n + int64(len(g.Rules))*int64(unsafe.Sizeof(rule{}))
}
