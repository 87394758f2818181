package openai

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one served model.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// genq's own, for a catalogue's models: the kind, the context, and
	// the workers that hold the model loaded, those that can load it, and
	// those that never can (over their memory budget) with their reason.
	Kind          string   `json:"kind,omitempty"`
	ContextLength int      `json:"context_length,omitempty"`
	Aliases       []string `json:"aliases,omitempty"`
	LoadedOn      []string `json:"loaded_on,omitempty"`
	LoadingOn     []string `json:"loading_on,omitempty"`
	// LoadProgress is how far the furthest of its loads is, 0 to 1.
	LoadProgress float64  `json:"load_progress,omitempty"`
	LoadableOn   []string `json:"loadable_on,omitempty"`
	UnloadableOn []string `json:"unloadable_on,omitempty"`
	LoadError    string   `json:"load_error,omitempty"`
}
