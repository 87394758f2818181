package tenant

import (
	"context"
	"strings"
	"sync"
)

// MemStore is a Store in this process's memory, for one api without NATS
// (tests): its counters die with it.
type MemStore struct {
	mu      sync.Mutex
	records map[string]memRecord
}

type memRecord struct {
	c   Counters
	rev uint64
}

// NewMemStore is an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{records: map[string]memRecord{}} }

// Get implements Store.
func (m *MemStore) Get(_ context.Context, key string) (Counters, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.records[key]
	return r.c.clone(), r.rev, nil
}

// Update implements Store.
func (m *MemStore) Update(_ context.Context, key string, c Counters, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records[key].rev != rev {
		return 0, ErrConflict
	}
	r := memRecord{c: c.clone(), rev: rev + 1}
	m.records[key] = r
	return r.rev, nil
}

// Keys implements Store.
func (m *MemStore) Keys(_ context.Context, day string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	suffix := CounterKey("", day)
	var out []string
	for k := range m.records {
		if strings.HasSuffix(k, suffix) {
			out = append(out, k)
		}
	}
	return out, nil
}
