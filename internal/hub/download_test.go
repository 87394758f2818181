package hub_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/hub"
	"github.com/genq/genq/internal/hub/hubtest"
)

const testToken = "hf_test_token_do_not_leak"

// payload is deterministic content of n bytes, different per seed.
func payload(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// modelFiles is a repository as the hub holds one: small git files, large
// LFS weights, and the pickles DefaultExcludes skips.
func modelFiles() []hubtest.File {
	return []hubtest.File{
		{Path: ".gitattributes", Data: []byte("*.gguf filter=lfs\n")},
		{Path: "README.md", Data: []byte("# test model\n")},
		{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)},
		{Path: "model-Q4_K_M.gguf", Data: payload(1, 300_000), LFS: true},
		{Path: "model-Q8_0.gguf", Data: payload(2, 200_000), LFS: true},
		{Path: "onnx/unet/model.onnx.data", Data: payload(3, 150_000), LFS: true},
		{Path: "pytorch_model.bin", Data: payload(4, 1000), LFS: true},
		{Path: "training/optimizer.pt", Data: payload(5, 1000), LFS: true},
	}
}

func newHub(t *testing.T, files []hubtest.File) *hubtest.Server {
	t.Helper()
	s := hubtest.New(t)
	s.Token = testToken
	s.AddRepo(hubtest.Repo{ID: "org/model", Files: files, Gated: true})
	return s
}

func newClient(t *testing.T, s *hubtest.Server, token string) *hub.Client {
	t.Helper()
	c, err := hub.NewClient(s.Hub.URL, hub.NewToken(token), hub.ClientOptions{
		Retry: hub.RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func options(dir string) hub.Options {
	return hub.Options{Repo: "org/model", Dir: dir, Exclude: hub.DefaultExcludes(), Parallel: 3}
}

// tree returns the regular files under dir, slash-separated, without the
// manifest.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			if rel != hub.ManifestName {
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertContent(t *testing.T, dir string, files []hubtest.File, want []string) {
	t.Helper()
	got := tree(t, dir)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files on disk:\n got %q\nwant %q", got, want)
	}
	for _, f := range files {
		for _, w := range want {
			if f.Path != w {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(w)))
			if err != nil || !bytes.Equal(b, f.Data) {
				t.Errorf("%s: content differs from the hub's (err %v)", w, err)
			}
		}
	}
}

func TestDownloadFetchesTheSnapshot(t *testing.T) {
	wantFiles := []string{".gitattributes", "README.md", "config.json", "model-Q4_K_M.gguf", "model-Q8_0.gguf", "onnx/unet/model.onnx.data"}
	tests := []struct {
		name  string
		setup func(*hubtest.Server)
	}{
		{"tree API", func(*hubtest.Server) {}},
		{"tree API in pages", func(s *hubtest.Server) { s.PageSize = 2 }},
		{"tree API only", func(s *hubtest.Server) { s.NoRevision = true }},
		{"revision API only", func(s *hubtest.Server) { s.NoTree = true }},
		{"names only, sizes by HEAD", func(s *hubtest.Server) { s.NoTree, s.NoBlobs = true, true }},
		{"names only, no HEAD either", func(s *hubtest.Server) { s.NoTree, s.NoBlobs, s.NoHead = true, true, true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := modelFiles()
			s := newHub(t, files)
			tt.setup(s)
			dir := t.TempDir()
			res, err := newClient(t, s, testToken).Download(context.Background(), options(dir))
			if err != nil {
				t.Fatal(err)
			}
			assertContent(t, dir, files, wantFiles)
			if res.Downloaded != len(wantFiles) || res.Excluded != 2 {
				t.Errorf("downloaded %d, excluded %d; want %d and 2", res.Downloaded, res.Excluded, len(wantFiles))
			}
			assertManifest(t, dir, files, wantFiles)
			assertTokenOnlyOnHub(t, s)
			if heads := countMethod(s, http.MethodHead); heads > 0 && s.NoHead && heads != 1 {
				t.Errorf("%d HEADs to a hub that does not answer HEAD, want 1", heads)
			}
			if _, err := os.Stat(filepath.Join(dir, ".genq-download")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("staging directory left behind: %v", err)
			}
		})
	}
}

func countMethod(s *hubtest.Server, method string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == method {
			n++
		}
	}
	return n
}

func assertManifest(t *testing.T, dir string, files []hubtest.File, want []string) {
	t.Helper()
	m, err := hub.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Repo != "org/model" || m.Revision != "main" || len(m.Commit) != 40 {
		t.Errorf("manifest says %s@%s commit %q", m.Repo, m.Revision, m.Commit)
	}
	if len(m.Files) != len(want) {
		t.Fatalf("manifest has %d files, want %d", len(m.Files), len(want))
	}
	byPath := map[string]hubtest.File{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	for _, mf := range m.Files {
		f := byPath[mf.Path]
		if mf.Size != int64(len(f.Data)) || mf.SHA256 != hubtest.SHA256(f.Data) || mf.LFS != f.LFS {
			t.Errorf("manifest entry %+v does not describe the hub's file", mf)
		}
	}
}

// assertTokenOnlyOnHub checks that the hub saw the token on every request
// and that the CDN, a different host, never did.
func assertTokenOnlyOnHub(t *testing.T, s *hubtest.Server) {
	t.Helper()
	var cdn int
	for _, r := range s.Requests() {
		switch r.Host {
		case "hub":
			if r.Authorization != "Bearer "+testToken {
				t.Errorf("hub %s %s without the token (Authorization %q)", r.Method, r.Path, r.Authorization)
			}
		case "cdn":
			cdn++
			if r.Authorization != "" {
				t.Errorf("the CDN received Authorization on %s %s", r.Method, r.Path)
			}
		}
	}
	if cdn == 0 {
		t.Error("no request reached the CDN: the redirect was not followed")
	}
}

func TestDownloadSelectsByPattern(t *testing.T) {
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
		wantErr          error
	}{
		{"one quantisation", []string{"*-Q4_K_M.gguf"}, nil, []string{"model-Q4_K_M.gguf"}, nil},
		{"star crosses slashes", []string{"*.onnx.data", "*.json"}, nil, []string{"config.json", "onnx/unet/model.onnx.data"}, nil},
		{"a directory", []string{"onnx/"}, nil, []string{"onnx/unet/model.onnx.data"}, nil},
		{"exclude wins", []string{"*.gguf"}, []string{"*Q8_0*"}, []string{"model-Q4_K_M.gguf"}, nil},
		{"default excludes", []string{"*.bin", "*.pt", "*.json"}, hub.DefaultExcludes(), []string{"config.json"}, nil},
		{"nothing selected", []string{"*.safetensors"}, nil, nil, hub.ErrNothingSelected},
		{"all excluded", []string{"*.bin"}, []string{"*.bin"}, nil, hub.ErrNothingSelected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := modelFiles()
			s := newHub(t, files)
			dir := t.TempDir()
			opts := options(dir)
			opts.Include, opts.Exclude = tt.include, tt.exclude
			_, err := newClient(t, s, testToken).Download(context.Background(), opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			assertContent(t, dir, files, tt.want)
		})
	}
}

func TestDownloadErrors(t *testing.T) {
	tests := []struct {
		name     string
		repo     hubtest.Repo
		token    string
		revision string
		wantErr  error
		wantText string
	}{
		{"gated without token", hubtest.Repo{ID: "org/model", Gated: true}, "", "", hub.ErrAccessDenied, "accept the model's licence on its hub page and check your token"},
		{"only the files gated", hubtest.Repo{ID: "org/model", GatedFiles: true}, "", "", hub.ErrAccessDenied, "accept the model's licence on its hub page and check your token"},
		{"gated with a wrong token", hubtest.Repo{ID: "org/model", Gated: true}, "hf_wrong", "", hub.ErrAccessDenied, "HTTP 403"},
		{"private without token", hubtest.Repo{ID: "org/model", Private: true}, "", "", hub.ErrAccessDenied, "HTTP 401"},
		{"unknown repository", hubtest.Repo{ID: "org/other"}, testToken, "", hub.ErrNotFound, "repository org/model"},
		{"unknown revision", hubtest.Repo{ID: "org/model"}, testToken, "v9", hub.ErrNotFound, `revision "v9" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := hubtest.New(t)
			s.Token = testToken
			tt.repo.Files = modelFiles()
			s.AddRepo(tt.repo)
			dir := t.TempDir()
			opts := options(dir)
			opts.Revision = tt.revision
			_, err := newClient(t, s, tt.token).Download(context.Background(), opts)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("err = %v\nwant %v containing %q", err, tt.wantErr, tt.wantText)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Error("the error shows the token")
			}
			if got := tree(t, dir); len(got) != 0 {
				t.Errorf("files written despite the error: %q", got)
			}
		})
	}
}

func TestDownloadRefusesUnsafeNames(t *testing.T) {
	names := []string{"../escaped.txt", "/etc/escaped.txt", "sub/../../escaped.txt", `..\escaped.txt`, "./config2.json", "genq-model.json", ".genq-download/x.part"}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			files := append(modelFiles()[:3], hubtest.File{Path: name, Data: []byte("evil")})
			s := newHub(t, files)
			parent := t.TempDir()
			dir := filepath.Join(parent, "a", "model")
			res, err := newClient(t, s, testToken).Download(context.Background(), options(dir))
			if !errors.Is(err, hub.ErrUnsafePath) {
				t.Fatalf("err = %v, want ErrUnsafePath", err)
			}
			if len(res.Refused) != 1 || res.Refused[0] != name {
				t.Errorf("refused %q, want [%q]", res.Refused, name)
			}
			assertContent(t, dir, files, []string{".gitattributes", "README.md", "config.json"})
			assertNoFileNamed(t, parent, "escaped.txt")
			assertNoFileNamed(t, "/etc", "escaped.txt")
		})
	}
}

func assertNoFileNamed(t *testing.T, dir, name string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			t.Errorf("%s was written", p)
		}
		if err != nil && d != nil && d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
}

func TestDownloadRefusesToFollowASymlinkOut(t *testing.T) {
	tests := []struct {
		name        string
		target      func(outside string) string
		wantRefused bool
	}{
		{"absolute", func(outside string) string { return outside }, true},
		{"relative", func(outside string) string { return filepath.Join("..", filepath.Base(outside)) }, true},
		{"inside the directory", func(string) string { return "real" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := []hubtest.File{{Path: "link/escaped.json", Data: []byte("{}")}, {Path: "config.json", Data: []byte("{}")}}
			s := newHub(t, files)
			parent := t.TempDir()
			outside, dir := filepath.Join(parent, "outside"), filepath.Join(parent, "model")
			for _, d := range []string{outside, filepath.Join(dir, "real")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(tt.target(outside), filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			res, err := newClient(t, s, testToken).Download(context.Background(), options(dir))
			if tt.wantRefused && (!errors.Is(err, hub.ErrUnsafePath) || len(res.Refused) != 1 || res.Refused[0] != "link/escaped.json") {
				t.Fatalf("err = %v, refused %q: want link/escaped.json refused", err, res.Refused)
			}
			if !tt.wantRefused && err != nil {
				t.Fatalf("a symlink inside the directory was refused: %v", err)
			}
			assertNoFileNamed(t, outside, "escaped.json")
			if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
				t.Errorf("the safe file was not fetched: %v", err)
			}
		})
	}
}

func TestDownloadResumesAnInterruptedTransfer(t *testing.T) {
	files := modelFiles()
	const big = "model-Q4_K_M.gguf"
	const cut = 100_000
	s := newHub(t, files)
	s.SetFault(big, hubtest.Fault{CutAfter: cut})
	dir := t.TempDir()
	c, err := hub.NewClient(s.Hub.URL, hub.NewToken(testToken), hub.ClientOptions{Retry: hub.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	opts := options(dir)
	opts.Include = []string{big}
	if _, err := c.Download(context.Background(), opts); err == nil {
		t.Fatal("an interrupted transfer succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, big)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a partial file is in place: %v", err)
	}

	res, err := newClient(t, s, testToken).Download(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	assertContent(t, dir, files, []string{big})
	gets := s.ContentGETs()
	last := gets[len(gets)-1]
	if last.Range != "bytes=100000-" || last.Status != 206 {
		t.Errorf("the second run asked %q and got %d, want a 206 from bytes=100000-", last.Range, last.Status)
	}
	if want := int64(len(files[3].Data) - cut); res.DownloadedBytes != want {
		t.Errorf("the second run received %d bytes, want the %d that were missing", res.DownloadedBytes, want)
	}
}

func TestDownloadRetries(t *testing.T) {
	tests := []struct {
		name  string
		fault hubtest.Fault
	}{
		{"5xx", hubtest.Fault{FailStatus: 503, FailTimes: 2}},
		{"429", hubtest.Fault{FailStatus: 429, FailTimes: 1}},
		{"connection dropped mid-file", hubtest.Fault{CutAfter: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := modelFiles()
			s := newHub(t, files)
			s.SetFault("model-Q8_0.gguf", tt.fault)
			s.SetFault("config.json", tt.fault)
			dir := t.TempDir()
			opts := options(dir)
			opts.Include = []string{"model-Q8_0.gguf", "config.json"}
			if _, err := newClient(t, s, testToken).Download(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
			assertContent(t, dir, files, []string{"config.json", "model-Q8_0.gguf"})
		})
	}
}

func TestDownloadRejectsCorruptContent(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*hubtest.Server)
	}{
		{"sha256 from the listing", func(*hubtest.Server) {}},
		{"sha256 from the redirect's X-Linked-Etag", func(s *hubtest.Server) { s.NoTree, s.NoBlobs, s.NoHead = true, true, true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := modelFiles()
			s := newHub(t, files)
			tt.setup(s)
			s.SetFault("model-Q8_0.gguf", hubtest.Fault{Corrupt: true})
			dir := t.TempDir()
			opts := options(dir)
			opts.Include = []string{"*.gguf"}
			opts.Parallel = 1
			_, err := newClient(t, s, testToken).Download(context.Background(), opts)
			if !errors.Is(err, hub.ErrIntegrity) || !strings.Contains(err.Error(), "model-Q8_0.gguf") {
				t.Fatalf("err = %v, want ErrIntegrity naming the file", err)
			}
			for _, f := range tree(t, dir) {
				if f != "model-Q4_K_M.gguf" {
					t.Errorf("%s left behind after a hash mismatch", f)
				}
			}
			if _, err := hub.ReadManifest(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a manifest was written for an incomplete download: %v", err)
			}
		})
	}
}

func TestDownloadStartsOverWhenAResumedFileIsWrong(t *testing.T) {
	files := modelFiles()
	s := newHub(t, files)
	s.SetFault("model-Q8_0.gguf", hubtest.Fault{CutAfter: 5000})
	dir := t.TempDir()
	opts := options(dir)
	opts.Include = []string{"model-Q8_0.gguf"}
	once, err := hub.NewClient(s.Hub.URL, hub.NewToken(testToken), hub.ClientOptions{Retry: hub.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := once.Download(context.Background(), opts); err == nil {
		t.Fatal("an interrupted transfer succeeded")
	}
	// Spoil the partial file, as a crash or another revision's bytes would.
	parts, _ := filepath.Glob(filepath.Join(dir, ".genq-download", "*.part"))
	if len(parts) != 1 {
		t.Fatalf("partial files: %q, want one", parts)
	}
	if err := os.WriteFile(parts[0], bytes.Repeat([]byte{0xee}, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, s, testToken).Download(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	assertContent(t, dir, files, []string{"model-Q8_0.gguf"})
	var ranged, whole int
	for _, r := range s.ContentGETs() {
		if r.Host != "cdn" {
			continue
		}
		if r.Range != "" {
			ranged++
		} else {
			whole++
		}
	}
	if ranged != 1 || whole != 2 {
		t.Errorf("%d ranged and %d whole GETs, want the resume then a fresh start (1 and 2)", ranged, whole)
	}
}

func TestDownloadSameContentAtTwoPaths(t *testing.T) {
	same := payload(7, 120_000)
	files := []hubtest.File{
		{Path: "text_encoder/model.onnx.data", Data: same, LFS: true},
		{Path: "text_encoder_2/model.onnx.data", Data: same, LFS: true},
	}
	s := newHub(t, files)
	dir := t.TempDir()
	if _, err := newClient(t, s, testToken).Download(context.Background(), options(dir)); err != nil {
		t.Fatal(err)
	}
	assertContent(t, dir, files, []string{"text_encoder/model.onnx.data", "text_encoder_2/model.onnx.data"})
}

func TestDownloadRerunFetchesNothing(t *testing.T) {
	tests := []struct {
		name   string
		before func(t *testing.T, dir string)
		hub    func(s *hubtest.Server)
	}{
		{"with the manifest", func(*testing.T, string) {}, nil},
		{"names-only listing: sizes from the manifest", func(*testing.T, string) {}, func(s *hubtest.Server) { s.NoTree, s.NoBlobs = true, true }},
		{"tree-only listing: the commit from X-Repo-Commit", func(*testing.T, string) {}, func(s *hubtest.Server) { s.NoRevision = true }},
		{"without the manifest: files are hashed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, hub.ManifestName)); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := modelFiles()
			s := newHub(t, files)
			if tt.hub != nil {
				tt.hub(s)
			}
			dir := t.TempDir()
			c := newClient(t, s, testToken)
			first, err := c.Download(context.Background(), options(dir))
			if err != nil {
				t.Fatal(err)
			}
			manifest, _ := os.ReadFile(filepath.Join(dir, hub.ManifestName))
			tt.before(t, dir)
			fetched, requests := len(s.ContentGETs()), len(s.Requests())

			res, err := c.Download(context.Background(), options(dir))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(s.ContentGETs()) - fetched; n != 0 || res.Downloaded != 0 || res.DownloadedBytes != 0 {
				t.Errorf("the rerun fetched %d files (%d bytes)", n, res.DownloadedBytes)
			}
			if res.Skipped != first.Downloaded {
				t.Errorf("skipped %d, want %d", res.Skipped, first.Downloaded)
			}
			for _, r := range s.Requests()[requests:] {
				if strings.Contains(r.Path, "/resolve/") || r.Host == "cdn" {
					t.Errorf("the rerun sent %s %s", r.Method, r.Path)
				}
			}
			after, _ := os.ReadFile(filepath.Join(dir, hub.ManifestName))
			if tt.name != "without the manifest: files are hashed" && !bytes.Equal(after, manifest) {
				t.Error("an idempotent rerun rewrote the manifest")
			}
		})
	}
}

func TestDownloadFollowsANewCommit(t *testing.T) {
	files := modelFiles()
	s := newHub(t, files)
	dir := t.TempDir()
	opts := options(dir)
	opts.Include = []string{"*.gguf", "*.json"}
	if _, err := newClient(t, s, testToken).Download(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	// A new commit changes a weight file and a config of the same size.
	updated := modelFiles()
	updated[2].Data = []byte(`{"model_type":"mixtr"}`)
	updated[4].Data = payload(8, 210_000)
	s.AddRepo(hubtest.Repo{ID: "org/model", Commit: strings.Repeat("b", 40), Files: updated, Gated: true})
	s.SetFault("model-Q8_0.gguf", hubtest.Fault{CutAfter: 1000})
	once, err := hub.NewClient(s.Hub.URL, hub.NewToken(testToken), hub.ClientOptions{Retry: hub.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := once.Download(context.Background(), opts); err == nil {
		t.Fatal("an interrupted transfer succeeded")
	}
	if _, err := hub.ReadManifest(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the old manifest survived a half-done update: %v", err)
	}

	res, err := newClient(t, s, testToken).Download(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	assertContent(t, dir, updated, []string{"config.json", "model-Q4_K_M.gguf", "model-Q8_0.gguf"})
	m, err := hub.ReadManifest(dir)
	if err != nil || m.Commit != strings.Repeat("b", 40) {
		t.Fatalf("manifest %+v, %v: want the new commit", m, err)
	}
	if res.Skipped != 1 {
		t.Errorf("skipped %d files, want the unchanged one", res.Skipped)
	}
}

func TestDownloadReplacesAFileThatChanged(t *testing.T) {
	files := modelFiles()
	s := newHub(t, files)
	dir := t.TempDir()
	c := newClient(t, s, testToken)
	opts := options(dir)
	opts.Include = []string{"*.gguf"}
	if _, err := c.Download(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "model-Q8_0.gguf")
	if err := os.WriteFile(target, payload(9, len(files[4].Data)), 0o644); err != nil { // same size, other bytes
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, hub.ManifestName)); err != nil {
		t.Fatal(err)
	}
	res, err := c.Download(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Downloaded != 1 {
		t.Errorf("downloaded %d files, want the 1 that changed", res.Downloaded)
	}
	assertContent(t, dir, files, []string{"model-Q4_K_M.gguf", "model-Q8_0.gguf"})
}

func TestDownloadChecksDiskSpaceFirst(t *testing.T) {
	s := newHub(t, modelFiles())
	dir := t.TempDir()
	opts := options(dir)
	opts.FreeSpace = func(string) (uint64, error) { return 1000, nil }
	_, err := newClient(t, s, testToken).Download(context.Background(), opts)
	if !errors.Is(err, hub.ErrNoSpace) {
		t.Fatalf("err = %v, want ErrNoSpace", err)
	}
	if n := len(s.ContentGETs()); n != 0 {
		t.Errorf("%d files were fetched before the space check failed", n)
	}
}

func TestReadManifestMissing(t *testing.T) {
	_, err := hub.ReadManifest(t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}
