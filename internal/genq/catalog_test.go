package genq

import (
	"strings"
	"testing"
)

func TestQueueToken(t *testing.T) {
	for _, tc := range []struct {
		kind ModelKind
		name string
		want string // exact, or a prefix when hashed
		hash bool
	}{
		{KindChat, "qwen3", "chat_qwen3", false},
		{KindChat, "llama_3_8b", "chat_llama_3_8b", false},
		{KindChat, "Llama 3.1 8B Instruct", "chat_llama_3_1_8b_instruct_", true},
		{KindEmbedding, "nomic-embed-text-v1.5", "embedding_nomic_embed_text_v1_5_", true},
		{KindChat, "A", "chat_a_", true},
		{KindChat, "genq/genq", "chat_genq_genq_", true},
		{KindImage, strings.Repeat("x", 100), "image_" + strings.Repeat("x", queueSlugMax) + "_", true},
	} {
		q := QueueToken(tc.kind, tc.name)
		if !tc.hash && string(q) != tc.want {
			t.Errorf("QueueToken(%s, %q) = %s, want %s", tc.kind, tc.name, q, tc.want)
		}
		if tc.hash && (!strings.HasPrefix(string(q), tc.want) || len(q) != len(tc.want)+8) {
			t.Errorf("QueueToken(%s, %q) = %s, want %s and 8 hex digits", tc.kind, tc.name, q, tc.want)
		}
		if !IsModelQueue(q) || strings.ContainsAny(string(q), "-.") || q.Kind() != tc.kind.Output() {
			t.Errorf("QueueToken(%s, %q) = %s: not a model queue token of its kind (%s)", tc.kind, tc.name, q, q.Kind())
		}
	}
	// Names that differ in case or punctuation only get different tokens.
	if a, b := QueueToken(KindChat, "Qwen3"), QueueToken(KindChat, "qwen3"); a == b {
		t.Errorf("Qwen3 and qwen3 share the token %s", a)
	}
	for _, v := range Variants {
		if IsModelQueue(v) {
			t.Errorf("the seed variant %s reads as a model queue token", v)
		}
	}
}

func testCatalog(t *testing.T, aliases map[string]string) *Catalog {
	t.Helper()
	c, err := NewCatalog([]Model{
		SeedModel(VariantB),
		{Name: "qwen3", Kind: KindChat, Queue: QueueToken(KindChat, "qwen3"), Aliases: []string{"gpt-4o"}},
		{Name: "bge", Kind: KindEmbedding, Queue: QueueToken(KindEmbedding, "bge")},
	}, aliases, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCatalogResolve(t *testing.T) {
	c := testCatalog(t, map[string]string{"text-embedding-3-small": "bge", "claude-sonnet-4-5": "qwen3"})
	for _, tc := range []struct {
		name      string
		kind      ModelKind
		want      string
		wantQueue Variant
		notFound  bool
	}{
		{"", KindChat, "genq-B", VariantB, false},
		{"genq-B", KindChat, "genq-B", VariantB, false},
		{"qwen3", KindChat, "qwen3", "chat_qwen3", false},
		{"gpt-4o", KindChat, "qwen3", "chat_qwen3", false},
		{"claude-sonnet-4-5", KindChat, "qwen3", "chat_qwen3", false},
		{"", KindEmbedding, "bge", "embedding_bge", false},
		{"text-embedding-3-small", KindEmbedding, "bge", "embedding_bge", false},
		{"no-such-model", KindChat, "", "", true},
		{"bge", KindChat, "", "", true},    // another kind
		{"qwen3", KindImage, "", "", true}, // another kind
		{"", KindImage, "", "", true},      // no image model
	} {
		m, err := c.Resolve(tc.name, tc.kind)
		if tc.notFound {
			if !IsModelNotFound(err) || ErrorField(err) != "model" {
				t.Errorf("Resolve(%q, %s) = %v, %v; want a model_not_found error", tc.name, tc.kind, m.Name, err)
			}
			continue
		}
		if err != nil || m.Name != tc.want || m.Queue != tc.wantQueue {
			t.Errorf("Resolve(%q, %s) = %q (%s), %v; want %q (%s)", tc.name, tc.kind, m.Name, m.Queue, err, tc.want, tc.wantQueue)
		}
	}
}

func TestCatalogFallback(t *testing.T) {
	c := testCatalog(t, map[string]string{"*": "genq-B"})
	if m, err := c.Resolve("anything", KindChat); err != nil || m.Name != "genq-B" {
		t.Errorf("Resolve(anything) = %q, %v; want genq-B through *", m.Name, err)
	}
	// The fallback is a chat model: an unknown embedding model is still unknown.
	if _, err := c.Resolve("anything", KindEmbedding); !IsModelNotFound(err) {
		t.Errorf("Resolve(anything, embedding) = %v; want model_not_found", err)
	}
}

func TestNewCatalogRefuses(t *testing.T) {
	q := QueueToken(KindChat, "x")
	for _, tc := range []struct {
		what    string
		models  []Model
		aliases map[string]string
		want    string
	}{
		{"a name twice", []Model{{Name: "x", Kind: KindChat, Queue: q}, {Name: "x", Kind: KindChat, Queue: "chat_y"}}, nil, `the name "x" is given to models`},
		{"a queue twice", []Model{{Name: "x", Kind: KindChat, Queue: q}, {Name: "y", Kind: KindChat, Queue: q}}, nil, "the same queue token"},
		{"no name", []Model{{Kind: KindChat, Queue: q}}, nil, "has no name"},
		{"a bad kind", []Model{{Name: "x", Kind: "audio", Queue: q}}, nil, `kind "audio"`},
		{"an alias to nowhere", []Model{{Name: "x", Kind: KindChat, Queue: q}}, map[string]string{"gpt-4o": "y"}, `alias "gpt-4o" names the model "y"`},
		{"an alias taken", []Model{{Name: "x", Kind: KindChat, Queue: q}, {Name: "y", Kind: KindChat, Queue: "chat_y"}}, map[string]string{"x": "y"}, `the name "x" is given to models`},
	} {
		_, err := NewCatalog(tc.models, tc.aliases, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewCatalog = %v; want an error saying %q", tc.what, err, tc.want)
		}
	}
}

func TestKeepAliveParam(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		none bool
		bad  bool
	}{
		{`"5m"`, 300, false, false},
		{`"1h30m"`, 5400, false, false},
		{`"0"`, 0, false, false},
		{`0`, 0, false, false},
		{`-1`, KeepForever, false, false},
		{`"-1m"`, KeepForever, false, false},
		{`120`, 120, false, false},
		{`null`, 0, true, false},
		{`"soon"`, 0, false, true},
		{`true`, 0, false, true},
	} {
		var k KeepAliveParam
		err := k.UnmarshalJSON([]byte(tc.in))
		switch {
		case tc.bad:
			if err == nil || ErrorField(err) != "keep_alive" {
				t.Errorf("keep_alive %s: %v, want an error on keep_alive", tc.in, err)
			}
		case err != nil:
			t.Errorf("keep_alive %s: %v", tc.in, err)
		case tc.none && k.Seconds != nil, !tc.none && (k.Seconds == nil || *k.Seconds != tc.want):
			t.Errorf("keep_alive %s = %v, want %v", tc.in, k.Seconds, tc.want)
		}
	}
}
