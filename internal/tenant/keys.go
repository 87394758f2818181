package tenant

import (
	"crypto/subtle"
	"sync"
)

// Keys finds the tenant of a key: those of API_KEYS and API_KEYS_FILE,
// fixed, and those of GENQ_KEYS, which change while the api runs. It is
// safe for concurrent use.
type Keys struct {
	static []Key
	mu     sync.RWMutex
	stored map[Digest]Tenant
}

// NewKeys holds static, the keys of the api's settings.
func NewKeys(static []Key) *Keys {
	return &Keys{static: static, stored: map[Digest]Tenant{}}
}

// Put adds or replaces a stored key.
func (k *Keys) Put(d Digest, t Tenant) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stored[d] = t
}

// Delete removes a stored key.
func (k *Keys) Delete(d Digest) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.stored, d)
}

// Required reports whether any key is configured: without one the api is
// open, as it was before keys had tenants. A key put in GENQ_KEYS closes
// an api that had none.
func (k *Keys) Required() bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.static) > 0 || len(k.stored) > 0
}

// Lookup finds token's tenant. Every key's digest is compared with the
// token's, in constant time, so timing says nothing of which key, or which
// prefix of one, matched, nor of the keys' lengths.
func (k *Keys) Lookup(token string) (Tenant, bool) {
	got := DigestOf(token)
	var found Tenant
	match := 0
	try := func(d Digest, t Tenant) {
		if subtle.ConstantTimeCompare(got[:], d[:]) == 1 {
			found, match = t, 1
		}
	}
	for _, key := range k.static {
		try(key.Digest, key.Tenant)
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	for d, t := range k.stored {
		try(d, t)
	}
	return found, match == 1
}

// Tenants lists the tenants of every key, each once.
func (k *Keys) Tenants() []Tenant {
	seen := map[string]bool{}
	var out []Tenant
	add := func(t Tenant) {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	for _, key := range k.static {
		add(key.Tenant)
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, t := range k.stored {
		add(t)
	}
	return out
}
