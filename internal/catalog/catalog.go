// Package catalog builds a deployment's model catalogue (genq.Catalog) from
// its settings: MODELS_FILE, MODELS and MODEL_ALIASES, and the facts the
// models' GGUF files tell (their names, kinds and context lengths). The api
// and the workers read the same settings, so they agree on every model's
// queue token.
package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
)

// Config is the catalogue's settings.
type Config struct {
	// File is a JSON catalogue (FileSpec).
	File string
	// Models are more models, each "path" or "name=path".
	Models []string
	// Aliases are "alias=model" pairs; the alias "*" takes every name
	// the catalogue does not know.
	Aliases []string
}

// RegisterFlags binds the catalogue's settings.
func (c *Config) RegisterFlags(fs *envflag.Set) {
	fs.String(&c.File, "models-file", "MODELS_FILE", "", "JSON catalogue of the models served besides the variant's own (docs/text.md, \"Many models\"): {\"models\":[{\"name\",\"kind\",\"path\",\"aliases\",\"variant\"}],\"aliases\":{},\"defaults\":{}}")
	fs.List(&c.Models, "models", "MODELS", "more models, comma-separated, each a GGUF path or name=path; the name defaults to the file's general.name, the kind to what its architecture makes (chat or embedding)")
	fs.List(&c.Aliases, "model-aliases", "MODEL_ALIASES", "comma-separated alias=model pairs (gpt-4o=qwen3-8b); the alias * sends every unknown name to that model. With no MODELS_FILE nor MODELS, every name reaches the variant's model, as before")
}

// Configured reports whether any model besides the seed's is declared.
func (c Config) Configured() bool { return c.File != "" || len(c.Models) > 0 }

// FileSpec is the JSON form of MODELS_FILE.
type FileSpec struct {
	Models []ModelSpec `json:"models"`
	// Aliases map a name clients send to a model's name.
	Aliases map[string]string `json:"aliases,omitempty"`
	// Defaults name the model of each kind a request without `model` gets.
	Defaults map[genq.ModelKind]string `json:"defaults,omitempty"`
}

// ModelSpec is one model of MODELS_FILE. Only path is required of a GGUF
// (its name and kind come from the file); variant puts the model on a seed
// variant's queue (A, B or C), giving that variant's model a name.
type ModelSpec struct {
	Name          string         `json:"name,omitempty"`
	Kind          genq.ModelKind `json:"kind,omitempty"`
	Path          string         `json:"path,omitempty"`
	Aliases       []string       `json:"aliases,omitempty"`
	Variant       genq.Variant   `json:"variant,omitempty"`
	ContextLength int            `json:"context_length,omitempty"`
	// Hub says where genqctl download fetches the model's files from,
	// into the directory of its path.
	Hub *HubSpec `json:"hub,omitempty"`
}

// HubSpec is a model's repository on the model hub and the files of it
// the model needs.
type HubSpec struct {
	Repo     string   `json:"repo"`
	Revision string   `json:"revision,omitempty"`
	Include  []string `json:"include,omitempty"`
}

// Load builds the catalogue of a deployment whose seed variant is seed:
// the seed's model first (the default of its kind), then MODELS_FILE's,
// then MODELS'. Relative paths are taken from baseDir (the file's own
// directory for MODELS_FILE's). A GGUF that cannot be read is an error
// only when its name or kind had to come from it.
func Load(c Config, seed genq.Variant, baseDir string) (*genq.Catalog, error) {
	var spec FileSpec
	if c.File != "" {
		var err error
		if spec, err = ReadFile(c.File); err != nil {
			return nil, err
		}
	}
	for _, m := range c.Models {
		ms, err := parseModelArg(m)
		if err != nil {
			return nil, err
		}
		ms.Path = resolve(baseDir, ms.Path)
		spec.Models = append(spec.Models, ms)
	}
	aliases, err := parseAliases(c.Aliases, spec.Aliases)
	if err != nil {
		return nil, err
	}
	spec.Aliases = aliases
	if !c.Configured() {
		if _, ok := aliases["*"]; !ok {
			// No catalogue: every name reaches the variant's model, as
			// before there was one.
			aliases["*"] = genq.SeedModel(seed).Name
		}
	}
	return FromSpec(spec, seed)
}

// FromSpec builds the catalogue spec says, the seed's model first.
func FromSpec(spec FileSpec, seed genq.Variant) (*genq.Catalog, error) {
	models, err := build(spec.Models, seed)
	if err != nil {
		return nil, err
	}
	return genq.NewCatalog(models, spec.Aliases, spec.Defaults)
}

// ReadFile reads a MODELS_FILE, its relative paths taken from its own
// directory.
func ReadFile(path string) (FileSpec, error) {
	var spec FileSpec
	data, err := os.ReadFile(path)
	if err != nil {
		return spec, fmt.Errorf("MODELS_FILE: %w", err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return spec, fmt.Errorf("MODELS_FILE %s: %w", path, err)
	}
	for i := range spec.Models {
		spec.Models[i].Path = resolve(filepath.Dir(path), spec.Models[i].Path)
	}
	return spec, nil
}

func resolve(base, p string) string {
	if p == "" || filepath.IsAbs(p) || base == "" {
		return p
	}
	return filepath.Join(base, p)
}

// parseModelArg reads one MODELS entry: path or name=path.
func parseModelArg(s string) (ModelSpec, error) {
	s = strings.TrimSpace(s)
	name, path, ok := strings.Cut(s, "=")
	if !ok {
		name, path = "", s
	}
	if path == "" {
		return ModelSpec{}, fmt.Errorf("MODELS entry %q: want a path or name=path", s)
	}
	return ModelSpec{Name: strings.TrimSpace(name), Path: strings.TrimSpace(path)}, nil
}

// parseAliases merges MODEL_ALIASES over the file's aliases.
func parseAliases(pairs []string, base map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for _, p := range pairs {
		alias, model, ok := strings.Cut(p, "=")
		alias, model = strings.TrimSpace(alias), strings.TrimSpace(model)
		if !ok || alias == "" || model == "" {
			return nil, fmt.Errorf("MODEL_ALIASES entry %q: want alias=model", p)
		}
		out[alias] = model
	}
	return out, nil
}

// build turns the specs into models, the seed's first: a spec on the seed
// variant's queue names it, one on another seed variant is refused (one
// deployment serves one seed variant).
func build(specs []ModelSpec, seed genq.Variant) ([]genq.Model, error) {
	models := []genq.Model{genq.SeedModel(seed)}
	for _, s := range specs {
		m, err := modelOf(s)
		if err != nil {
			return nil, err
		}
		switch {
		case s.Variant == "":
		case s.Variant != seed:
			return nil, fmt.Errorf("model %q: variant %s: this deployment serves variant %s", m.Name, s.Variant, seed)
		default:
			// The seed's model, named: its old name stays an alias.
			m.Queue, m.Kind = seed, models[0].Kind
			m.Aliases = append(m.Aliases, models[0].Name)
			models[0] = m
			continue
		}
		models = append(models, m)
	}
	return models, nil
}

// modelOf completes a spec from its GGUF file where it leaves out the
// name, the kind or the context length.
func modelOf(s ModelSpec) (genq.Model, error) {
	m := genq.Model{Name: s.Name, Kind: s.Kind, Path: s.Path, Aliases: s.Aliases, ContextLength: s.ContextLength}
	info, err := ReadGGUF(s.Path)
	switch {
	case err == nil:
		m.Name = cmp.Or(m.Name, info.Name)
		m.Kind = cmp.Or(m.Kind, info.Kind)
		m.ContextLength = cmp.Or(m.ContextLength, info.ContextLength)
		m.SizeBytes = info.SizeBytes
	case m.Name == "" || m.Kind == "":
		return genq.Model{}, fmt.Errorf("model %s: give its name and kind, or a GGUF that says them: %w", cmp.Or(s.Name, s.Path), err)
	}
	if m.Name == "" {
		return genq.Model{}, fmt.Errorf("model %s: its GGUF has no general.name: give it a name (name=path)", s.Path)
	}
	if s.Variant == "" {
		m.Queue = genq.QueueToken(m.Kind, m.Name)
	}
	return m, nil
}

// GGUFInfo is what a GGUF's header tells the catalogue.
type GGUFInfo struct {
	Name          string
	Architecture  string
	Kind          genq.ModelKind
	ContextLength int
	SizeBytes     int64
	// KVBytesPerToken is what one token of context costs in the KV cache
	// (keys and values in 16 bits, every layer), as llama.cpp's
	// KVBytesPerToken counts it; 0 when the header does not say.
	KVBytesPerToken int64
}

// embeddingArchitectures are llama.cpp's architectures of encoders, which
// make embeddings rather than chat.
var embeddingArchitectures = []string{"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "neo-bert", "modern-bert", "t5encoder"}

// ReadGGUF reads the header of the GGUF at path (a directory: its one
// .gguf file). A directory without one is an image model's export.
func ReadGGUF(path string) (GGUFInfo, error) {
	path, size, err := GGUFFile(path)
	if err != nil {
		return GGUFInfo{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return GGUFInfo{}, err
	}
	defer f.Close()
	h, err := gguf.Read(f, size)
	if err != nil {
		return GGUFInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	info := GGUFInfo{SizeBytes: size, Kind: genq.KindChat}
	info.Name, _ = h.Value("general.name").(string)
	info.Architecture, _ = h.Value("general.architecture").(string)
	if slices.Contains(embeddingArchitectures, info.Architecture) {
		info.Kind = genq.KindEmbedding
	}
	info.ContextLength = int(uintOf(h.Value(info.Architecture + ".context_length")))
	info.KVBytesPerToken = kvBytesPerToken(h, info.Architecture)
	return info, nil
}

// GGUFFile is the GGUF at path (a directory: its one .gguf file) and its
// size, the file itself left unread.
func GGUFFile(path string) (string, int64, error) {
	if path == "" {
		return "", 0, fmt.Errorf("no path")
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", 0, err
	}
	if st.IsDir() {
		files, _ := filepath.Glob(filepath.Join(path, "*.gguf"))
		if len(files) != 1 {
			return "", 0, fmt.Errorf("%s holds %d .gguf files: name one", path, len(files))
		}
		path = files[0]
		if st, err = os.Stat(path); err != nil {
			return "", 0, err
		}
	}
	return path, st.Size(), nil
}

// kvBytesPerToken is layers × KV heads × (key + value width) × 2 bytes,
// from the header; a per-layer KV head count counts each layer's.
func kvBytesPerToken(h *gguf.File, arch string) int64 {
	key := func(k string) any { return h.Value(arch + "." + k) }
	layers, heads, embd := uintOf(key("block_count")), uintOf(key("attention.head_count")), uintOf(key("embedding_length"))
	if layers == 0 || heads == 0 {
		return 0
	}
	keyDim, valueDim := embd/heads, embd/heads
	if v := uintOf(key("attention.key_length")); v > 0 {
		keyDim = v
	}
	if v := uintOf(key("attention.value_length")); v > 0 {
		valueDim = v
	}
	var kvHeads uint64
	switch v := key("attention.head_count_kv").(type) {
	case []uint32: // per layer
		for _, n := range v {
			kvHeads += uint64(n)
		}
	case []int32:
		for _, n := range v {
			kvHeads += uint64(max(n, 0))
		}
	default:
		n := uintOf(v)
		if n == 0 {
			n = heads
		}
		kvHeads = n * layers
	}
	return int64(kvHeads * (keyDim + valueDim) * 2)
}

// uintOf is a header's unsigned value, whatever its width; 0 otherwise.
func uintOf(v any) uint64 {
	switch n := v.(type) {
	case uint32:
		return uint64(n)
	case uint64:
		return n
	case int32:
		return uint64(max(n, 0))
	case int64:
		return uint64(max(n, 0))
	case uint16:
		return uint64(n)
	}
	return 0
}
