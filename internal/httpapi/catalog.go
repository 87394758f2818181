package httpapi

import (
	"fmt"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// catalogOf is the catalogue a server answers from: cfg's, or with none
// the variant's model alone, which takes every name (as before there was a
// catalogue).
func catalogOf(cfg Config) *genq.Catalog {
	if cfg.Catalog != nil {
		return cfg.Catalog
	}
	seed := genq.SeedModel(cfg.Variant)
	c, err := genq.NewCatalog([]genq.Model{seed}, map[string]string{"*": seed.Name}, nil)
	if err != nil {
		panic(err) // one model and its own name: nothing can clash
	}
	return c
}

// namedModels reports whether answers name the catalogue's models: with a
// catalogue declared they do; without one, answers and GET /v1/models
// name the file the workers loaded, as before.
func (s *Server) namedModels() bool {
	return !(s.catalog.Fallback() && len(s.catalog.Models()) == 1)
}

// requireKind refuses a route of kind when the catalogue has no model of
// it, in the words the seed's variants used.
func (s *Server) requireKind(kind genq.ModelKind, what, hint string) error {
	if _, ok := s.catalog.Default(kind); ok {
		return nil
	}
	return openai.RequireKind(s.cfg.Variant, kind.Output(), what, hint)
}

// resolveModel finds the model a request names (or the kind's default).
// An unknown model is refused before anything is queued, and so is one
// that every live worker of it says it can never load (unloadable);
// errorStatus logs the refusal with the field.
func (s *Server) resolveModel(name string, kind genq.ModelKind) (genq.Model, error) {
	m, err := s.catalog.Resolve(name, kind)
	if err != nil {
		return m, err
	}
	return m, s.loadableSomewhere(m)
}

// loadableSomewhere refuses m when workers of it are live and none can
// load it: its job would wait, unpulled, to its deadline. With no live
// worker at all it waits as before (a worker may be starting, or scaled
// from zero).
func (s *Server) loadableSomewhere(m genq.Model) error {
	live := s.liveOf(m.Queue)
	for _, hb := range live {
		if hb.ModelState != genq.ModelUnloadable {
			return nil
		}
	}
	if len(live) == 0 {
		return nil
	}
	return &genq.Error{Code: genq.Unavailable, Field: "model",
		Message: fmt.Sprintf("no live worker can load the model %s: %s", m.Name, live[0].LoadError)}
}

// kindQueue is the queue of kind's default model, on which a request of
// that kind is decoded (its fields checked as that kind's) before its
// own model is known; the variant's without one.
func (s *Server) kindQueue(kind genq.ModelKind) genq.Variant {
	if m, ok := s.catalog.Default(kind); ok {
		return m.Queue
	}
	return s.cfg.Variant
}

// variantModel is the model of the variant's own queue, which /generate
// queues on: the catalogue's model of that queue, or the seed's.
func (s *Server) variantModel() genq.Model {
	for _, m := range s.catalog.Models() {
		if m.Queue == s.cfg.Variant {
			return m
		}
	}
	return genq.SeedModel(s.cfg.Variant)
}

// onModel puts jobs on model's queue.
func onModel(jobs []genq.Job, m genq.Model) {
	for i := range jobs {
		jobs[i].Variant = m.Queue
	}
}

// answerModel names the model of an answer: the catalogue's name of the
// model that ran it, or, with no catalogue declared, the worker's file as
// before (modelOf).
func (s *Server) answerModel(m genq.Model, workerID, asked string) string {
	if s.namedModels() && m.Name != "" {
		return m.Name
	}
	return s.modelOf(workerID, asked)
}

// liveOf are the live workers of queue q, as their heartbeats say.
func (s *Server) liveOf(q genq.Variant) []genq.Heartbeat {
	var live []genq.Heartbeat
	for _, hb := range s.fleet.Live() {
		if hb.Variant == q {
			live = append(live, hb)
		}
	}
	return live
}

// workerLimitsOf are the tightest limits of the live workers of queue q
// that hold its model loaded (workerLimits for the seed's).
func (s *Server) workerLimitsOf(q genq.Variant) genq.Limits {
	if q == s.cfg.Variant {
		return s.workerLimits()
	}
	var lims []genq.Limits
	for _, hb := range s.liveOf(q) {
		if hb.Limits != nil && hb.Loaded() {
			lims = append(lims, *hb.Limits)
		}
	}
	return genq.Tightest(lims...)
}

// catalogModels lists the catalogue's models, in its order, with the
// workers that hold each loaded, are loading it, or can load it.
func (s *Server) catalogModels() []openai.Model {
	out := []openai.Model{}
	for _, m := range s.catalog.Models() {
		om := openai.Model{ID: m.Name, Object: "model", OwnedBy: "genq", Kind: string(m.Kind), ContextLength: m.ContextLength, Aliases: m.Aliases}
		for _, hb := range s.liveOf(m.Queue) {
			if om.Created == 0 || hb.StartedAt.Unix() < om.Created {
				om.Created = hb.StartedAt.Unix()
			}
			if hb.Limits != nil && hb.Limits.ContextSize > 0 && hb.Loaded() {
				om.ContextLength = hb.Limits.ContextSize
			}
			switch {
			case hb.ModelState == genq.ModelUnloadable:
				om.UnloadableOn = append(om.UnloadableOn, hb.WorkerID)
				om.LoadError = hb.LoadError
				continue
			case hb.Loaded():
				om.LoadedOn = append(om.LoadedOn, hb.WorkerID)
			case hb.ModelState == genq.ModelLoading:
				om.LoadingOn = append(om.LoadingOn, hb.WorkerID)
				om.LoadProgress = max(om.LoadProgress, hb.LoadProgress)
			}
			om.LoadableOn = append(om.LoadableOn, hb.WorkerID)
		}
		out = append(out, om)
	}
	return out
}

// keepAlive gives jobs the request's keep_alive, when it has one.
func keepAlive(jobs []genq.Job, k genq.KeepAliveParam) {
	if k.Seconds == nil {
		return
	}
	for i := range jobs {
		v := *k.Seconds
		jobs[i].KeepAlive = &v
	}
}
