package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genq/genq/internal/gguf"
)

func TestModelsTinyTextFamilies(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		e := env{getenv: func(string) string { return "" }, stdout: &out, stderr: &bytes.Buffer{}}
		err := runModels(context.Background(), append([]string{"tiny"}, args...), e)
		return out.String(), err
	}
	for _, c := range []struct {
		args       []string
		file, arch string
		pre        string
	}{
		{[]string{"--variant", "B"}, "tiny-B.gguf", "llama", "llama-bpe"},
		{[]string{"--variant", "A", "--family", "llama"}, "tiny-A.gguf", "llama", "llama-bpe"},
		{[]string{"--variant", "B", "--family", "qwen3"}, "tiny-qwen3-B.gguf", "qwen3", "qwen2"},
		{[]string{"--variant", "A", "--family", "mistral"}, "tiny-mistral-A.gguf", "llama", "tekken"},
		// An embedding model is no variant's: the variant is not read.
		{[]string{"--variant", "C", "--family", "bert"}, "tiny-bert.gguf", "bert", "default"},
		{[]string{"--family", "bert", "--size", "mini"}, "mini-bert.gguf", "bert", "default"},
	} {
		dir := t.TempDir()
		out, err := run(append(c.args, "--dir", dir)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		p := filepath.Join(dir, c.file)
		if !strings.Contains(out, p) {
			t.Errorf("%v: output %q does not name %s", c.args, out, p)
		}
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := fh.Stat()
		f, err := gguf.Read(fh, st.Size())
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		if arch, pre := f.Value("general.architecture"), f.Value("tokenizer.ggml.pre"); arch != c.arch || pre != c.pre {
			t.Errorf("%v: architecture %v, pre-tokenizer %v; want %s and %s", c.args, arch, pre, c.arch, c.pre)
		}
	}

	for _, bad := range [][]string{{"--variant", "B", "--family", "gemma"}, {"--variant", "C", "--family", "qwen3"}} {
		_, err := run(append([]string{"--dir", t.TempDir()}, bad...)...)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("%v: got %v, want a usage error", bad, err)
		}
	}
}
