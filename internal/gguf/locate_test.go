package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocate(t *testing.T) {
	one, two, none := t.TempDir(), t.TempDir(), t.TempDir()
	for dir, names := range map[string][]string{one: {"m.gguf", "notes.txt"}, two: {"a.gguf", "b.gguf"}} {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name, dir, file string
		want, wantErr   string
	}{
		{"a file under the directory", "/models", "m.gguf", "/models/m.gguf", ""},
		{"an absolute file", "/models", "/elsewhere/m.gguf", "/elsewhere/m.gguf", ""},
		{"a file alone", "", "m.gguf", "m.gguf", ""},
		{"the directory's one model", one, "", filepath.Join(one, "m.gguf"), ""},
		{"two models", two, "", "", "2 .gguf files in " + two},
		{"no model", none, "", "", "no .gguf file in " + none},
		{"nothing set", "", "", "", "neither a model directory nor a model file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Locate(tc.dir, tc.file, "X_MODEL_FILE")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Locate: %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Locate: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := Locate(two, "", "X_MODEL_FILE"); err == nil || !strings.HasSuffix(err.Error(), "name one with X_MODEL_FILE") {
		t.Errorf("two models: %v; want the setting named", err)
	}
	if _, err := Locate(none, "", "X_MODEL_FILE"); !errors.Is(err, ErrNoFile) {
		t.Errorf("no model: %v; want ErrNoFile", err)
	}
}

func TestCheckMagic(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"a GGUF file", write("ok.gguf", []byte("GGUF\x03\x00\x00\x00")), ""},
		{"text", write("notes.gguf", []byte("this is not a model")), "not a GGUF file"},
		{"shorter than the magic", write("short.gguf", []byte("GG")), "not a GGUF file"},
		{"missing", filepath.Join(dir, "absent.gguf"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckMagic(tc.path)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("CheckMagic: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckMagic: %v; want an error saying %q", err, tc.wantErr)
			}
		})
	}
}
