package genq

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// ModelKind is what a catalogue model serves: which routes reach it.
type ModelKind string

const (
	KindChat      ModelKind = "chat"
	KindEmbedding ModelKind = "embedding"
	KindImage     ModelKind = "image"
)

// ModelKinds lists every kind, in order.
var ModelKinds = []ModelKind{KindChat, KindEmbedding, KindImage}

// ParseModelKind accepts chat, embedding or image ("text" is chat).
func ParseModelKind(s string) (ModelKind, error) {
	switch k := ModelKind(strings.ToLower(strings.TrimSpace(s))); k {
	case KindChat, KindEmbedding, KindImage:
		return k, nil
	case "text":
		return KindChat, nil
	}
	return "", Errorf(Invalid, "model kind %q: want chat, embedding or image", s)
}

// Output is what the jobs of a model of this kind produce.
func (k ModelKind) Output() OutputKind {
	switch k {
	case KindImage:
		return OutputImage
	case KindEmbedding:
		return OutputEmbedding
	}
	return OutputText
}

// Model is one model of the catalogue: the name clients send as `model`,
// what it serves, where its files are, and the queue token Q its jobs
// travel under (genq.jobs.<Q>).
type Model struct {
	Name    string    `json:"name"`
	Aliases []string  `json:"aliases,omitempty"`
	Kind    ModelKind `json:"kind"`
	// Path is the model's GGUF file, or its directory (an image model's
	// export); relative paths are the worker's to resolve.
	Path string `json:"path,omitempty"`
	// ContextLength is the model's context in tokens, as its GGUF says;
	// 0 when unknown (an image model, a file the api cannot read).
	ContextLength int `json:"context_length,omitempty"`
	// SizeBytes is what the model's files hold: the worker's first guess
	// at what loading it costs against its memory budget.
	SizeBytes int64 `json:"size_bytes,omitempty"`
	// Queue is the model's queue token Q (QueueToken).
	Queue Variant `json:"queue"`
}

// queueSlugMax bounds the part of a queue token taken from the name, so
// that subjects and consumer names stay short.
const queueSlugMax = 40

// QueueToken is the queue token of a model that is not one of the seed's
// variants: its kind, "_", and its name in lower case with every run of
// characters outside a-z and 0-9 made one "_". When that changed the name
// (or cut it to queueSlugMax), "_" and 8 hex digits of the name's SHA-256
// follow, so that names differing in case or punctuation get different
// tokens. A token therefore starts with a lower-case letter (never A, B or
// C), holds no "-" (so genq-worker-<Q> never reads as a routed consumer's
// genq-worker-<V>-to-<W>) and no "." (one subject token: genq.jobs.<Q>
// never matches a routed worker's genq.jobs.<V>.<W>).
func QueueToken(kind ModelKind, name string) Variant {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			under = false
			continue
		}
		if !under && b.Len() > 0 {
			b.WriteByte('_')
			under = true
		}
	}
	slug := strings.TrimSuffix(b.String(), "_")
	if len(slug) > queueSlugMax {
		slug = strings.TrimSuffix(slug[:queueSlugMax], "_")
	}
	if slug != name {
		sum := sha256.Sum256([]byte(name))
		slug += "_" + hex.EncodeToString(sum[:4])
	}
	return Variant(string(kind) + "_" + strings.TrimPrefix(slug, "_"))
}

// IsModelQueue reports whether v is a queue token QueueToken could make
// (not a seed variant): kind_, then a-z, 0-9 and _.
func IsModelQueue(v Variant) bool {
	kind, rest, ok := strings.Cut(string(v), "_")
	if !ok || rest == "" || !slices.Contains(ModelKinds, ModelKind(kind)) {
		return false
	}
	for _, r := range rest {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// queueKind is the kind a model queue token names.
func queueKind(v Variant) ModelKind {
	kind, _, _ := strings.Cut(string(v), "_")
	return ModelKind(kind)
}

// SeedModel is the catalogue's model of a seed variant: named genq-<V>
// (what the seed's /v1/models answered with no worker up), on the
// variant's own queue token.
func SeedModel(v Variant) Model {
	kind := KindChat
	if v.Kind() == OutputImage {
		kind = KindImage
	}
	return Model{Name: "genq-" + string(v), Kind: kind, Queue: v}
}

// Catalog is the models one deployment serves, by name and alias, with
// the default model of each kind: what a request's `model` resolves to.
type Catalog struct {
	models   []Model
	byName   map[string]int // names and aliases, as given
	defaults map[ModelKind]int
	// fallback, when set, takes every name the catalogue does not know
	// (the alias "*").
	fallback int
}

// NewCatalog checks models and aliases (alias → model name or alias) and
// indexes them. The first model of each kind is its default, unless
// defaults names another. Names, aliases and queue tokens must be unique.
func NewCatalog(models []Model, aliases map[string]string, defaults map[ModelKind]string) (*Catalog, error) {
	c := &Catalog{byName: map[string]int{}, defaults: map[ModelKind]int{}, fallback: -1}
	queues := map[Variant]string{}
	for i, m := range models {
		if err := checkModel(m); err != nil {
			return nil, err
		}
		if other, ok := queues[m.Queue]; ok {
			return nil, fmt.Errorf("models %q and %q have the same queue token %s: rename one", other, m.Name, m.Queue)
		}
		queues[m.Queue] = m.Name
		c.models = append(c.models, m)
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			if err := c.add(n, i); err != nil {
				return nil, err
			}
		}
		if _, ok := c.defaults[m.Kind]; !ok {
			c.defaults[m.Kind] = i
		}
	}
	if err := c.addAliases(aliases); err != nil {
		return nil, err
	}
	for kind, name := range defaults {
		i, ok := c.byName[name]
		if !ok || c.models[i].Kind != kind {
			return nil, fmt.Errorf("default %s model %q: no %s model of that name in the catalogue", kind, name, kind)
		}
		c.defaults[kind] = i
	}
	return c, nil
}

func checkModel(m Model) error {
	switch {
	case strings.TrimSpace(m.Name) == "":
		return fmt.Errorf("a model of kind %s has no name", m.Kind)
	case !slices.Contains(ModelKinds, m.Kind):
		return fmt.Errorf("model %q: kind %q: want chat, embedding or image", m.Name, m.Kind)
	case m.Queue == "":
		return fmt.Errorf("model %q has no queue token", m.Name)
	}
	return nil
}

func (c *Catalog) add(name string, i int) error {
	if name == "" || name == "*" {
		return fmt.Errorf("model %q: the name or alias %q is reserved", c.models[i].Name, name)
	}
	if j, ok := c.byName[name]; ok && j != i {
		return fmt.Errorf("the name %q is given to models %q and %q", name, c.models[j].Name, c.models[i].Name)
	}
	c.byName[name] = i
	return nil
}

// addAliases adds the operator's aliases; "*" takes every unknown name.
func (c *Catalog) addAliases(aliases map[string]string) error {
	names := make([]string, 0, len(aliases))
	for a := range aliases {
		names = append(names, a)
	}
	slices.Sort(names) // the same error for the same settings
	for _, alias := range names {
		i, ok := c.byName[aliases[alias]]
		if !ok {
			return fmt.Errorf("alias %q names the model %q, which the catalogue does not hold", alias, aliases[alias])
		}
		if alias == "*" {
			c.fallback = i
			continue
		}
		if err := c.add(alias, i); err != nil {
			return err
		}
	}
	return nil
}

// Resolve finds the model a request's `model` names, for a route that
// serves kind: an empty name is the kind's default. An unknown name, or
// one of another kind, is a NotFound error on the field model
// (IsModelNotFound), which each API answers in its own shape.
func (c *Catalog) Resolve(name string, kind ModelKind) (Model, error) {
	if name == "" {
		if i, ok := c.defaults[kind]; ok {
			return c.models[i], nil
		}
		return Model{}, &Error{Code: NotFound, Field: "model", Message: fmt.Sprintf("no %s model is served here", kind)}
	}
	i, ok := c.byName[name]
	if !ok && c.fallback >= 0 && c.models[c.fallback].Kind == kind {
		i, ok = c.fallback, true
	}
	if !ok {
		return Model{}, UnknownModel(name)
	}
	if m := c.models[i]; m.Kind != kind {
		return Model{}, &Error{Code: NotFound, Field: "model",
			Message: fmt.Sprintf("the model `%s` is a %s model: this route serves %s models", name, m.Kind, kind)}
	}
	return c.models[i], nil
}

// UnknownModel is the error of a `model` the catalogue does not hold, in
// OpenAI's words.
func UnknownModel(name string) *Error {
	return &Error{Code: NotFound, Field: "model", Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", name)}
}

// IsModelNotFound reports whether err is a catalogue's refusal of a
// request's `model`.
func IsModelNotFound(err error) bool {
	return ErrorCode(err) == NotFound && ErrorField(err) == "model"
}

// Lookup finds a model by name or alias, whatever its kind.
func (c *Catalog) Lookup(name string) (Model, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Model{}, false
	}
	return c.models[i], true
}

// ByQueue finds the model of queue token q.
func (c *Catalog) ByQueue(q Variant) (Model, bool) {
	for _, m := range c.models {
		if m.Queue == q {
			return m, true
		}
	}
	return Model{}, false
}

// Default is the default model of kind, if the catalogue has one.
func (c *Catalog) Default(kind ModelKind) (Model, bool) {
	i, ok := c.defaults[kind]
	if !ok {
		return Model{}, false
	}
	return c.models[i], true
}

// Models lists the catalogue's models in the order they were given.
func (c *Catalog) Models() []Model { return slices.Clone(c.models) }

// Queues lists the queue tokens of every model, in order.
func (c *Catalog) Queues() []Variant {
	qs := make([]Variant, len(c.models))
	for i, m := range c.models {
		qs[i] = m.Queue
	}
	return qs
}

// Fallback reports whether unknown names reach a model (the alias "*").
func (c *Catalog) Fallback() bool { return c.fallback >= 0 }
