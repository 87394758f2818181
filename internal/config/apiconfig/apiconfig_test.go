package apiconfig

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// TestMetricsAddrEmptyIsOff: METRICS_ADDR= (set, empty), as make run
// passes an empty API_METRICS_ADDR on, turns /metrics off; unset, the
// default port.
func TestMetricsAddrEmptyIsOff(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, ":9090"},
		{map[string]string{"METRICS_ADDR": ""}, ""},
		{map[string]string{"METRICS_ADDR": "127.0.0.1:9190"}, "127.0.0.1:9190"},
	} {
		c, err := Parse(nil, lookupOf(tt.env), io.Discard)
		if err != nil || c.MetricsAddr != tt.want {
			t.Errorf("env %v: metrics address %q, %v; want %q", tt.env, c.MetricsAddr, err, tt.want)
		}
	}
}

// TestAPIKeysFile: API_KEYS and API_KEYS_FILE's lines join; a bad line is
// refused by its number and field, and the error holds no key.
func TestAPIKeysFile(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		file    string
		keys    int
		wantErr string
	}{
		{"sk-one tenant=a rpm=10\n# a comment\n\nsk-two\n", 3, ""},
		{"sk-one tenant=a\nsk-two rpm=many\n", 0, "line 2: rpm:"},
		{"sk-one tenant=a b\n", 0, "line 1: field \"b\""},
	} {
		path := filepath.Join(dir, "keys")
		if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Parse(nil, lookupOf(map[string]string{"API_KEYS": "sk-zero", "API_KEYS_FILE": path}), io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "sk-") {
				t.Errorf("%q: error %v, want one with %q and no key", tt.file, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(c.Keys) != tt.keys {
			t.Errorf("%q: %d keys, %v; want %d", tt.file, len(c.Keys), err, tt.keys)
		}
	}
}
