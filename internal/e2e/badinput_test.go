package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/httpapi"
)

// TestBadInputSuite sends every class of bad (and oddly shaped but good)
// input we know of to POST /generate and checks the status and error body.
// None of the refused ones may reach the queue.
func TestBadInputSuite(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{MaxPromptBytes: 100, MaxBodyBytes: 1 << 20}})
	b := newTestBackend(2)
	s.startWorker(b, time.Second)
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	manyFields := "{" + strings.Repeat(`"f":1,`, 1000) + `"text":"echo:many"}`
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		want        string // the error message; "~part" matches a part; for 200 a part of the body
	}{
		{"missing text", "", `{}`, 400, "text field is required"},
		{"null text", "", `{"text":null}`, 400, "text field is required"},
		{"empty text", "", `{"text":""}`, 400, "text field is required"},
		{"other fields only", "", `{"prompt":"hi"}`, 400, "text field is required"},
		{"text a number", "", `{"text":42}`, 400, "text must be a string, not a number"},
		{"text an array", "", `{"text":["a"]}`, 400, "text must be a string, not an array"},
		{"text an object", "", `{"text":{"a":1}}`, 400, "text must be a string, not an object"},
		{"text a boolean", "", `{"text":true}`, 400, "text must be a string, not a boolean"},
		{"truncated JSON", "", `{"text":`, 400, "request body is not valid JSON: unexpected end of input"},
		{"not JSON", "", `text=hello`, 400, "~not valid JSON"},
		{"JSON with comments", "", `{"text":"a" /* c */}`, 400, "~not valid JSON"},
		{"bad escape", "", `{"text":"\x"}`, 400, "~not valid JSON"},
		{"single quotes", "", `{'text':'a'}`, 400, "~not valid JSON"},
		{"byte order mark", "", "\uFEFF{\"text\":\"a\"}", 400, "~not valid JSON"},
		{"an array body", "", `["text"]`, 400, "request body must be a JSON object"},
		{"a string body", "", `"text"`, 400, "request body must be a JSON object"},
		{"empty body", "", ``, 400, "request body is not valid JSON: unexpected end of input"},
		{"whitespace body", "", "  \n ", 400, "request body is not valid JSON: unexpected end of input"},
		{"trailing data", "", `{"text":"a"} {}`, 400, "request body has data after the JSON object"},
		{"duplicate text", "", `{"text":"a","text":"b"}`, 400, `field "text" appears more than once`},
		{"invalid UTF-8", "", "{\"text\":\"\xff\xfe\"}", 400, "request body is not valid UTF-8"},
		{"overlong UTF-8", "", "{\"text\":\"\xc0\xaf\"}", 400, "request body is not valid UTF-8"},
		{"NUL escaped", "", `{"text":"a\u0000b"}`, 400, "text must not contain NUL characters"},
		{"NUL raw", "", "{\"text\":\"a\x00b\"}", 400, "~not valid JSON"},
		{"prompt over the limit", "", `{"text":"` + strings.Repeat("a", 101) + `"}`, 400, "text is 101 bytes long; the limit is 100"},
		{"deeply nested JSON", "", `{"x":` + deep + `,"text":"a"}`, 400, "~exceeded max depth"},
		{"10 MB body", "", `{"text":"` + strings.Repeat("a", 10<<20) + `"}`, 413, "request body is over the limit of 1048576 bytes"},
		// Shapes that are odd but valid: served.
		{"unused fields", "", `{"text":"echo:x","max_tokens":5,"stream":true}`, 200, "X"},
		{"many fields", "", manyFields, 200, "MANY"},
		{"unicode text", "", `{"text":"echo:été 🦊"}`, 200, "ÉTÉ 🦊"},
		{"escaped unicode", "", `{"text":"echo:\u00e9"}`, 200, "É"},
		{"whitespace around", "", " \n{ \"text\" : \"echo:ws\" }\n", 200, "WS"},
		{"form content type, JSON body", "application/x-www-form-urlencoded", `{"text":"echo:form"}`, 200, "FORM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api.URL+"/generate", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r := response{status: resp.StatusCode, header: resp.Header, body: body}
			if r.status != tc.status || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("status = %d (%s), want %d; body %.200s", r.status, r.header.Get("Content-Type"), tc.status, r.body)
			}
			if tc.status == 200 {
				if !strings.Contains(string(r.body), tc.want) {
					t.Fatalf("body = %s, want it to contain %q", r.body, tc.want)
				}
				return
			}
			got := r.errorText(t)
			if want, part := strings.CutPrefix(tc.want, "~"); part && !strings.Contains(got, want) || !part && got != tc.want {
				t.Fatalf("error = %q, want %q", got, tc.want)
			}
		})
	}
	if n := b.calls.Load(); n != 6 {
		t.Fatalf("the backend ran %d jobs, want only the 6 good ones", n)
	}
}

// rawRequest writes raw bytes to the api and returns the status line and
// body of its answer.
func rawRequest(t *testing.T, s *stack, raw string, closeWrite bool) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", s.api.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestBadInputOnTheWire(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{MaxBodyBytes: 1000, ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: time.Second}})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)

	t.Run("Content-Length longer than the body", func(t *testing.T) {
		status, body := rawRequest(t, s, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"text\":\"a\"}", true)
		if status != 400 || !strings.Contains(body, "request body could not be read") {
			t.Fatalf("= %d %s", status, body)
		}
	})
	t.Run("Content-Length over the limit", func(t *testing.T) {
		status, body := rawRequest(t, s, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n{\"text\":\"", true)
		if status != 413 || !strings.Contains(body, "over the limit") {
			t.Fatalf("= %d %s", status, body)
		}
	})
	t.Run("chunked body over the limit", func(t *testing.T) {
		chunk := strings.Repeat("a", 800)
		raw := "POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk, len(chunk), chunk)
		if status, body := rawRequest(t, s, raw, false); status != 413 {
			t.Fatalf("= %d %s", status, body)
		}
	})
	t.Run("slow-loris headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.api.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		_, _ = io.WriteString(conn, "POST /generate HTTP/1.1\r\nHost: x\r\n")
		// Dribble a header byte every 200 ms; the server must hang up
		// after its header timeout instead of waiting forever.
		for i := 0; i < 50; i++ {
			time.Sleep(200 * time.Millisecond)
			if _, err := conn.Write([]byte("X")); err != nil {
				break
			}
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = io.ReadAll(conn)
		if took := time.Since(start); took > 5*time.Second || err != nil && !isConnClosed(err) {
			t.Fatalf("connection held %s (err %v)", took, err)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.api.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		_, _ = io.WriteString(conn, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n{\"text\":\"")
		for i := 0; i < 50; i++ {
			time.Sleep(100 * time.Millisecond)
			if _, err := conn.Write([]byte("a")); err != nil {
				break
			}
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		got, _ := io.ReadAll(conn)
		if took := time.Since(start); took > 6*time.Second {
			t.Fatalf("connection held %s", took)
		}
		if len(got) > 0 && !bytes.Contains(got, []byte("400")) {
			t.Fatalf("answer %q", got)
		}
	})
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("bad requests reached the backend %d times", n)
	}
}

func isConnClosed(err error) bool {
	return err == io.EOF || strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "closed")
}

func TestAPIKeys(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{APIKeys: []string{"k-one", "k-two"}}})
	s.startWorker(newTestBackend(1), time.Second)
	for _, tc := range []struct {
		header string
		status int
	}{
		{"", 401}, {"Bearer nope", 401}, {"k-one", 401}, {"Bearer k-one", 200}, {"Bearer k-two", 200}, {"Basic k-one", 401},
		{"bearer k-one", 200}, {"BEARER k-two", 200}, {"Bearer k-on", 401}, {"Bearer k-one-and-more", 401},
	} {
		req, _ := http.NewRequest(http.MethodPost, s.api.URL+"/generate", strings.NewReader(`{"text":"echo:k"}`))
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("Authorization %q = %d, want %d", tc.header, resp.StatusCode, tc.status)
		}
	}
	// Probes stay open.
	if r := s.get("/readiness"); r.status != 200 {
		t.Fatalf("readiness with keys = %d", r.status)
	}
}

// TestRefusedBodyIsReadBeforeTheAnswer plays a client that writes its whole
// body before it reads (Python's urllib does): a body the api refuses must
// still be read, or closing the connection with unread bytes resets it and
// the client sees ECONNRESET in place of the 413 or 401. The body is paced
// to last a second, longer than net/http waits before it closes a
// connection it stopped reading, as a client on a real network would.
func TestRefusedBodyIsReadBeforeTheAnswer(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{MaxBodyBytes: 1000, APIKeys: []string{"k"}}})
	const size = 2 << 20
	body := `{"text":"` + strings.Repeat("a", size) + `"}`
	var chunked strings.Builder
	for rest := body; rest != ""; {
		n := min(len(rest), 64<<10)
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", n, rest[:n])
		rest = rest[n:]
	}
	chunked.WriteString("0\r\n\r\n")
	for _, tc := range []struct {
		name, head, body string
		status           int
	}{
		{"Content-Length over the limit", "Authorization: Bearer k\r\nContent-Length: " + strconv.Itoa(len(body)), body, 413},
		{"chunked over the limit", "Authorization: Bearer k\r\nTransfer-Encoding: chunked", chunked.String(), 413},
		{"no API key", "Content-Length: " + strconv.Itoa(len(body)), body, 401},
		{"lowercase bearer, over the limit", "Authorization: bearer k\r\nContent-Length: " + strconv.Itoa(len(body)), body, 413},
		// The client waits for "100 Continue" before its body: none comes,
		// the answer does, and nothing is read.
		{"Expect: 100-continue", "Authorization: Bearer k\r\nExpect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)), "", 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", s.api.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			_ = conn.(*net.TCPConn).SetWriteBuffer(64 << 10)
			raw := "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + tc.head + "\r\n\r\n" + tc.body
			for rest := raw; rest != ""; {
				n := min(len(rest), 64<<10)
				if _, err := io.WriteString(conn, rest[:n]); err != nil {
					t.Fatalf("writing the request: %v", err)
				}
				rest = rest[n:]
				time.Sleep(30 * time.Millisecond)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("= %d (close %v), want %d with Connection: close", resp.StatusCode, resp.Close, tc.status)
			}
			var e struct{ Error string }
			if err := json.Unmarshal(got, &e); err != nil || e.Error == "" {
				t.Fatalf("body %q is not a JSON error", got)
			}
		})
	}
}
