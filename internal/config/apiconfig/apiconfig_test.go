package apiconfig

import (
	"io"
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
