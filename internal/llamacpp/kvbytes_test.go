package llamacpp

import (
	"path/filepath"
	"testing"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// The catalogue sizes a model's KV cache from its GGUF header before any
// load (a worker of several models budgets with it): it must count as
// the engine does, for every family.
func TestCatalogKVBytesAgree(t *testing.T) {
	lib := loadEngine(t)
	for _, f := range tinygguf.Families {
		path := filepath.Join(t.TempDir(), string(f)+".gguf")
		opts := tinygguf.OptionsFor(genq.VariantB, "tiny", 1)
		opts.Family = f
		if err := tinygguf.Write(path, opts); err != nil {
			t.Fatal(err)
		}
		info, err := catalog.ReadGGUF(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := lib.OpenModel(path, ModelParams{})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(m.KVBytesPerToken()); info.KVBytesPerToken != want {
			t.Errorf("%s: the catalogue counts %d KV bytes a token, the engine %d", f, info.KVBytesPerToken, want)
		}
		m.Close()
	}
}
