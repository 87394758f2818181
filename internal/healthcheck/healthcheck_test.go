package healthcheck

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLocalURL(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
		bad        bool
	}{
		{addr: ":9091", want: "http://127.0.0.1:9091/healthz"},
		{addr: "0.0.0.0:80", want: "http://127.0.0.1:80/healthz"},
		{addr: "[::]:9091", want: "http://127.0.0.1:9091/healthz"},
		{addr: "9091", bad: true},
		{addr: "", bad: true},
	} {
		got, err := LocalURL(tc.addr, "/healthz")
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("LocalURL(%q) = %q, %v; want %q (error %v)", tc.addr, got, err, tc.want, tc.bad)
		}
	}
}

func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	if err := Probe(context.Background(), srv.URL); err != nil {
		t.Errorf("a 200 is unhealthy: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := Probe(context.Background(), srv.URL); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a 503 gives %v, want an error naming it", err)
	}
	srv.Close()
	if err := Probe(context.Background(), srv.URL); err == nil {
		t.Error("a closed server is healthy")
	}
	if err := Probe(context.Background(), "https://127.0.0.1:1/"); err == nil {
		t.Error("an https URL was probed over plain HTTP")
	}
}
