// Package sdapi speaks AUTOMATIC1111's web UI API (/sdapi/v1), the image
// API that Open WebUI, SillyTavern and many scripts drive: it turns a
// txt2img request into genq's image jobs and their PNGs into its answer,
// and describes the one model, sampler and scheduler genq serves in that
// API's words.
package sdapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// Txt2ImgRequest is the body of POST /sdapi/v1/txt2img. Fields this server
// has no use for are read and ignored, as the web UI's own API does; the
// ones that ask for something it cannot do are refused by name.
type Txt2ImgRequest struct {
	Prompt         *string  `json:"prompt"`
	NegativePrompt string   `json:"negative_prompt"`
	Seed           *int64   `json:"seed"`
	SamplerName    string   `json:"sampler_name"`
	SamplerIndex   string   `json:"sampler_index"`
	Scheduler      string   `json:"scheduler"`
	BatchSize      *int     `json:"batch_size"`
	NIter          *int     `json:"n_iter"`
	Steps          *int     `json:"steps"`
	CFGScale       *float64 `json:"cfg_scale"`
	Width          *int     `json:"width"`
	Height         *int     `json:"height"`
	// SendImages false answers without the images (the web UI then saves
	// them, which this server does not do).
	SendImages *bool `json:"send_images"`

	EnableHR         bool           `json:"enable_hr"`
	RestoreFaces     bool           `json:"restore_faces"`
	Tiling           bool           `json:"tiling"`
	Styles           []string       `json:"styles"`
	SubseedStrength  float64        `json:"subseed_strength"`
	ScriptName       string         `json:"script_name"`
	AlwaysOnScripts  map[string]any `json:"alwayson_scripts"`
	OverrideSettings map[string]any `json:"override_settings"`
}

// Limits bound what one txt2img request may ask for: the api's image
// limits, shared with /v1/images/generations.
type Limits = openai.ImageLimits

// Sampler is the one sampler genq runs: SD3's flow-matching Euler steps.
const Sampler = "Euler"

// samplerNames are the names the web UI and its clients give that sampler.
var samplerNames = []string{"euler", "k_euler", "flowmatcheuler", "flow match euler", "euler (flow matching)"}

// schedulerNames are the names of the one schedule genq runs, SD3's shifted
// flow-matching sigmas, which the web UI calls its automatic choice.
var schedulerNames = []string{"automatic"}

// Plan is what a txt2img request becomes: its jobs, one per image, and
// what its answer reports about them.
type Plan struct {
	Jobs []genq.Job
	// Params is the request as understood, defaults filled where this
	// server knows them; the answer's "parameters".
	Params map[string]any
	req    Txt2ImgRequest
	model  string
}

// Txt2Img turns a request into its jobs. tmpl gives the first job's id,
// variant and deadline; the others take ids from newID. seed is used when
// the request leaves the seed to the server (absent or -1), so that the
// answer can say which seeds made the images. model is the model served,
// checked against override_settings.sd_model_checkpoint.
func Txt2Img(body []byte, lim Limits, maxPrompt int, tmpl genq.Job, newID func() string, seed int64, model string) (Plan, error) {
	var req Txt2ImgRequest
	if err := openai.Decode(body, &req); err != nil {
		return Plan{}, err
	}
	lim = lim.WithDefaults()
	if req.Prompt == nil || *req.Prompt == "" {
		return Plan{}, genq.Errorf(genq.Invalid, "prompt is required")
	}
	if len(*req.Prompt) > maxPrompt || len(req.NegativePrompt) > maxPrompt {
		return Plan{}, genq.Errorf(genq.Invalid, "prompt and negative_prompt are limited to %d bytes", maxPrompt)
	}
	if err := req.refuseUnsupported(model); err != nil {
		return Plan{}, err
	}
	batch, iters := 1, 1
	if req.BatchSize != nil {
		batch = *req.BatchSize
	}
	if req.NIter != nil {
		iters = *req.NIter
	}
	if batch < 1 || iters < 1 {
		return Plan{}, genq.Errorf(genq.Invalid, "batch_size and n_iter must be at least 1, not %d and %d", batch, iters)
	}
	if n := batch * iters; n > lim.MaxN {
		return Plan{}, genq.Errorf(genq.Invalid, "batch_size × n_iter asks for %d images, and this server makes at most %d per request", n, lim.MaxN)
	}
	base := genq.Job{
		Envelope:     genq.Envelope{ID: tmpl.ID, Variant: tmpl.Variant, Text: *req.Prompt, Deadline: tmpl.Deadline},
		ImageRequest: genq.ImageRequest{NegativePrompt: req.NegativePrompt, GuidanceScale: req.CFGScale},
	}
	if (req.Width == nil) != (req.Height == nil) {
		return Plan{}, genq.Errorf(genq.Invalid, "width and height go together: send both or neither")
	}
	if req.Width != nil {
		if err := genq.ValidateImageSize(*req.Width, *req.Height, lim.MaxSize); err != nil {
			return Plan{}, err
		}
		base.Width, base.Height = *req.Width, *req.Height
	}
	if req.Steps != nil {
		if *req.Steps < 1 || *req.Steps > lim.MaxSteps {
			return Plan{}, genq.Errorf(genq.Invalid, "steps must be between 1 and %d, not %d", lim.MaxSteps, *req.Steps)
		}
		base.Steps = *req.Steps
	}
	if g := req.CFGScale; g != nil && !(*g >= 0 && *g <= genq.MaxGuidanceScale) {
		return Plan{}, genq.Errorf(genq.Invalid, "cfg_scale must be between 0 and %g, not %v", genq.MaxGuidanceScale, *g)
	}
	first := seed
	if req.Seed != nil && *req.Seed != -1 {
		if *req.Seed < 0 {
			return Plan{}, genq.Errorf(genq.Invalid, "seed must be -1 (any) or at least 0, not %d", *req.Seed)
		}
		first = *req.Seed
	}
	jobs := make([]genq.Job, batch*iters)
	for i := range jobs {
		j := base
		if i > 0 {
			j.ID = newID()
		}
		// As the web UI does: the images of one request take consecutive
		// seeds.
		s := first + int64(i)
		j.Seed = &s
		if err := j.Validate(); err != nil {
			return Plan{}, err
		}
		jobs[i] = j
	}
	return Plan{Jobs: jobs, Params: req.params(batch, iters, first), req: req, model: model}, nil
}

// Checkpoint is the model a txt2img request's
// override_settings.sd_model_checkpoint names, "" when it names none.
func Checkpoint(body []byte) (string, error) {
	var req Txt2ImgRequest
	if err := openai.Decode(body, &req); err != nil {
		return "", err
	}
	s, _ := req.OverrideSettings["sd_model_checkpoint"].(string)
	return s, nil
}

// refuseUnsupported names the first field that asks for what this server
// does not do.
func (r Txt2ImgRequest) refuseUnsupported(model string) error {
	if name := cmp.Or(r.SamplerName, r.SamplerIndex); name != "" && !oneOf(name, samplerNames) {
		return genq.Errorf(genq.Invalid, "sampler_name %q is not available: this server samples SD3 with flow-matching Euler; send %q or leave it out (GET /sdapi/v1/samplers)", name, Sampler)
	}
	if r.Scheduler != "" && !oneOf(r.Scheduler, schedulerNames) {
		return genq.Errorf(genq.Invalid, "scheduler %q is not available: this server runs SD3's own schedule; send \"Automatic\" or leave it out (GET /sdapi/v1/schedulers)", r.Scheduler)
	}
	for _, f := range []struct {
		on   bool
		name string
	}{
		{r.EnableHR, "enable_hr (hires. fix)"},
		{r.RestoreFaces, "restore_faces"},
		{r.Tiling, "tiling"},
		{len(r.Styles) > 0, "styles"},
		{r.SubseedStrength != 0, "subseed_strength (variation seeds)"},
		{r.ScriptName != "", "script_name"},
		{len(r.AlwaysOnScripts) > 0, "alwayson_scripts"},
	} {
		if f.on {
			return genq.Errorf(genq.Invalid, "%s is not supported by this server: leave it out", f.name)
		}
	}
	if ckpt, ok := r.OverrideSettings["sd_model_checkpoint"]; ok {
		if s, _ := ckpt.(string); s != "" && s != model {
			return genq.Errorf(genq.Invalid, "override_settings.sd_model_checkpoint %q is not served here: this server serves %q (GET /sdapi/v1/sd-models)", s, model)
		}
	}
	return nil
}

func oneOf(name string, names []string) bool {
	return slices.Contains(names, strings.ToLower(strings.TrimSpace(name)))
}

func (r Txt2ImgRequest) params(batch, iters int, seed int64) map[string]any {
	p := map[string]any{
		"prompt": *r.Prompt, "negative_prompt": r.NegativePrompt, "seed": seed, "sampler_name": Sampler,
		"scheduler": "Automatic", "batch_size": batch, "n_iter": iters,
	}
	if r.Steps != nil {
		p["steps"] = *r.Steps
	}
	if r.CFGScale != nil {
		p["cfg_scale"] = *r.CFGScale
	}
	if r.Width != nil {
		p["width"], p["height"] = *r.Width, *r.Height
	}
	return p
}

// Txt2ImgResponse is the answer of POST /sdapi/v1/txt2img: the images as
// base64 PNGs, the parameters, and the generation's information as a JSON
// string, as the web UI writes it.
type Txt2ImgResponse struct {
	Images     []string       `json:"images"`
	Parameters map[string]any `json:"parameters"`
	Info       string         `json:"info"`
}

// Answer is the response to p, given its images' base64 PNGs and their
// size (read from the first PNG), made at start.
func (p Plan) Answer(images []string, width, height int, start time.Time) Txt2ImgResponse {
	seeds := make([]int64, len(p.Jobs))
	prompts := make([]string, len(p.Jobs))
	negatives := make([]string, len(p.Jobs))
	for i, j := range p.Jobs {
		seeds[i] = *j.Seed
		prompts[i] = j.Text
		negatives[i] = j.NegativePrompt
	}
	info := map[string]any{
		"prompt": *p.req.Prompt, "all_prompts": prompts, "negative_prompt": p.req.NegativePrompt,
		"all_negative_prompts": negatives, "seed": seeds[0], "all_seeds": seeds, "subseed": -1,
		"width": width, "height": height, "sampler_name": Sampler, "batch_size": len(p.Jobs),
		"sd_model_name": p.model, "job_timestamp": start.UTC().Format("20060102150405"),
	}
	for _, k := range []string{"steps", "cfg_scale"} {
		if v, ok := p.Params[k]; ok {
			info[k] = v
		}
	}
	b, err := json.Marshal(info)
	if err != nil {
		panic(fmt.Sprintf("sdapi: info does not marshal: %v", err)) // plain values only
	}
	if p.req.SendImages != nil && !*p.req.SendImages {
		images = []string{}
	}
	return Txt2ImgResponse{Images: images, Parameters: p.Params, Info: string(b)}
}

// Model is one entry of GET /sdapi/v1/sd-models.
type Model struct {
	Title     string  `json:"title"`
	ModelName string  `json:"model_name"`
	Hash      *string `json:"hash"`
	SHA256    *string `json:"sha256"`
	Filename  string  `json:"filename"`
	Config    *string `json:"config"`
}

// Models lists the models served, each by the name /v1/models gives it.
func Models(ids []string) []Model {
	out := make([]Model, 0, len(ids))
	for _, id := range ids {
		out = append(out, Model{Title: id, ModelName: id, Filename: id})
	}
	return out
}

// Options is GET /sdapi/v1/options: the settings clients read, the model
// first (Open WebUI checks the URL with it and reads the model from it).
func Options(model string) map[string]any {
	return map[string]any{"sd_model_checkpoint": model, "sd_checkpoint_hash": nil, "samples_format": "png",
		"CLIP_stop_at_last_layers": 1}
}

// SetOptions checks POST /sdapi/v1/options: the model may be set to the one
// served (clients post back what they read); other settings are accepted
// and have no effect, as this server has none of the web UI's.
func SetOptions(body []byte, model string) error {
	ckpt, set, err := optionsCheckpoint(body)
	if err != nil {
		return err
	}
	if set {
		if s, _ := ckpt.(string); s != model {
			return genq.Errorf(genq.Invalid, "sd_model_checkpoint %v is not served here: this server serves %q (GET /sdapi/v1/sd-models)", ckpt, model)
		}
	}
	return nil
}

// OptionsCheckpoint reads the sd_model_checkpoint a POST /sdapi/v1/options
// sets, and whether it sets one; the other settings are accepted and have
// no effect, as this server has none of the web UI's.
func OptionsCheckpoint(body []byte) (string, bool, error) {
	ckpt, set, err := optionsCheckpoint(body)
	if err != nil || !set {
		return "", false, err
	}
	s, isString := ckpt.(string)
	if !isString || s == "" {
		return "", false, &genq.Error{Code: genq.Invalid, Field: "sd_model_checkpoint",
			Message: fmt.Sprintf("sd_model_checkpoint %v is not a model's name (GET /sdapi/v1/sd-models lists them)", ckpt)}
	}
	return s, true, nil
}

// optionsCheckpoint decodes a POST /sdapi/v1/options body: its
// sd_model_checkpoint as sent, and whether it sets one.
func optionsCheckpoint(body []byte) (any, bool, error) {
	var opts map[string]any
	if err := openai.Decode(body, &opts); err != nil {
		return nil, false, err
	}
	ckpt, set := opts["sd_model_checkpoint"]
	return ckpt, set, nil
}

// SamplerInfo is one entry of GET /sdapi/v1/samplers.
type SamplerInfo struct {
	Name    string            `json:"name"`
	Aliases []string          `json:"aliases"`
	Options map[string]string `json:"options"`
}

// Samplers lists the one sampler.
func Samplers() []SamplerInfo {
	return []SamplerInfo{{Name: Sampler, Aliases: []string{"euler", "k_euler"}, Options: map[string]string{}}}
}

// SchedulerInfo is one entry of GET /sdapi/v1/schedulers.
type SchedulerInfo struct {
	Name           string   `json:"name"`
	Label          string   `json:"label"`
	Aliases        []string `json:"aliases"`
	DefaultRho     float64  `json:"default_rho"`
	NeedInnerModel bool     `json:"need_inner_model"`
}

// Schedulers lists the one schedule.
func Schedulers() []SchedulerInfo {
	return []SchedulerInfo{{Name: "automatic", Label: "Automatic", Aliases: []string{}, DefaultRho: -1}}
}
