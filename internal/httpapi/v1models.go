package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// handleModels lists the models the live workers serve, as their heartbeats
// name them (the GGUF file or the export's directory), each created when
// its first live worker started. With no worker live the list is empty:
// which model a worker would load is the worker's to say.
// With a catalogue, it lists the catalogue's models instead, each with
// its kind, its context and the workers that hold it, are loading it or
// can load it (catalogModels).
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, openai.ModelList{Object: "list", Data: s.listedModels(r)})
}

// listedModels are the catalogue's models, or without one the live
// workers' files, those r's key may use (keyAllows).
func (s *Server) listedModels(r *http.Request) []openai.Model {
	models := s.liveModels()
	if s.namedModels() {
		models = s.catalogModels()
	}
	return slices.DeleteFunc(models, func(m openai.Model) bool { return !keyAllows(r, m) })
}

// keyAllows reports whether r's key may use m: a key with a models= list
// sees only the models it names (by name or by one of their aliases),
// as OpenAI's lists show a key only what it may call.
func keyAllows(r *http.Request, m openai.Model) bool {
	c := callerOf(r.Context())
	return c == nil || allowsNamed(c.tenant, m.ID, m.Aliases)
}

// handleModel is one model of the list, or a 404 in OpenAI's words (a
// model the key may not use too). The id is the rest of the path: a
// model's name may hold slashes.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "*")
	if m, ok := s.catalog.Lookup(id); ok && s.namedModels() {
		id = m.Name // an alias reads as its model
	}
	for _, m := range s.listedModels(r) {
		if m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	if s.namedModels() {
		writeV1Error(w, s.log, genq.UnknownModel(id))
		return
	}
	writeV1Error(w, s.log, genq.Errorf(genq.NotFound, "the model %q does not exist: GET /v1/models lists the models served", id))
}

// liveModels are the models the live workers serve, sorted by id.
func (s *Server) liveModels() []openai.Model {
	byID := map[string]int64{}
	for _, hb := range s.workers.Live() {
		if c, ok := byID[hb.Model]; !ok || hb.StartedAt.Unix() < c {
			byID[hb.Model] = hb.StartedAt.Unix()
		}
	}
	models := []openai.Model{}
	for id, created := range byID {
		models = append(models, openai.Model{ID: id, Object: "model", Created: created, OwnedBy: "genq"})
	}
	slices.SortFunc(models, func(a, b openai.Model) int { return strings.Compare(a.ID, b.ID) })
	return models
}
