package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/config/workerconfig"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// A fleet's model costs its file and the KV cache of its slots at its
// context, which is fixed (TEXT_CONTEXT_SIZE, else DefaultFleetContext
// within the trained context) so that the cost is known before a load.
func TestFleetModelCost(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "qwen3.gguf")
	opts := tinygguf.OptionsFor(genq.VariantB, "tiny", 1)
	opts.Family = tinygguf.FamilyQwen3
	if err := tinygguf.Write(path, opts); err != nil {
		t.Fatal(err)
	}
	info, err := catalog.ReadGGUF(path)
	if err != nil || info.KVBytesPerToken == 0 {
		t.Fatalf("%+v, %v", info, err)
	}
	for _, tc := range []struct {
		env     map[string]string
		context int
	}{
		{map[string]string{}, min(info.ContextLength, DefaultFleetContext)},
		{map[string]string{"TEXT_CONTEXT_SIZE": "1024"}, 1024},
	} {
		env := map[string]string{"MODELS": "q=" + path, "MODEL_DIR": t.TempDir(), "SLOTS": "3"}
		for k, v := range tc.env {
			env[k] = v
		}
		cfg, err := workerconfig.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		models := fleetModels(cfg, slog.New(slog.DiscardHandler))
		if len(models) != 1 {
			t.Fatalf("models %+v; want q alone (the variant's directory is empty)", models)
		}
		want := info.SizeBytes + info.KVBytesPerToken*int64(tc.context)*4
		if m := models[0]; m.ContextLength != tc.context || m.SizeBytes != want {
			t.Errorf("%v: context %d, cost %d; want %d and %d", tc.env, m.ContextLength, m.SizeBytes, tc.context, want)
		}
	}
	_ = os.Remove(path)
}
