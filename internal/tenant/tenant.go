// Package tenant is who calls genq and how much they may ask: API keys
// with a tenant's name and limits (from API_KEYS, API_KEYS_FILE or the
// GENQ_KEYS bucket), the limits' admission and settlement over counters
// shared by every api (Limiter), and the usage those counters keep.
// A key itself is only ever held as its SHA-256 digest here: it is never
// logged, never a metric label, never in an error.
package tenant

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/envflag"
)

// Limits bound what a tenant may ask; a zero field is no limit.
type Limits struct {
	// RPM is requests per minute, TPM tokens (prompt and answer) per
	// minute, TPD tokens per day (UTC).
	RPM int64 `json:"rpm,omitempty"`
	TPM int64 `json:"tpm,omitempty"`
	TPD int64 `json:"tpd,omitempty"`
	// ImagesPerDay bounds the images a tenant gets a day (UTC).
	ImagesPerDay int64 `json:"images_per_day,omitempty"`
	// Concurrency bounds the tenant's requests in flight, over every api.
	Concurrency int64 `json:"concurrency,omitempty"`
	// Weight is the tenant's share of the queue against others' (the
	// queue's fair share reads it; 0 is 1).
	Weight float64 `json:"weight,omitempty"`
	// Models, when set, are the only models the tenant may ask for.
	Models []string `json:"models,omitempty"`
}

// Bounded reports whether l holds any limit a request is admitted
// against (weight and models aside).
func (l Limits) Bounded() bool {
	return l.RPM > 0 || l.TPM > 0 || l.TPD > 0 || l.ImagesPerDay > 0 || l.Concurrency > 0
}

// Tenant is who a key belongs to.
type Tenant struct {
	Name string `json:"tenant"`
	// Admin tenants read every tenant's usage.
	Admin bool `json:"admin,omitempty"`
	Limits
}

// AllowsModel reports whether t may ask for model: any, without an
// allow-list.
func (t Tenant) AllowsModel(model string) bool {
	return len(t.Models) == 0 || slices.Contains(t.Models, model)
}

// Digest is a key as genq keeps it.
type Digest [sha256.Size]byte

// DigestOf is key's digest.
func DigestOf(key string) Digest { return sha256.Sum256([]byte(key)) }

// String is the digest in hex: GENQ_KEYS' key of the record.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ParseDigest reads a digest in hex.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(d) {
		return d, fmt.Errorf("a key's digest is %d hex digits, SHA-256 of the key", 2*len(d))
	}
	copy(d[:], b)
	return d, nil
}

// Key is a key's digest and the tenant it belongs to.
type Key struct {
	Digest Digest
	Tenant Tenant
}

// PlainName names the tenant of a key given without one: "key-" and the
// first 8 hex digits of its digest, which say nothing of the key.
func PlainName(d Digest) string { return "key-" + d.String()[:8] }

// tenantName is what a tenant's name may hold: it is a metric label and
// part of the counters' keys in NATS.
var tenantName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName checks a tenant's name.
func ValidName(name string) error {
	if !tenantName.MatchString(name) {
		return fmt.Errorf("tenant: %q is not a name: 1 to 64 of A-Z, a-z, 0-9, _ and -", name)
	}
	return nil
}

// ParseLine reads one line of API_KEYS_FILE: a key, then any of
// tenant=NAME rpm=N tpm=N tpd=N images_per_day=N concurrency=N weight=W
// models=a,b admin=true. Errors name the field, never the key.
func ParseLine(line string) (Key, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return Key{}, fmt.Errorf("no key")
	}
	k := Key{Digest: DigestOf(fields[0])}
	if strings.Contains(fields[0], "=") {
		return Key{}, fmt.Errorf("the line must start with the key, not a field")
	}
	for _, f := range fields[1:] {
		if err := k.Tenant.set(f); err != nil {
			return Key{}, err
		}
	}
	if k.Tenant.Name == "" {
		k.Tenant.Name = PlainName(k.Digest)
	}
	return k, nil
}

// set reads one name=value field into t.
func (t *Tenant) set(field string) error {
	name, value, ok := strings.Cut(field, "=")
	if !ok || value == "" {
		return fmt.Errorf("field %q: want name=value", name)
	}
	var err error
	switch name {
	case "tenant":
		t.Name, err = value, ValidName(value)
	case "rpm":
		t.RPM, err = count(name, value)
	case "tpm":
		t.TPM, err = count(name, value)
	case "tpd":
		t.TPD, err = count(name, value)
	case "images_per_day":
		t.ImagesPerDay, err = count(name, value)
	case "concurrency":
		t.Concurrency, err = count(name, value)
	case "weight":
		t.Weight, err = strconv.ParseFloat(value, 64)
		if err != nil || !(t.Weight > 0 && t.Weight <= 1e6) {
			err = fmt.Errorf("weight: %q is not a number above 0 and at most 1e6", value)
		}
	case "models":
		t.Models, err = models(value)
	case "admin":
		t.Admin, err = strconv.ParseBool(value)
		if err != nil {
			err = fmt.Errorf("admin: %q is not true or false", value)
		}
	default:
		err = fmt.Errorf("unknown field %q: want tenant, rpm, tpm, tpd, images_per_day, concurrency, weight, models or admin", name)
	}
	return err
}

// count reads a limit: a whole number of at least 1.
func count(name, value string) (int64, error) {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: %q is not a whole number of at least 1", name, value)
	}
	return n, nil
}

// models reads an allow-list: names apart by commas.
func models(value string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(value, ",") {
		if m == "" {
			return nil, fmt.Errorf("models: an empty name in %q", value)
		}
		out = append(out, m)
	}
	return out, nil
}

// Validate checks a tenant read from elsewhere than a line (GENQ_KEYS).
func (t Tenant) Validate() error {
	if err := ValidName(t.Name); err != nil {
		return err
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{"rpm", t.RPM}, {"tpm", t.TPM}, {"tpd", t.TPD}, {"images_per_day", t.ImagesPerDay}, {"concurrency", t.Concurrency}} {
		if v.n < 0 {
			return fmt.Errorf("%s: %d is negative", v.name, v.n)
		}
	}
	if t.Weight < 0 {
		return fmt.Errorf("weight: %g is negative", t.Weight)
	}
	if slices.Contains(t.Models, "") {
		return fmt.Errorf("models: an empty name")
	}
	return nil
}

// ParseKeys reads API_KEYS' comma-separated keys and API_KEYS_FILE's
// lines (file, named src in errors); blank lines and lines starting with
// # are skipped.
func ParseKeys(list, file, src string) ([]Key, error) {
	var keys []Key
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			d := DigestOf(k)
			keys = append(keys, Key{Digest: d, Tenant: Tenant{Name: PlainName(d)}})
		}
	}
	for i, line := range strings.Split(file, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", src, i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// DecodeRecord reads a GENQ_KEYS record: a tenant's JSON.
func DecodeRecord(data []byte) (Tenant, error) {
	var t Tenant
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, fmt.Errorf("a key's record: %w", err)
	}
	return t, t.Validate()
}

// KeySettings are where the api's keys come from: API_KEYS and
// API_KEYS_FILE (the GENQ_KEYS bucket adds to them at run time).
type KeySettings struct {
	List string // API_KEYS, comma-separated
	File string // API_KEYS_FILE
}

// RegisterFlags binds API_KEYS and API_KEYS_FILE.
func (s *KeySettings) RegisterFlags(fs *envflag.Set) {
	fs.Secret(&s.List, "api-keys", "API_KEYS", "comma-separated bearer tokens required on POST /generate and the /v1 routes, each a tenant of its own without limits (none, and none in API_KEYS_FILE or the GENQ_KEYS bucket: open)")
	fs.String(&s.File, "api-keys-file", "API_KEYS_FILE", "", "file of bearer tokens, one per line, each optionally followed by tenant=NAME rpm=N tpm=N tpd=N images_per_day=N concurrency=N weight=W models=a,b admin=true (docs/api.md, \"Keys, tenants and limits\")")
}

// Load reads the keys s names. An error names the file's line and field,
// never a key.
func (s KeySettings) Load() ([]Key, error) {
	var lines []byte
	if s.File != "" {
		b, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("read API keys file: %w", err)
		}
		lines = b
	}
	keys, err := ParseKeys(s.List, string(lines), "API_KEYS_FILE "+s.File)
	if err != nil {
		return nil, fmt.Errorf("API keys: %w", err)
	}
	return keys, nil
}
