package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestWebhookCheck(t *testing.T) {
	h := New(Config{Secret: "s", Allow: []string{"hooks.example.com", "10.0.0.5", "169.254.169.254"}})
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/x?t=1", true},
		{"http://HOOKS.example.com:8443/x", true},
		{"https://other.example.com/x", false},
		{"ftp://hooks.example.com/x", false},
		{"https://user:pw@hooks.example.com/x", false},
		{"https://10.0.0.5/x", false},            // allowed by name, but private
		{"http://169.254.169.254/latest", false}, // link-local: cloud metadata
		{"not a url", false},
	} {
		if err := h.Check(tt.url); (err == nil) != tt.ok {
			t.Errorf("Check(%q) = %v, want ok %v", tt.url, err, tt.ok)
		}
	}
	if err := New(Config{Allow: []string{"a"}}).Check("https://a/x"); err == nil {
		t.Error("a webhook without WEBHOOK_SECRET was accepted")
	}
}

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "2606:4700::1111": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "192.168.1.1": false, "172.16.0.1": false,
		"169.254.169.254": false, "fe80::1": false, "fc00::1": false, "100.64.0.1": false, "0.0.0.0": false,
		"::ffff:127.0.0.1": false,
	} {
		if got := public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// A name on the allow-list that resolves to loopback is refused when it is
// dialled: the check runs on the address, after resolution.
func TestWebhookDialRefusesResolvedPrivateAddress(t *testing.T) {
	called := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	defer srv.Close()
	target := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	h := New(Config{Secret: "s", Allow: []string{"localhost"}, Attempts: 2, Backoff: time.Millisecond})
	if err := h.Check(target); err != nil {
		t.Fatalf("Check: %v (a name passes; its address is checked at send)", err)
	}
	err := h.Send(context.Background(), target, "job", []byte("{}"), slog.New(slog.DiscardHandler))
	if !errors.Is(err, ErrNotPublic) || called {
		t.Fatalf("Send = %v (called %v), want ErrNotPublic", err, called)
	}
}

func TestSign(t *testing.T) {
	// HMAC-SHA256 keyed "k" of "1700000000.{}", from openssl dgst -sha256 -hmac k.
	got := Sign("k", time.Unix(1700000000, 0), []byte("{}"))
	if want := "t=1700000000,v1=c6ef4734033cee2367414a0939385eca0397754aa7a59716da7463a9298b5146"; got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}
