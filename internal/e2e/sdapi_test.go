package e2e

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/onnx"
)

// sdCall sends one request to the web UI API with an Authorization header
// as its clients send it ("" sends none).
func (s *stack) sdCall(method, path, auth, body string) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.api.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: resp.StatusCode, body: b, header: resp.Header}
}

type txt2imgAnswer struct {
	Images     []string       `json:"images"`
	Parameters map[string]any `json:"parameters"`
	Info       string         `json:"info"`
}

type txt2imgInfo struct {
	Seed        int64    `json:"seed"`
	AllSeeds    []int64  `json:"all_seeds"`
	AllPrompts  []string `json:"all_prompts"`
	Width       int      `json:"width"`
	Height      int      `json:"height"`
	SamplerName string   `json:"sampler_name"`
	Model       string   `json:"sd_model_name"`
}

// sdImages decodes a txt2img answer's PNGs, checking their size, and its
// info.
func sdImages(t *testing.T, r response, w, h int) ([][]byte, txt2imgInfo) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("%d %.300s", r.status, r.body)
	}
	out := decodeAs[txt2imgAnswer](t, r)
	var images [][]byte
	for _, b64 := range out.Images {
		images = append(images, decodePNG(t, b64, w, h))
	}
	var info txt2imgInfo
	if err := json.Unmarshal([]byte(out.Info), &info); err != nil {
		t.Fatalf("info %q: %v", out.Info, err)
	}
	if len(info.AllSeeds) != len(images) || info.Width != w || info.Height != h || info.SamplerName != "Euler" {
		t.Fatalf("info %+v for %d images of %dx%d", info, len(images), w, h)
	}
	return images, info
}

// TestWebUIAPI: AUTOMATIC1111's API as Open WebUI and SillyTavern call it,
// on a real worker making the tiny SD3 export's images.
func TestWebUIAPI(t *testing.T) {
	const key = "sk-test"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("webui:"+key))
	s := newStack(t, stackOptions{variant: genq.VariantC, http: httpapi.Config{APIKeys: []string{key},
		Images: httpapi.ImageLimits{MaxSize: 128, MaxSteps: 4, MaxN: 2}}})
	s.tinyImageWorker(onnx.Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Steps: 2, MaxSize: 128, MaxSteps: 4}})

	t.Run("Open WebUI", func(t *testing.T) {
		// Its URL check and model list, then the model set back as read.
		opts := s.sdCall(http.MethodGet, "/sdapi/v1/options", basic, "")
		var options map[string]any
		if err := json.Unmarshal(opts.body, &options); opts.status != http.StatusOK || err != nil {
			t.Fatalf("options: %d %s", opts.status, opts.body)
		}
		model, _ := options["sd_model_checkpoint"].(string)
		models := s.sdCall(http.MethodGet, "/sdapi/v1/sd-models", basic, "")
		if models.status != http.StatusOK || model == "" || !strings.Contains(string(models.body), `"title":"`+model+`"`) {
			t.Fatalf("options name %q; sd-models: %d %s", model, models.status, models.body)
		}
		if r := s.sdCall(http.MethodPost, "/sdapi/v1/options", basic, string(opts.body)); r.status != http.StatusOK {
			t.Fatalf("options set back: %d %s", r.status, r.body)
		}
		// Its txt2img: size from its setting, steps when set, and the
		// admin's sampler and scheduler.
		r := s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", basic,
			`{"prompt":"a lighthouse at dusk","batch_size":1,"width":64,"height":64,"steps":2,"cfg_scale":7,"sampler_name":"Euler","scheduler":"Automatic"}`)
		images, info := sdImages(t, r, 64, 64)
		if len(images) != 1 || info.Model != model || info.AllPrompts[0] != "a lighthouse at dusk" {
			t.Fatalf("%d images, info %+v", len(images), info)
		}
	})
	t.Run("SillyTavern", func(t *testing.T) {
		body := `{"prompt":"a knight, portrait","negative_prompt":"blurry","sampler_name":"Euler","scheduler":"automatic",
			"steps":3,"cfg_scale":4.5,"width":64,"height":96,"restore_faces":false,"enable_hr":false,"hr_upscaler":"Latent",
			"hr_scale":1,"hr_additional_modules":[],"denoising_strength":0.7,"hr_second_pass_steps":0,"seed":5,
			"override_settings":{"CLIP_stop_at_last_layers":1},"override_settings_restore_afterwards":true,"clip_skip":1,
			"save_images":false,"send_images":true,"do_not_save_grid":false,"do_not_save_samples":false,"batch_size":2,"n_iter":1}`
		first, info := sdImages(t, s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", basic, body), 64, 96)
		if len(first) != 2 || bytes.Equal(first[0], first[1]) || info.AllSeeds[0] != 5 || info.AllSeeds[1] != 6 {
			t.Fatalf("%d images (alike: %v), seeds %v", len(first), len(first) == 2 && bytes.Equal(first[0], first[1]), info.AllSeeds)
		}
		again, _ := sdImages(t, s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", basic, body), 64, 96)
		if !bytes.Equal(first[0], again[0]) {
			t.Fatal("the same seed gave another image")
		}
		for _, list := range []string{"samplers", "schedulers", "upscalers", "latent-upscale-modes", "sd-vae", "loras", "prompt-styles"} {
			if r := s.sdCall(http.MethodGet, "/sdapi/v1/"+list, basic, ""); r.status != http.StatusOK || r.body[0] != '[' {
				t.Fatalf("%s: %d %s", list, r.status, r.body)
			}
		}
	})
	t.Run("any seed, a Bearer key", func(t *testing.T) {
		_, info := sdImages(t, s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", "Bearer "+key, `{"prompt":"a fox","seed":-1}`), 64, 64)
		if info.Seed < 0 || info.AllSeeds[0] != info.Seed {
			t.Fatalf("seed -1 reported as %d, %v", info.Seed, info.AllSeeds)
		}
	})
	t.Run("send_images false", func(t *testing.T) {
		r := s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", basic, `{"prompt":"a fox","send_images":false}`)
		if out := decodeAs[txt2imgAnswer](t, r); r.status != http.StatusOK || len(out.Images) != 0 || out.Info == "" {
			t.Fatalf("%d %.300s", r.status, r.body)
		}
	})
	for _, tt := range []struct {
		name, auth, method, path, body string
		status                         int
		detail                         string
	}{
		{"sampler", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","sampler_name":"DPM++ 2M Karras"}`, 400, `sampler_name "DPM++ 2M Karras" is not available`},
		{"sampler index", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","sampler_index":"Euler a"}`, 400, `sampler_name "Euler a"`},
		{"scheduler", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","scheduler":"karras"}`, 400, `scheduler "karras" is not available`},
		{"hires fix", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","enable_hr":true}`, 400, "enable_hr"},
		{"scripts", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","alwayson_scripts":{"ADetailer":{"args":[]}}}`, 400, "alwayson_scripts"},
		{"size", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","width":100,"height":64}`, 400, "multiples of 16"},
		{"width alone", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","width":64}`, 400, "width and height go together"},
		{"width a string", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","width":"64","height":64}`, 400, "width must be"},
		{"images", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","batch_size":2,"n_iter":2}`, 400, "batch_size × n_iter asks for 4 images"},
		{"steps", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","steps":50}`, 400, "steps must be between 1 and 4"},
		{"seed", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","seed":-7}`, 400, "seed must be -1"},
		{"cfg", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","cfg_scale":99}`, 400, "cfg_scale must be between 0 and 30"},
		{"no prompt", basic, "POST", "/sdapi/v1/txt2img", `{"steps":2}`, 400, "prompt is required"},
		{"another model", basic, "POST", "/sdapi/v1/txt2img", `{"prompt":"x","override_settings":{"sd_model_checkpoint":"sdxl.safetensors"}}`, 400, `"sdxl.safetensors" is not served here`},
		{"set another model", basic, "POST", "/sdapi/v1/options", `{"sd_model_checkpoint":"sdxl.safetensors"}`, 400, "is not served here"},
		{"not JSON", basic, "POST", "/sdapi/v1/txt2img", `prompt=x`, 400, "must be a JSON object"},
		{"no key", "", "GET", "/sdapi/v1/options", "", 401, "a valid API key is required"},
		{"wrong key", "Basic " + base64.StdEncoding.EncodeToString([]byte("webui:nope")), "POST", "/sdapi/v1/txt2img", `{"prompt":"x"}`, 401, "a valid API key is required"},
		{"no route", basic, "POST", "/sdapi/v1/img2img", `{"prompt":"x"}`, 404, "no route /sdapi/v1/img2img"},
		{"method", basic, "GET", "/sdapi/v1/txt2img", "", 405, "method GET is not allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.sdCall(tt.method, tt.path, tt.auth, tt.body)
			var e struct{ Error, Detail string }
			if err := json.Unmarshal(r.body, &e); err != nil || r.status != tt.status || e.Error != http.StatusText(tt.status) || !strings.Contains(e.Detail, tt.detail) {
				t.Fatalf("%d %s; want %d with %q", r.status, r.body, tt.status, tt.detail)
			}
		})
	}
}

// TestWebUIAPIByCatalogue: with a catalogue, GET /sdapi/v1/sd-models lists
// its image models, and txt2img's override_settings.sd_model_checkpoint
// picks one by name or alias; a model the catalogue lacks is a 404 in the
// web UI API's shape, nothing queued.
func TestWebUIAPIByCatalogue(t *testing.T) {
	cat, err := genq.NewCatalog([]genq.Model{
		{Name: "sd3-tiny", Kind: genq.KindImage, Queue: genq.VariantC, Aliases: []string{"sd3.safetensors"}},
		{Name: "sd3-other", Kind: genq.KindImage, Queue: genq.QueueToken(genq.KindImage, "sd3-other")},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{variant: genq.VariantC, http: httpapi.Config{Catalog: cat,
		Images: httpapi.ImageLimits{MaxSize: 128, MaxSteps: 4, MaxN: 2}}})
	s.tinyImageWorker(onnx.Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Steps: 2, MaxSize: 128, MaxSteps: 4}})

	var listed []struct {
		Title string `json:"title"`
	}
	if r := s.sdCall(http.MethodGet, "/sdapi/v1/sd-models", "", ""); r.status != 200 || json.Unmarshal(r.body, &listed) != nil ||
		len(listed) != 2 || listed[0].Title != "sd3-tiny" || listed[1].Title != "sd3-other" {
		t.Fatalf("sd-models: %d %s; want sd3-tiny and sd3-other", r.status, r.body)
	}
	for _, ckpt := range []string{"sd3-tiny", "sd3.safetensors", ""} {
		body := `{"prompt":"a fox","steps":2,"override_settings":{"sd_model_checkpoint":"` + ckpt + `"}}`
		if _, info := sdImages(t, s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", "", body), 64, 64); info.Model != cmp.Or(ckpt, "sd3-tiny") {
			t.Errorf("checkpoint %q: the answer names %q", ckpt, info.Model)
		}
	}
	before := s.jobsPublished()
	r := s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", "", `{"prompt":"x","override_settings":{"sd_model_checkpoint":"sdxl.safetensors"}}`)
	var e struct{ Error, Detail string }
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != 404 || e.Error != "Not Found" ||
		!strings.Contains(e.Detail, `override_settings.sd_model_checkpoint "sdxl.safetensors" is not a model served here`) {
		t.Errorf("an unknown checkpoint: %d %s; want a 404 in the web UI API's shape", r.status, r.body)
	}
	if after := s.jobsPublished(); after != before {
		t.Errorf("%d jobs queued for an unknown checkpoint", after-before)
	}
}

// TestWebUIAPIOptionsChooseModel: with a catalogue, POST /sdapi/v1/options
// with sd_model_checkpoint chooses, as in the web UI, the image model of
// the later txt2img requests that name none, for the caller's key alone:
// another key keeps the default. A model the catalogue lacks is a 404.
func TestWebUIAPIOptionsChooseModel(t *testing.T) {
	cat, err := genq.NewCatalog([]genq.Model{
		{Name: "sd3-tiny", Kind: genq.KindImage, Queue: genq.VariantC, Aliases: []string{"sd3.safetensors"}},
		// The default, which no worker serves: a txt2img that reached it
		// would wait to its deadline.
		{Name: "sd3-other", Kind: genq.KindImage, Queue: genq.QueueToken(genq.KindImage, "sd3-other")},
	}, nil, map[genq.ModelKind]string{genq.KindImage: "sd3-other"})
	if err != nil {
		t.Fatal(err)
	}
	const keyA, keyB = "sk-a", "sk-b"
	bearer := func(k string) string { return "Bearer " + k }
	s := newStack(t, stackOptions{variant: genq.VariantC, http: httpapi.Config{Catalog: cat, APIKeys: []string{keyA, keyB},
		Images: httpapi.ImageLimits{MaxSize: 128, MaxSteps: 4, MaxN: 2}}})
	s.tinyImageWorker(onnx.Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Steps: 2, MaxSize: 128, MaxSteps: 4}})
	optionsModel := func(key string) string {
		t.Helper()
		var o map[string]any
		r := s.sdCall(http.MethodGet, "/sdapi/v1/options", bearer(key), "")
		if r.status != 200 || json.Unmarshal(r.body, &o) != nil {
			t.Fatalf("options: %d %s", r.status, r.body)
		}
		m, _ := o["sd_model_checkpoint"].(string)
		return m
	}
	if a, b := optionsModel(keyA), optionsModel(keyB); a != "sd3-other" || b != "sd3-other" {
		t.Fatalf("options before any choice name %q and %q; want the default, sd3-other", a, b)
	}
	if r := s.sdCall(http.MethodPost, "/sdapi/v1/options", bearer(keyA), `{"sd_model_checkpoint":"sd3.safetensors","samples_format":"png"}`); r.status != 200 {
		t.Fatalf("choosing sd3-tiny by its alias: %d %s", r.status, r.body)
	}
	if a, b := optionsModel(keyA), optionsModel(keyB); a != "sd3-tiny" || b != "sd3-other" {
		t.Errorf("options after key A chose name %q for A and %q for B; want sd3-tiny and sd3-other", a, b)
	}
	r := s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", bearer(keyA), `{"prompt":"a fox","steps":2}`)
	if _, info := sdImages(t, r, 64, 64); info.Model != "sd3-tiny" {
		t.Errorf("txt2img after the choice names %q; want sd3-tiny", info.Model)
	}
	r = s.sdCall(http.MethodPost, "/sdapi/v1/options", bearer(keyA), `{"sd_model_checkpoint":"sdxl.safetensors"}`)
	var e struct{ Error, Detail string }
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != 404 ||
		!strings.Contains(e.Detail, `sd_model_checkpoint "sdxl.safetensors" is not a model served here`) {
		t.Errorf("choosing an unknown model: %d %s; want a 404 in the web UI API's shape", r.status, r.body)
	}
	if a := optionsModel(keyA); a != "sd3-tiny" {
		t.Errorf("a refused choice changed A's model to %q", a)
	}
}

func TestWebUIAPIOnTextVariant(t *testing.T) {
	s := newStack(t, stackOptions{variant: genq.VariantB})
	r := s.sdCall(http.MethodPost, "/sdapi/v1/txt2img", "", `{"prompt":"a cat"}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "needs the image variant") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
