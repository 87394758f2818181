package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/sdapi"
	"github.com/genq/genq/internal/tenant"
)

// /sdapi/v1: AUTOMATIC1111's web UI API for variant C, the routes Open
// WebUI and SillyTavern call before and for txt2img. Each image is one job
// on the queue, as on /v1/images/generations, with the same limits.

// sdError is the web UI API's error shape: FastAPI's detail, and the kind
// of error beside it as the web UI's own handler writes it.
type sdError struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// writeSDError answers with err in the web UI API's shape.
func writeSDError(w http.ResponseWriter, log *slog.Logger, err error) {
	status := errorStatus(w, log, err)
	writeJSON(w, status, sdError{Error: http.StatusText(status), Detail: genq.ErrorMessage(err)})
}

// sdModel is the model the live workers serve, as /v1/models names it; ""
// while none is live. With a catalogue, it is its default image model.
func (s *Server) sdModel() string {
	if s.namedModels() {
		m, _ := s.catalog.Default(genq.KindImage)
		return m.Name
	}
	if m := s.liveModels(); len(m) > 0 {
		return m[0].ID
	}
	return ""
}

// sdCheckpoint is the image model a txt2img request's
// override_settings.sd_model_checkpoint names (without it, the one its
// tenant chose by POST /sdapi/v1/options, else the default one), and the
// name the request is checked against. Without a catalogue it is the one
// model served, as before; with one, a name the catalogue does not hold is
// a 404, as /v1/images/generations answers it.
func (s *Server) sdCheckpoint(r *http.Request, body []byte) (genq.Model, string, error) {
	if !s.namedModels() {
		return genq.Model{Name: s.sdModel(), Queue: s.cfg.Variant}, s.sdModel(), nil
	}
	asked, err := sdapi.Checkpoint(body)
	if err != nil {
		return genq.Model{}, "", err
	}
	if asked == "" {
		asked = s.sdChosen.get(tenantName(r))
	}
	m, err := s.resolveModel(asked, genq.KindImage)
	if genq.IsModelNotFound(err) && asked != "" {
		err = notAnSDModel("override_settings.sd_model_checkpoint", asked, err)
	}
	// The request names the model as it asked (an alias, say), which
	// Txt2Img checks the name against.
	return m, cmp.Or(asked, m.Name), err
}

func notAnSDModel(field, name string, err error) error {
	return &genq.Error{Code: genq.NotFound, Field: "model", Err: err,
		Message: fmt.Sprintf("%s %q is not a model served here (GET /sdapi/v1/sd-models lists them)", field, name)}
}

// sdOptionsModel is the model GET /sdapi/v1/options names for r: its
// tenant's choice, else the default.
func (s *Server) sdOptionsModel(r *http.Request) string {
	if s.namedModels() {
		if chosen := s.sdChosen.get(tenantName(r)); chosen != "" {
			return chosen
		}
	}
	return s.sdModel()
}

func (s *Server) handleSDOptions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, sdapi.Options(s.sdOptionsModel(r)))
}

// handleSDSetOptions takes the web UI's settings. With a catalogue its
// sd_model_checkpoint chooses, as in the web UI, the image model of the
// later txt2img requests that name none, for the caller's tenant alone
// and on this api alone (docs/api.md); without one, only the model served
// may be set, as before.
func (s *Server) handleSDSetOptions(w http.ResponseWriter, r *http.Request) {
	body, ok := s.requestBodyOf(w, r, writeSDError, s.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	err := s.setSDOptions(r, body)
	if err != nil {
		s.rejectAs(w, err, writeSDError)
		return
	}
	writeJSON(w, http.StatusOK, nil)
}

func (s *Server) setSDOptions(r *http.Request, body []byte) error {
	if !s.namedModels() {
		return sdapi.SetOptions(body, s.sdModel())
	}
	ckpt, set, err := sdapi.OptionsCheckpoint(body)
	if err != nil || !set {
		return err
	}
	m, err := s.catalog.Resolve(ckpt, genq.KindImage)
	if err == nil && !keyAllows(r, openai.Model{ID: m.Name, Aliases: m.Aliases}) {
		err = genq.UnknownModel(ckpt) // a model the key may not use reads as none
	}
	if err != nil {
		return notAnSDModel("sd_model_checkpoint", ckpt, err)
	}
	s.sdChosen.set(tenantName(r), m.Name)
	return nil
}

// sdChoices are the image models POST /sdapi/v1/options chose, by tenant.
// The web UI keeps one setting for the whole server; here one key's
// choice must not change another's model, so each tenant has its own.
type sdChoices struct {
	mu       sync.Mutex
	byTenant map[string]string
}

func (c *sdChoices) get(tenant string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byTenant[tenant]
}

func (c *sdChoices) set(tenant, model string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byTenant == nil {
		c.byTenant = map[string]string{}
	}
	c.byTenant[tenant] = model
}

// tenantName is the name of r's tenant: its key's, or the open tenant's
// (a tenant's name is never empty: tenant.ValidName).
func tenantName(r *http.Request) string { return cmp.Or(tenantOf(r), openTenant) }

// handleSDModels lists the live workers' model, or with a catalogue its
// image models (those r's key may use), which txt2img's
// sd_model_checkpoint picks from.
func (s *Server) handleSDModels(w http.ResponseWriter, r *http.Request) {
	var ids []string
	for _, m := range s.listedModels(r) {
		if !s.namedModels() || m.Kind == string(genq.KindImage) {
			ids = append(ids, m.ID)
		}
	}
	writeJSON(w, http.StatusOK, sdapi.Models(ids))
}

func (s *Server) handleSDSamplers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, sdapi.Samplers())
}

func (s *Server) handleSDSchedulers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, sdapi.Schedulers())
}

// handleSDNone answers the lists this server has nothing in (upscalers,
// VAEs, LoRAs, styles): clients list them before they generate.
func (s *Server) handleSDNone(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, []any{})
}

func (s *Server) handleTxt2Img(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if err := s.requireKind(genq.KindImage, r.URL.Path, "; use /v1/chat/completions"); err != nil {
		discardBody(w, r)
		s.rejectAs(w, err, writeSDError)
		return
	}
	body, ok := s.requestBodyOf(w, r, writeSDError, s.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	m, model, err := s.sdCheckpoint(r, body)
	if err != nil {
		s.rejectAs(w, err, writeSDError)
		return
	}
	tmpl := genq.Job{Envelope: genq.Envelope{ID: s.newID(), Variant: m.Queue, Deadline: start.Add(s.cfg.JobTimeout)}}
	plan, err := sdapi.Txt2Img(body, s.imageLimits(), s.promptBytes(), tmpl, s.newID, rand.Int64N(1<<32), model)
	if err == nil {
		err = s.checkImages(plan.Jobs, "images (batch_size × n_iter)")
	}
	if err != nil {
		s.rejectAs(w, err, writeSDError)
		return
	}
	if err := s.admit(w, r, admission{model: model, resolved: m, cost: tenant.Cost{Images: int64(len(plan.Jobs))}, deadline: tmpl.Deadline}); err != nil {
		writeSDError(w, s.log, err)
		return
	}
	jobs := plan.Jobs
	log := s.log.With("job_id", jobs[0].ID, "route", r.URL.Path, "n", len(jobs))
	w.Header().Set(HeaderJobID, jobs[0].ID)

	ctx, cancel := context.WithDeadline(r.Context(), jobs[0].Deadline)
	defer cancel()
	images, err := s.runImages(ctx, jobs, start, log)
	if err != nil {
		writeSDError(w, log, err)
		return
	}
	width, height, _ := imageSize(base64.NewDecoder(base64.StdEncoding, strings.NewReader(images[0])))
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, plan.Answer(images, width, height, start))
	log.Info("generate done", "ms", time.Since(start).Milliseconds())
}
