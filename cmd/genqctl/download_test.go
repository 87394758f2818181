package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/hub"
	"github.com/genq/genq/internal/hub/hubtest"
)

const downloadTestToken = "hf_cli_secret_token"

func downloadTestHub(t *testing.T) *hubtest.Server {
	t.Helper()
	s := hubtest.New(t)
	s.Token = downloadTestToken
	s.AddRepo(hubtest.Repo{ID: "acme/tiny", Gated: true, Files: []hubtest.File{
		{Path: "config.json", Data: []byte(`{"a":1}`)},
		{Path: "model.gguf", Data: bytes.Repeat([]byte("w"), 50_000), LFS: true},
		{Path: "pytorch_model.bin", Data: []byte("pickle"), LFS: true},
		{Path: "ckpt/last.pt", Data: []byte("pickle"), LFS: true},
	}})
	s.AddRepo(hubtest.Repo{ID: "acme/gated-files", GatedFiles: true, Files: []hubtest.File{
		{Path: "model.gguf", Data: []byte("weights"), LFS: true},
	}})
	return s
}

// runDownloadCLI runs "genqctl download args…" as main does, and returns
// its exit status and output.
func runDownloadCLI(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env{getenv: func(k string) string { return vars[k] }, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	err := run(context.Background(), append([]string{"download"}, args...), e)
	if err != nil {
		code = exitCode(err)
		errOut.WriteString("genqctl: " + err.Error() + "\n")
	}
	return code, out.String(), errOut.String()
}

func TestDownloadCommand(t *testing.T) {
	s := downloadTestHub(t)
	dir := t.TempDir()
	vars := map[string]string{"HF_ENDPOINT": s.Hub.URL, "MODEL_HUB_TOKEN": downloadTestToken}
	args := []string{"--variant", "B", "--repo", "acme/tiny", "--dir", dir}

	code, out, errOut := runDownloadCLI(t, vars, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"get    model.gguf", "done   config.json", "summary: downloaded 2 files", "model: acme/tiny at commit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"config.json", hub.ManifestName, "model.gguf"}; !slices.Equal(names, want) {
		t.Errorf("directory holds %q, want %q", names, want)
	}
	if strings.Contains(out+errOut, downloadTestToken) {
		t.Error("the token was printed")
	}

	code, out, _ = runDownloadCLI(t, vars, args...)
	if code != 0 || !strings.Contains(out, "downloaded 0 files") || !strings.Contains(out, "skipped 2 complete files") {
		t.Errorf("rerun: exit %d\n%s", code, out)
	}
}

func TestDownloadCommandFailures(t *testing.T) {
	s := downloadTestHub(t)
	tests := []struct {
		name     string
		vars     map[string]string
		args     []string
		wantCode int
		wantText string
	}{
		{"gated without token", map[string]string{"HF_ENDPOINT": s.Hub.URL},
			[]string{"--variant", "B", "--repo", "acme/tiny"}, 1, "accept the model's licence on its hub page and check your token"},
		{"files gated, wrong token", map[string]string{"HF_ENDPOINT": s.Hub.URL, "HF_TOKEN": "hf_wrong"},
			[]string{"--variant", "B", "--repo", "acme/gated-files"}, 1, "accept the model's licence on its hub page and check your token"},
		{"unknown repository", map[string]string{"HF_ENDPOINT": s.Hub.URL, "HF_TOKEN": downloadTestToken},
			[]string{"--variant", "B", "--repo", "acme/nothing"}, 1, "not found"},
		{"no variant", nil, nil, 2, "usage"},
		{"bad variant", nil, []string{"--variant", "Z"}, 2, "unknown variant"},
		{"bad progress", nil, []string{"--variant", "A", "--progress", "fancy"}, 2, "--progress"},
		{"nothing selected", map[string]string{"HF_ENDPOINT": s.Hub.URL, "HF_TOKEN": downloadTestToken},
			[]string{"--variant", "B", "--repo", "acme/tiny", "--include", "*.safetensors"}, 1, "matches include"},
		{"missing token file", map[string]string{"HF_ENDPOINT": s.Hub.URL}, []string{"--variant", "A", "--token-file", "/nonexistent/token"}, 1, "token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--dir", t.TempDir()}, tt.args...)
			code, out, errOut := runDownloadCLI(t, tt.vars, args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantText) {
				t.Errorf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, tt.wantText, out, errOut)
			}
		})
	}
}

func TestDownloadOptions(t *testing.T) {
	presetB, _ := hub.VariantPreset(genq.VariantB)
	tests := []struct {
		name        string
		vars        map[string]string
		args        []string
		wantRepo    string
		wantDir     string
		wantInclude []string
		wantExclude []string
	}{
		{"variant defaults", nil, []string{"--variant", "b"}, presetB.Repo, filepath.Join("models", "B"), presetB.Include, []string{"*.pt", "*.bin"}},
		{"in a container", map[string]string{"GENQ_IN_CONTAINER": "1"}, []string{"--variant", "B"}, presetB.Repo, "/models", presetB.Include, []string{"*.pt", "*.bin"}},
		{"another repository has no default includes", nil, []string{"--variant", "B", "--repo", "x/y"}, "x/y", filepath.Join("models", "B"), nil, []string{"*.pt", "*.bin"}},
		{"flags", nil, []string{"--variant", "C", "--repo", "x/y", "--dir", "d", "--include", "*.onnx", "--include", "*.json", "--exclude", "*.png"},
			"x/y", "d", []string{"*.onnx", "*.json"}, []string{"*.pt", "*.bin", "*.png"}},
		{"environment", map[string]string{"GENQ_INCLUDE": "*.gguf, *.json", "GENQ_EXCLUDE": "*.md", "GENQ_MODEL_REPO": "x/y"}, []string{"--variant", "A"},
			"x/y", filepath.Join("models", "A"), []string{"*.gguf", "*.json"}, []string{"*.pt", "*.bin", "*.md"}},
		{"flag replaces environment", map[string]string{"GENQ_INCLUDE": "*.gguf"}, []string{"--variant", "A", "--repo", "x/y", "--include", "*.json"},
			"x/y", filepath.Join("models", "A"), []string{"*.json"}, []string{"*.pt", "*.bin"}},
		{"no default excludes", nil, []string{"--variant", "A", "--repo", "x/y", "--no-default-excludes"}, "x/y", filepath.Join("models", "A"), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := env{getenv: func(k string) string { return tt.vars[k] }, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
			cfg, err := parseDownloadFlags(tt.args, e)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := cfg.options(e)
			if err != nil {
				t.Fatal(err)
			}
			if opts.Repo != tt.wantRepo || opts.Dir != tt.wantDir || !slices.Equal(opts.Include, tt.wantInclude) || !slices.Equal(opts.Exclude, tt.wantExclude) {
				t.Errorf("got repo %q dir %q include %q exclude %q\nwant repo %q dir %q include %q exclude %q",
					opts.Repo, opts.Dir, opts.Include, opts.Exclude, tt.wantRepo, tt.wantDir, tt.wantInclude, tt.wantExclude)
			}
		})
	}
}

// --models-file downloads each model of a catalogue that names its hub
// repository into its path's directory, and goes on past one that fails.
func TestDownloadCatalog(t *testing.T) {
	s := downloadTestHub(t)
	s.AddRepo(hubtest.Repo{ID: "acme/other", Files: []hubtest.File{
		{Path: "other-Q8_0.gguf", Data: bytes.Repeat([]byte("o"), 20_000), LFS: true},
		{Path: "other-F16.gguf", Data: bytes.Repeat([]byte("f"), 40_000), LFS: true},
	}})
	dir := t.TempDir()
	file := filepath.Join(dir, "models.json")
	catalogJSON := `{"models": [
	  {"name": "tiny", "kind": "chat", "path": "tiny/model.gguf", "hub": {"repo": "acme/tiny", "include": ["*.gguf"]}},
	  {"name": "other", "kind": "chat", "path": "other/other-Q8_0.gguf", "hub": {"repo": "acme/other", "include": ["*-Q8_0.gguf"]}},
	  {"name": "local", "kind": "chat", "path": "local.gguf"},
	  {"name": "missing", "kind": "chat", "path": "missing/m.gguf", "hub": {"repo": "acme/no-such-repo"}}]}`
	if err := os.WriteFile(file, []byte(catalogJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"HF_ENDPOINT": s.Hub.URL, "MODEL_HUB_TOKEN": downloadTestToken}
	code, out, errOut := runDownloadCLI(t, vars, "--models-file", file, "--progress", "none")
	if code == 0 || !strings.Contains(errOut, "missing:") {
		t.Errorf("exit %d with a model that cannot be fetched; want a failure naming it:\n%s%s", code, out, errOut)
	}
	for path, size := range map[string]int64{"tiny/model.gguf": 50_000, "other/other-Q8_0.gguf": 20_000} {
		st, err := os.Stat(filepath.Join(dir, path))
		if err != nil || st.Size() != size {
			t.Errorf("%s: %v; want %d bytes", path, err, size)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "other", "other-F16.gguf")); err == nil {
		t.Error("a file the include patterns leave out was fetched")
	}
}
