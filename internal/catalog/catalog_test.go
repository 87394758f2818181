package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
)

// writeHeader writes a GGUF of metadata alone: what the catalogue reads.
func writeHeader(t *testing.T, path, arch, name string, ctx uint32) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta := []gguf.KV{{Key: "general.architecture", Value: arch}, {Key: arch + ".context_length", Value: ctx}}
	if name != "" {
		meta = append(meta, gguf.KV{Key: "general.name", Value: name})
	}
	if err := gguf.Write(f, meta, nil); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	writeHeader(t, filepath.Join(dir, "q.gguf"), "qwen3", "Qwen3 Tiny", 4096)
	writeHeader(t, filepath.Join(dir, "e.gguf"), "bert", "bge-tiny", 512)
	writeHeader(t, filepath.Join(dir, "l.gguf"), "llama", "", 8192)
	file := filepath.Join(dir, "models.json")
	if err := os.WriteFile(file, []byte(`{"models":[{"path":"q.gguf","aliases":["gpt-4o"]},{"name":"llama-8b","path":"l.gguf","variant":"B"}],
		"defaults":{"chat":"Qwen3 Tiny"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(Config{File: file, Models: []string{"e.gguf"}, Aliases: []string{"text-embedding-3-small=bge-tiny"}}, genq.VariantB, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kind genq.ModelKind
		want string
		q    genq.Variant
		ctx  int
	}{
		{"", genq.KindChat, "Qwen3 Tiny", genq.QueueToken(genq.KindChat, "Qwen3 Tiny"), 4096},
		{"gpt-4o", genq.KindChat, "Qwen3 Tiny", genq.QueueToken(genq.KindChat, "Qwen3 Tiny"), 4096},
		{"llama-8b", genq.KindChat, "llama-8b", genq.VariantB, 8192},
		{"genq-B", genq.KindChat, "llama-8b", genq.VariantB, 8192}, // the seed's name stays
		{"text-embedding-3-small", genq.KindEmbedding, "bge-tiny", genq.QueueToken(genq.KindEmbedding, "bge-tiny"), 512},
	} {
		m, err := c.Resolve(tc.name, tc.kind)
		if err != nil || m.Name != tc.want || m.Queue != tc.q || m.ContextLength != tc.ctx {
			t.Errorf("Resolve(%q) = %+v, %v; want %s on %s, context %d", tc.name, m, err, tc.want, tc.q, tc.ctx)
		}
	}
	if _, err := c.Resolve("no-such-model", genq.KindChat); !genq.IsModelNotFound(err) {
		t.Errorf("an unknown name with a catalogue: %v, want model_not_found", err)
	}
}

// With no catalogue declared, every name reaches the variant's model.
func TestLoadSeedOnly(t *testing.T) {
	c, err := Load(Config{}, genq.VariantA, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "gpt-4o", "genq-A"} {
		if m, err := c.Resolve(name, genq.KindChat); err != nil || m.Queue != genq.VariantA {
			t.Errorf("Resolve(%q) = %+v, %v; want variant A's model", name, m, err)
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	writeHeader(t, filepath.Join(dir, "noname.gguf"), "llama", "", 8)
	for _, tc := range []struct {
		what string
		cfg  Config
		want string
	}{
		{"a missing file", Config{Models: []string{"x=" + filepath.Join(dir, "none.gguf")}}, "give its name and kind"},
		{"no general.name", Config{Models: []string{filepath.Join(dir, "noname.gguf")}}, "has no general.name"},
		{"a bad alias", Config{Aliases: []string{"gpt-4o"}}, "want alias=model"},
		{"an alias to nowhere", Config{Models: []string{"m=" + filepath.Join(dir, "noname.gguf")}, Aliases: []string{"gpt-4o=x"}}, `names the model "x"`},
		{"another variant", Config{File: writeFile(t, dir, `{"models":[{"name":"x","kind":"chat","variant":"A"}]}`)}, "serves variant B"},
	} {
		_, err := Load(tc.cfg, genq.VariantB, dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load = %v; want an error saying %q", tc.what, err, tc.want)
		}
	}
}

func writeFile(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "cat.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The KV estimate is llama.cpp's: layers × KV heads × (key + value) × 2.
func TestKVBytesPerToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		what string
		meta []gguf.KV
		want int64
	}{
		{"llama 3.1 8B", []gguf.KV{{Key: "llama.block_count", Value: uint32(32)}, {Key: "llama.attention.head_count", Value: uint32(32)},
			{Key: "llama.attention.head_count_kv", Value: uint32(8)}, {Key: "llama.embedding_length", Value: uint32(4096)}}, 32 * 8 * 256 * 2},
		{"widths given", []gguf.KV{{Key: "llama.block_count", Value: uint32(2)}, {Key: "llama.attention.head_count", Value: uint32(4)},
			{Key: "llama.embedding_length", Value: uint32(64)}, {Key: "llama.attention.key_length", Value: uint32(32)}, {Key: "llama.attention.value_length", Value: uint32(32)}}, 2 * 4 * 64 * 2},
		{"per-layer KV heads", []gguf.KV{{Key: "llama.block_count", Value: uint32(2)}, {Key: "llama.attention.head_count", Value: uint32(4)},
			{Key: "llama.attention.head_count_kv", Value: []uint32{2, 0}}, {Key: "llama.embedding_length", Value: uint32(64)}}, 2 * 32 * 2},
		{"no shape", nil, 0},
	} {
		path := filepath.Join(dir, "m.gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := gguf.Write(f, append([]gguf.KV{{Key: "general.architecture", Value: "llama"}}, tc.meta...), nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
		info, err := ReadGGUF(path)
		if err != nil || info.KVBytesPerToken != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.what, info.KVBytesPerToken, err, tc.want)
		}
	}
}
