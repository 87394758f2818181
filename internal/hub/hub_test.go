package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genq/genq/internal/hub"
	"github.com/genq/genq/internal/hub/hubtest"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		include, exclude []string
		name             string
		want             bool
	}{
		{nil, nil, "any/file", true},
		{nil, []string{"*.bin"}, "pytorch_model.bin", false},
		{nil, []string{"*.bin"}, "sub/dir/model.bin", false}, // * crosses '/', as in the hub's client
		{nil, []string{"*.pt"}, "model.pth", true},
		{[]string{"*.gguf"}, nil, "a/b.gguf", true},
		{[]string{"*.gguf"}, nil, "b.gguf.part", false},
		{[]string{"onnx/"}, nil, "onnx/unet/model.onnx", true},
		{[]string{"onnx/"}, nil, "onnx.json", false},
		{[]string{"model-?.json"}, nil, "model-1.json", true},
		{[]string{"model-[0-9].json"}, nil, "model-x.json", false},
		{[]string{"model-[!0-9].json"}, nil, "model-x.json", true},
		{[]string{"*-Q4_K_M.gguf"}, nil, "Meta-Llama-3.1-70B-Instruct-Q4_K_M.gguf", true},
		{[]string{"*-Q4_K_M.gguf"}, nil, "Meta-Llama-3.1-70B-Instruct-IQ4_K_M.gguf", false},
		{[]string{"*-Q4_K_M.gguf"}, nil, "Meta-Llama-3.1-70B-Instruct-Q4_K_L.gguf", false},
		{[]string{"modèle*.json"}, nil, "modèle-1.json", true},
		{[]string{"a.b"}, nil, "axb", false}, // '.' is literal
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v-%v-%s", tt.include, tt.exclude, tt.name), func(t *testing.T) {
			f, err := hub.NewFilter(tt.include, tt.exclude)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Match(tt.name); got != tt.want {
				t.Errorf("Match(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
	if _, err := hub.NewFilter([]string{"[a-"}, nil); err == nil {
		t.Error("a malformed pattern was accepted")
	}
}

func TestIsSafePath(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"config.json", true},
		{"onnx/unet/model.onnx", true},
		{".gitattributes", true},
		{"a..b/c", true},
		{"", false},
		{"..", false},
		{"../x", false},
		{"a/../../x", false},
		{"a/..", false},
		{"/etc/passwd", false},
		{"./x", false},
		{"a//b", false},
		{"a/", false},
		{`..\x`, false},
		{"a\x00b", false},
		{"a\nb", false},
		{hub.ManifestName, false},
		{".genq-download/abc.part", false},
	}
	for _, tt := range tests {
		if got := hub.IsSafePath(tt.name); got != tt.want {
			t.Errorf("IsSafePath(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTokenNeverFormats(t *testing.T) {
	tok := hub.NewToken(" " + testToken + "\n")
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "token", tok)
	js, _ := json.Marshal(struct{ T hub.Token }{tok})
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s %q", tok, tok, tok, tok, tok), logged.String(), string(js)} {
		if strings.Contains(s, testToken) {
			t.Errorf("the token shows in %q", s)
		}
	}
}

func TestLoadToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hf_token")
	if err := os.WriteFile(file, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		env        map[string]string
		file       string
		wantSource string
		wantEmpty  bool
		wantErr    bool
	}{
		{"HF_TOKEN first", map[string]string{"HF_TOKEN": "a", "MODEL_HUB_TOKEN": "b"}, file, "$HF_TOKEN", false, false},
		{"the hub's older name", map[string]string{"HUGGING_FACE_HUB_TOKEN": "a"}, "", "$HUGGING_FACE_HUB_TOKEN", false, false},
		{"genq's own name", map[string]string{"MODEL_HUB_TOKEN": "b"}, "", "$MODEL_HUB_TOKEN", false, false},
		{"a secret file", nil, file, "file " + file, false, false},
		{"none", nil, "", "none (anonymous)", true, false},
		{"a missing file", nil, file + ".missing", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, source, err := hub.LoadToken(func(k string) string { return tt.env[k] }, tt.file)
			if (err != nil) != tt.wantErr || source != tt.wantSource || tok.Empty() != tt.wantEmpty {
				t.Errorf("got source %q empty %v err %v", source, tok.Empty(), err)
			}
		})
	}
}

// TestTokenNotSentToASubdomainCDN puts the CDN at cdn.<hub host>. net/http's
// own redirect rule would forward Authorization there (a subdomain); the
// client must not.
func TestTokenNotSentToASubdomainCDN(t *testing.T) {
	s := newHub(t, modelFiles())
	hubAddr, cdnAddr := s.Hub.Listener.Addr().String(), s.CDN.Listener.Addr().String()
	_, cdnPort, _ := net.SplitHostPort(cdnAddr)
	_, hubPort, _ := net.SplitHostPort(hubAddr)
	s.CDNURL = "http://cdn.hub.test:" + cdnPort
	dialer := &net.Dialer{}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch addr {
		case "hub.test:" + hubPort:
			addr = hubAddr
		case "cdn.hub.test:" + cdnPort:
			addr = cdnAddr
		}
		return dialer.DialContext(ctx, network, addr)
	}}
	c, err := hub.NewClient("http://hub.test:"+hubPort, hub.NewToken(testToken), hub.ClientOptions{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		t.Fatal(err)
	}
	opts := options(t.TempDir())
	opts.Include = []string{"*.gguf"}
	if _, err := c.Download(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	assertTokenOnlyOnHub(t, s)
}

func TestRefusesRedirectToPlainHTTP(t *testing.T) {
	s := hubtest.New(t) // no token needed: the proxy would not forward it
	s.AddRepo(hubtest.Repo{ID: "org/model", Files: modelFiles()})
	// A hub over TLS whose CDN is plain HTTP: the pre-signed URL would travel in clear.
	secure := newTLSRedirector(t, s.Hub.URL)
	c, err := hub.NewClient(secure.URL, hub.Token{}, hub.ClientOptions{HTTPClient: secure.Client(), Retry: hub.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.FileMetadata(context.Background(), "org/model", "main", "model-Q8_0.gguf")
	if err != nil {
		t.Fatalf("HEAD should stop at the redirect, not follow it: %v", err)
	}
	opts := options(t.TempDir())
	opts.Include = []string{"*.gguf"}
	_, err = c.Download(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "refusing a redirect from https") || strings.Contains(err.Error(), "X-Amz-Signature") {
		t.Fatalf("err = %v, want a refused downgrade that does not show the signature", err)
	}
}

func TestNewClientRejectsBadEndpoints(t *testing.T) {
	for _, e := range []string{"ftp://hub", "hub.example", "http://"} {
		if _, err := hub.NewClient(e, hub.Token{}, hub.ClientOptions{}); err == nil {
			t.Errorf("endpoint %q accepted", e)
		}
	}
	c, err := hub.NewClient("", hub.Token{}, hub.ClientOptions{})
	if err != nil || c.Endpoint() != hub.DefaultEndpoint {
		t.Errorf("empty endpoint: %v %v", c, err)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 42_500_000_000: "42.5 GB", -1: "size unknown"} {
		if got := hub.FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// newTLSRedirector serves the hub's answers over TLS, redirects included,
// which still point at the plain-HTTP CDN.
func newTLSRedirector(t *testing.T, hubURL string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(hubURL)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the client's refusal ends handshakes abruptly
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestErrorsHideThePresignedQuery(t *testing.T) {
	s := newHub(t, modelFiles())
	s.CDNURL = "http://127.0.0.1:1" // nothing listens: the transport fails
	c, err := hub.NewClient(s.Hub.URL, hub.NewToken(testToken), hub.ClientOptions{Retry: hub.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	opts := options(t.TempDir())
	opts.Include = []string{"*.gguf"}
	_, err = c.Download(context.Background(), opts)
	if err == nil || strings.Contains(err.Error(), "X-Amz-Signature") {
		t.Fatalf("err = %v: want a failure that does not show the signature", err)
	}
}
