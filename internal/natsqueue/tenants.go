package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
)

// The tenants' buckets (docs/protocol.md, "Tenants").
const (
	// KeysBucket holds API keys with their tenants and limits: the key is
	// the hex SHA-256 of the API key, the value the tenant's JSON
	// (tenant.Tenant). Every api watches it.
	KeysBucket = "GENQ_KEYS"
	// TenantsBucket holds each tenant's counters of a UTC day
	// (tenant.Counters) under <tenant>.<YYYYMMDD>, updated by
	// compare-and-swap.
	TenantsBucket = "GENQ_TENANTS"
	// TenantsRetention is how long a day's counters, and so its usage,
	// are kept.
	TenantsRetention = 40 * 24 * time.Hour
)

// TenantStore is tenant.Store over the GENQ_TENANTS bucket. It reads
// from the bucket's stream's leader (tenantsread.go) and writes by
// compare-and-swap, each write counted once (tenantswrite.go).
type TenantStore struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
	nc *nats.Conn
}

// TenantStore binds the tenants' counters, creating their bucket.
func (c *Conn) TenantStore(ctx context.Context) (*TenantStore, error) {
	kv, err := c.bucket(ctx, jetstream.KeyValueConfig{
		Bucket: TenantsBucket, Description: "genq tenants' counters and usage by UTC day", History: 1, TTL: TenantsRetention,
	})
	if err != nil {
		return nil, err
	}
	return &TenantStore{kv: kv, js: c.js, nc: c.nc}, nil
}

// bucket puts a bucket of the tenants with the settings' storage and
// replicas (as the api's settings say; genqctl adopts what is there) and
// binds it.
func (c *Conn) bucket(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	s := c.settings
	cfg.Storage, cfg.Replicas = s.storage(), s.replicas()
	if err := s.putKeyValue(ctx, c.js, cfg); err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", cfg.Bucket, err)
	}
	kv, err := c.js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("bind bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// Get implements tenant.Store, from the leader: it holds every update
// acknowledged before it (a replica's direct get may not).
func (s *TenantStore) Get(ctx context.Context, key string) (tenant.Counters, uint64, error) {
	var c tenant.Counters
	m, err := leaderLast(ctx, s.nc, "KV_"+TenantsBucket, "$KV."+TenantsBucket+"."+key)
	if err != nil {
		return c, 0, genq.WrapError(genq.Unavailable, err, "the tenants' counters are unavailable")
	}
	if m == nil {
		return c, 0, nil
	}
	gone, err := m.deleted()
	if err != nil {
		return c, 0, err
	}
	if gone {
		// A deleted record (an operator's kv del) is zero, but its marker
		// is the subject's last message: a swap must expect it, as one
		// expecting none would conflict on every try.
		return c, m.Seq, nil
	}
	if err := json.Unmarshal(m.Data, &c); err != nil {
		return c, 0, fmt.Errorf("counters %s: %w", key, err)
	}
	return c, m.Seq, nil
}

// Update implements tenant.Store: a create when rev is 0, else an update
// at rev; either fails with tenant.ErrConflict when another api wrote
// first. A write whose answer is lost is sent again (tenantswrite.go).
func (s *TenantStore) Update(ctx context.Context, key string, c tenant.Counters, rev uint64) (uint64, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	n, err := s.swap(ctx, "$KV."+TenantsBucket+"."+key, data, rev)
	if err != nil && !errors.Is(err, tenant.ErrConflict) {
		return 0, genq.WrapError(genq.Unavailable, err, "the tenants' counters are unavailable")
	}
	return n, err
}

// Keys implements tenant.Store.
func (s *TenantStore) Keys(ctx context.Context, day string) ([]string, error) {
	l, err := s.kv.ListKeysFiltered(ctx, tenant.CounterKey("*", day))
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, genq.WrapError(genq.Unavailable, err, "the tenants' counters are unavailable")
	}
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// keysBucket binds GENQ_KEYS, creating it.
func (c *Conn) keysBucket(ctx context.Context) (jetstream.KeyValue, error) {
	return c.bucket(ctx, jetstream.KeyValueConfig{
		Bucket: KeysBucket, Description: "genq API keys: SHA-256 of the key to its tenant and limits", History: 1,
	})
}

// WatchKeys keeps keys in step with GENQ_KEYS until ctx ends. It returns
// once keys holds what the bucket holds, so an api serves its stored keys
// from its first request. A record that does not read is skipped, and
// logged by its digest's first digits, never more.
func (c *Conn) WatchKeys(ctx context.Context, keys *tenant.Keys, log *slog.Logger) error {
	kv, err := c.keysBucket(ctx)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", KeysBucket, err)
	}
	ready := make(chan struct{})
	go func() {
		defer w.Stop()
		caught := false
		for e := range w.Updates() {
			if e == nil {
				if !caught {
					caught = true
					close(ready)
				}
				continue
			}
			applyKey(keys, e, log)
		}
		if !caught {
			close(ready)
		}
	}()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// applyKey puts or deletes one GENQ_KEYS record in keys.
func applyKey(keys *tenant.Keys, e jetstream.KeyValueEntry, log *slog.Logger) {
	d, err := tenant.ParseDigest(e.Key())
	if err != nil {
		log.Warn("a GENQ_KEYS record's key is not a key's digest; skipped", "err", err)
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		keys.Delete(d)
		return
	}
	t, err := tenant.DecodeRecord(e.Value())
	if err != nil {
		keys.Delete(d)
		log.Warn("a GENQ_KEYS record does not read; its key is refused", "digest", e.Key()[:8], "err", err)
		return
	}
	keys.Put(d, t)
}

// PutKey stores key's tenant in GENQ_KEYS, by its digest.
func (c *Conn) PutKey(ctx context.Context, d tenant.Digest, t tenant.Tenant) error {
	kv, err := c.keysBucket(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, d.String(), data); err != nil {
		return fmt.Errorf("put key: %w", err)
	}
	return nil
}

// StoredKeys lists GENQ_KEYS' records.
func (c *Conn) StoredKeys(ctx context.Context) ([]tenant.Key, error) {
	kv, err := c.keysBucket(ctx)
	if err != nil {
		return nil, err
	}
	l, err := kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	var out []tenant.Key
	for k := range l.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // deleted since listed
		}
		d, derr := tenant.ParseDigest(k)
		t, terr := tenant.DecodeRecord(e.Value())
		if derr == nil && terr == nil {
			out = append(out, tenant.Key{Digest: d, Tenant: t})
		}
	}
	return out, nil
}

// DeleteKey removes a key's record from GENQ_KEYS.
func (c *Conn) DeleteKey(ctx context.Context, d tenant.Digest) error {
	kv, err := c.keysBucket(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, d.String()); err != nil {
		return fmt.Errorf("delete key: %w", err)
	}
	return nil
}
