package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// A chat model's load reports its file's read, then the engine's own
// count of its load (llama.cpp's progress_callback), rising to 1: the
// fractions past the read's share come from the engine.
func TestTextLoaderProgress(t *testing.T) {
	libDir := os.Getenv("LLAMA_LIB_DIR")
	if libDir == "" {
		t.Skip("LLAMA_LIB_DIR names no engine build")
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := tinygguf.Write(path, tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MODELS": "tiny=" + path, "MODEL_DIR": t.TempDir(), "SLOTS": "1", "TEXT_CONTEXT_SIZE": "256", "TEXT_THREADS": "1"}
	cfg, err := workerconfig.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Text.LibDir = libDir
	log := slog.New(slog.DiscardHandler)
	models := fleetModels(cfg, log)
	if len(models) != 1 {
		t.Fatalf("models %+v; want tiny alone", models)
	}
	var seen []float64
	b, err := textLoader(cfg, log)(t.Context(), models[0], func(f float64) { seen = append(seen, f) })
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	engine := 0
	for i, f := range seen {
		if i > 0 && f < seen[i-1] || f < 0 || f > 1 {
			t.Fatalf("progress %v: not rising within [0, 1]", seen)
		}
		if f > warmShare && f < 1 {
			engine++
		}
	}
	if engine < 2 || seen[len(seen)-1] != 1 {
		t.Errorf("progress %v; want the engine's reports (between %g and 1) and an end at 1", seen, warmShare)
	}
}

// A model over the budget is left out when the worker serves whatever it
// finds and another model fits; named in WORKER_MODELS, or with none
// fitting, it stays, for the fleet to refuse and announce.
func TestLeaveOutTooLarge(t *testing.T) {
	small := genq.Model{Name: "small", SizeBytes: 100}
	big := genq.Model{Name: "big", SizeBytes: 1000}
	huge := genq.Model{Name: "huge", SizeBytes: 5000}
	for _, tc := range []struct {
		name   string
		models []genq.Model
		named  bool
		want   string
	}{
		{"found, one fits", []genq.Model{small, big, huge}, false, "small"},
		{"found, none fits", []genq.Model{big, huge}, false, "big,huge"},
		{"named, one fits", []genq.Model{small, big}, true, "small,big"},
		{"found, all fit", []genq.Model{small}, false, "small"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := leaveOutTooLarge(slices.Clone(tc.models), 500, tc.named, slog.New(slog.DiscardHandler))
			var names []string
			for _, m := range got {
				names = append(names, m.Name)
			}
			if strings.Join(names, ",") != tc.want {
				t.Errorf("kept %v; want %s", names, tc.want)
			}
		})
	}
}

// Only a worker whose every model is an embedding model sets the engine
// threads' spin: the setting is the process's, and a chat model's decode
// steps are slower with a short one on a quiet machine.
func TestSetSpinForEmbeddings(t *testing.T) {
	embedding := genq.Model{Name: "mini-bert", Kind: genq.KindEmbedding}
	chat := genq.Model{Name: "qwen3", Kind: genq.KindChat}
	cases := []struct {
		name   string
		models []genq.Model
		count  int
		want   []int // counts set
	}{
		{"embedding models alone", []genq.Model{embedding, embedding}, 3000, []int{3000}},
		{"libgomp's own asked for", []genq.Model{embedding}, -1, nil},
		{"an embedding and a chat model", []genq.Model{embedding, chat}, 3000, nil},
		{"a chat model", []genq.Model{chat}, 3000, nil},
		{"no model", nil, 3000, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			set := func(n int) error { got = append(got, n); return nil }
			if err := setSpinForEmbeddings(c.models, c.count, set, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("set %v, want %v", got, c.want)
			}
		})
	}
	// Refused at start whatever the models, as the -1 it is not is.
	for _, models := range [][]genq.Model{{embedding}, {chat}} {
		if err := setSpinForEmbeddings(models, -2, func(int) error { return nil }, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "EMBEDDING_SPIN_COUNT") {
			t.Errorf("a count of -2 with %v: %v, want an error naming EMBEDDING_SPIN_COUNT", models, err)
		}
	}
	failing := func(int) error { return errors.New("already loaded") }
	if err := setSpinForEmbeddings([]genq.Model{embedding}, 3000, failing, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "EMBEDDING_SPIN_COUNT") {
		t.Errorf("a failed set: %v, want an error naming EMBEDDING_SPIN_COUNT", err)
	}
}
