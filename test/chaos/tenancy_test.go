package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTenancyTallies checks what the harness takes for admitted, the
// count the tenants' counters are held to, against answers shaped as the
// api's are.
func TestTenancyTallies(t *testing.T) {
	limits := func(w http.ResponseWriter) { w.Header().Set("X-Ratelimit-Limit-Requests", "100000") }
	cases := []struct {
		name         string
		method, path string
		answer       func(w http.ResponseWriter)
		admitted     bool
	}{
		{"an answer after admission", "POST", "/generate", func(w http.ResponseWriter) { limits(w); w.Write([]byte("ok")) }, true},
		{"a full queue's 429 after admission", "POST", "/generate", func(w http.ResponseWriter) {
			limits(w)
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"the queue is full"}`))
		}, true},
		{"a limit's 429", "POST", "/v1/chat/completions", func(w http.ResponseWriter) {
			limits(w)
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"message":"rate limit reached on rpm (requests per minute): limit 1"}}`))
		}, false},
		{"a 503 before admission", "POST", "/v1/chat/completions", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"message":"the tenants' counters are unavailable; retry"}}`))
		}, false},
		{"a batch, counted by its lines", "POST", "/v1/batches", func(w http.ResponseWriter) { limits(w); w.Write([]byte(`{}`)) }, false},
		{"a batch's poll", "GET", "/v1/batches/b1", func(w http.ResponseWriter) { w.Write([]byte(`{}`)) }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var auth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth = r.Header.Get("Authorization")
				c.answer(w)
			}))
			defer srv.Close()
			ten := newTenancy("keys")
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
			resp, err := ten.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			name := tenantOfKey(auth)
			if name == "" {
				t.Fatalf("the request carried no tenant's key: %q", auth)
			}
			n := ten.of(name)
			if got := n.admitted == 1; got != c.admitted || n.sent != 1 || n.unanswered != 0 {
				t.Errorf("tally %+v, want admitted %v", *n, c.admitted)
			}
			if len(body) == 0 && resp.StatusCode != http.StatusOK {
				t.Errorf("the caller lost the body of a %d", resp.StatusCode)
			}
		})
	}
}

// TestTenancyTurns checks that requests without a key go out as the
// tenants in turn, one with a key as its own tenant, and one with no
// answer is tallied as unanswered.
func TestTenancyTurns(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ten := newTenancy("keys")
	client := ten.client()
	for range 4 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+chaosKeys[1][0])
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	if _, err := client.Get(srv.URL); err == nil {
		t.Fatal("a closed server answered")
	}
	light, heavy := ten.of("light"), ten.of("heavy")
	if light.sent+heavy.sent != 6 || light.sent < 2 || heavy.sent < 3 || light.unanswered+heavy.unanswered != 1 {
		t.Errorf("light %+v, heavy %+v; want 2 and 2 in turn, 1 more heavy, 1 unanswered", *light, *heavy)
	}
	if off := newTenancy(""); off.on() {
		t.Error("a tenancy without a keys file is on")
	}
}
