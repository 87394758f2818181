package llamacpp

import (
	"bufio"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The release is written once for the build (scripts/llama.env) and once
// for the binding (Version, a fact about yzma's version in go.mod): they
// must agree, or every engine build would be refused at load. No engine
// is needed to tell.
func TestPinnedRelease(t *testing.T) {
	tag := envValue(t, "../../scripts/llama.env", "LLAMA_TAG")
	if tag != "v"+Version {
		t.Errorf("scripts/llama.env pins llama.cpp %s; the binding is for %s", tag, Version)
	}
}

func envValue(t *testing.T, path, key string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatalf("%s sets no %s", path, key)
	return ""
}

// Load's refusals that come before anything is loaded: each names the
// directory and says what to do.
func TestLoadRefusals(t *testing.T) {
	stamped := func(tag string) string {
		dir := t.TempDir()
		// Never opened: the stamp is read first.
		if err := os.WriteFile(filepath.Join(dir, "libllama.so"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, StampFile), []byte(`{"tag":"`+tag+`","commit":"c","flavour":"cpu"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	badStamp := t.TempDir()
	for _, f := range []struct{ name, data string }{{"libllama.so", ""}, {StampFile, "{"}} {
		if err := os.WriteFile(filepath.Join(badStamp, f.name), []byte(f.data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		dir  string
		want []string
	}{
		{"no libraries", empty, []string{"the engine's libraries are not in " + empty, "make engine", Version}},
		{"another release", stamped("v0.6.1"), []string{"llama.cpp v0.6.1", "built for " + Version, "make engine"}},
		{"an unreadable stamp", badStamp, []string{StampFile, badStamp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.dir, slog.Default())
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	t.Setenv(LibDirEnv, "")
	t.Chdir(empty)
	if _, err := Load("", nil); err == nil || !strings.Contains(err.Error(), LibDirEnv) {
		t.Errorf("Load without a directory: %v, want an error naming %s", err, LibDirEnv)
	}
}

// A binary run by hand, LLAMA_LIB_DIR unset, finds the libraries make
// engine linked at lib/llama in the working folder.
func TestFindLibDir(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	if d := findLibDir(); d != "" {
		t.Fatalf("found %q in an empty folder", d)
	}
	if err := os.MkdirAll(filepath.Join(root, "lib", "llama"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "lib", "llama", "libllama.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := findLibDir(); d != filepath.Join("lib", "llama") {
		t.Errorf("found %q, want lib/llama", d)
	}
}

// The spin count reaches libgomp through its variable, and only before
// the libraries load; a negative count is refused.
func TestSetOpenMPSpin(t *testing.T) {
	tests := []struct {
		name    string
		loaded  bool
		count   int
		wantEnv map[string]string
		wantErr string
	}{
		{"before the load", false, 3000, map[string]string{"GOMP_SPINCOUNT": "3000"}, ""},
		{"no spin", false, 0, map[string]string{"GOMP_SPINCOUNT": "0"}, ""},
		{"negative", false, -1, map[string]string{}, "want 0 or more"},
		{"after the load", true, 3000, map[string]string{}, "already loaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			err := setOpenMPSpin(tt.loaded, tt.count, func(k, v string) error { env[k] = v; return nil })
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if !maps.Equal(env, tt.wantEnv) {
				t.Errorf("environment %v, want %v", env, tt.wantEnv)
			}
		})
	}
}
