package apiconfig

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestResultLooks: the looks for late replies are read, turned off by
// RESULT_LOOK_AFTER=0, and refused, by name, when they could not be paced;
// the polls' rate is read, and refused, by name, at 0: they cannot be off.
func TestResultLooks(t *testing.T) {
	for _, tt := range []struct {
		env       map[string]string
		wantAfter time.Duration
		wantRate  float64
		wantPolls float64
		wantErr   string
	}{
		{map[string]string{}, 5 * time.Second, 20, 200, ""},
		{map[string]string{"RESULT_LOOK_AFTER": "2s", "RESULT_LOOKS_PER_SECOND": "5.5"}, 2 * time.Second, 5.5, 200, ""},
		{map[string]string{"RESULT_LOOK_AFTER": "0", "RESULT_LOOKS_PER_SECOND": "0"}, 0, 0, 200, ""},
		{map[string]string{"RESULT_POLLS_PER_SECOND": "50"}, 5 * time.Second, 20, 50, ""},
		{map[string]string{"RESULT_LOOKS_PER_SECOND": "0"}, 0, 0, 0, "RESULT_LOOKS_PER_SECOND"},
		{map[string]string{"RESULT_LOOK_AFTER": "-1s"}, 0, 0, 0, "RESULT_LOOK_AFTER"},
		{map[string]string{"RESULT_LOOK_AFTER": "0", "RESULT_POLLS_PER_SECOND": "0"}, 0, 0, 0, "RESULT_POLLS_PER_SECOND"},
	} {
		c, err := Parse(nil, lookupOf(tt.env), io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("env %v: %v; want an error naming %s", tt.env, err, tt.wantErr)
			}
			continue
		}
		l := c.ResultLooks
		if err != nil || l.After != tt.wantAfter || l.PerSecond != tt.wantRate || l.PollsPerSecond != tt.wantPolls {
			t.Errorf("env %v: looks %+v, %v; want after %s at %v a second, polls at %v", tt.env, l, err, tt.wantAfter, tt.wantRate, tt.wantPolls)
		}
	}
}
