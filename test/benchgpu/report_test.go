package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPeer(t *testing.T) {
	for _, tc := range []struct {
		name, file string // file "" writes none
		want       map[int]float64
		err        string
	}{
		{name: "no file", file: ""},
		{
			name: "two levels",
			file: `{"n_kv_max": 19456, "pp": 48, "tg": 256, "pl": 1, "speed_tg": 166.5, "speed": 190.1}
{"n_kv_max": 19456, "pp": 48, "tg": 256, "pl": 64, "speed_tg": 5762.25, "speed": 6000}
`,
			want: map[int]float64{1: 166.5, 64: 5762.25},
		},
		{name: "not JSON", file: "| PP | TG |\n", err: ":1: invalid character"},
		{name: "no decode speed", file: `{"pl": 4}` + "\n", err: "no pl and speed_tg"},
		{name: "empty", file: "\n", err: "no rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "8B-BF16"+peerSuffix)
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readPeer(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// A sweep with a peer file beside it is compared with that run's
// llama-batched-bench, not the figures recorded in llamaCppDecode.
func TestReportComparesWithTheRunsPeer(t *testing.T) {
	dir := t.TempDir()
	results := `{"model": "8B F16", "device": "NVIDIA H100", "when": "2026-11-25T00:00:00Z", "tokens_per_answer": 256,
		"levels": [{"concurrency": 1, "requests": 8, "tok_per_s": 150}, {"concurrency": 4, "requests": 8, "tok_per_s": 400}]}`
	peer := `{"pl": 1, "speed_tg": 200}` + "\n" + `{"pl": 4, "speed_tg": 800}` + "\n"
	doc := filepath.Join(dir, "doc.md")
	for name, text := range map[string]string{
		"8B-F16.json": results, "8B-F16" + peerSuffix: peer, "doc.md": "<!-- bench-gpu:begin -->\n<!-- bench-gpu:end -->\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := report(dir, doc, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1 | 150 | ", "| 200 | 0.75 |", "| 4 | 400 | ", "| 800 | 0.50 |", "from the same engine build"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the report has no %q:\n%s", want, b)
		}
	}
}
