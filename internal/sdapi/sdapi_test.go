package sdapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

func plan(t *testing.T, body string) (Plan, error) {
	t.Helper()
	n := 0
	newID := func() string { n++; return fmt.Sprintf("job-%d", n) }
	tmpl := genq.Job{Envelope: genq.Envelope{ID: "job-0", Variant: genq.VariantC, Deadline: time.Now().Add(time.Minute)}}
	return Txt2Img([]byte(body), Limits{MaxSize: 1024, MaxSteps: 50, MaxN: 4}, 1000, tmpl, newID, 1234, "sd3-medium")
}

func TestTxt2ImgJobs(t *testing.T) {
	for _, tt := range []struct {
		name, body  string
		seeds       []int64
		width, step int
	}{
		{"defaults: one image, the server's seed and the worker's size", `{"prompt":"a fox"}`, []int64{1234}, 0, 0},
		{"seed -1 is the server's", `{"prompt":"a fox","seed":-1,"batch_size":2}`, []int64{1234, 1235}, 0, 0},
		{"batch_size × n_iter images, consecutive seeds", `{"prompt":"a fox","seed":7,"batch_size":2,"n_iter":2,"width":512,"height":768,"steps":20}`, []int64{7, 8, 9, 10}, 512, 20},
		{"the web UI's sampler and schedule by any of their names", `{"prompt":"a fox","sampler_name":"euler","scheduler":"Automatic","seed":0}`, []int64{0}, 0, 0},
		{"fields of no use here are ignored", `{"prompt":"a fox","seed":3,"enable_hr":false,"hr_scale":2,"denoising_strength":0.7,"override_settings":{"CLIP_stop_at_last_layers":2,"sd_model_checkpoint":"sd3-medium"}}`, []int64{3}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := plan(t, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			var seeds []int64
			ids := map[string]bool{}
			for _, j := range p.Jobs {
				seeds = append(seeds, *j.Seed)
				ids[j.ID] = true
				if j.Text != "a fox" || j.Width != tt.width || j.Steps != tt.step || j.Variant != genq.VariantC {
					t.Fatalf("job %+v", j)
				}
			}
			if fmt.Sprint(seeds) != fmt.Sprint(tt.seeds) || len(ids) != len(p.Jobs) {
				t.Fatalf("seeds %v (ids %v), want %v, each job its own id", seeds, ids, tt.seeds)
			}
		})
	}
}

func TestTxt2ImgRefusals(t *testing.T) {
	for _, tt := range []struct{ body, field string }{
		{`{}`, "prompt is required"},
		{`{"prompt":"x","sampler_name":"Euler a"}`, `sampler_name "Euler a"`},
		{`{"prompt":"x","scheduler":"Karras"}`, `scheduler "Karras"`},
		{`{"prompt":"x","restore_faces":true}`, "restore_faces"},
		{`{"prompt":"x","tiling":true}`, "tiling"},
		{`{"prompt":"x","styles":["cinematic"]}`, "styles"},
		{`{"prompt":"x","subseed_strength":0.5}`, "subseed_strength"},
		{`{"prompt":"x","script_name":"x/y/z plot"}`, "script_name"},
		{`{"prompt":"x","batch_size":0}`, "batch_size and n_iter must be at least 1"},
		{`{"prompt":"x","batch_size":5}`, "asks for 5 images"},
		{`{"prompt":"x","height":512}`, "width and height go together"},
		{`{"prompt":"x","width":2048,"height":512}`, "from 64 to 1024"},
		{`{"prompt":"x","steps":51}`, "steps must be between 1 and 50"},
		{`{"prompt":"x","cfg_scale":-1}`, "cfg_scale must be between 0 and 30"},
		{`{"prompt":"x","seed":-2}`, "seed must be -1"},
		{`{"prompt":"x","override_settings":{"sd_model_checkpoint":"sdxl"}}`, `"sdxl" is not served here`},
		{`{"prompt":"` + strings.Repeat("x", 1001) + `"}`, "limited to 1000 bytes"},
	} {
		t.Run(tt.field, func(t *testing.T) {
			_, err := plan(t, tt.body)
			if genq.ErrorCode(err) != genq.Invalid || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("%v; want an invalid request naming %q", err, tt.field)
			}
		})
	}
}

func TestTxt2ImgAnswer(t *testing.T) {
	p, err := plan(t, `{"prompt":"a fox","negative_prompt":"blur","seed":7,"batch_size":2,"steps":20,"cfg_scale":4.5}`)
	if err != nil {
		t.Fatal(err)
	}
	a := p.Answer([]string{"aW1n", "aW1n"}, 512, 512, time.Date(2026, 11, 25, 10, 4, 5, 0, time.UTC))
	var info struct {
		AllSeeds  []int64 `json:"all_seeds"`
		Steps     int     `json:"steps"`
		CFG       float64 `json:"cfg_scale"`
		Model     string  `json:"sd_model_name"`
		Timestamp string  `json:"job_timestamp"`
		Negative  string  `json:"negative_prompt"`
	}
	if err := json.Unmarshal([]byte(a.Info), &info); err != nil {
		t.Fatal(err)
	}
	if len(a.Images) != 2 || fmt.Sprint(info.AllSeeds) != "[7 8]" || info.Steps != 20 || info.CFG != 4.5 ||
		info.Model != "sd3-medium" || info.Timestamp != "20261125100405" || info.Negative != "blur" {
		t.Fatalf("answer %+v, info %+v", a, info)
	}
	if a.Parameters["sampler_name"] != Sampler || a.Parameters["batch_size"] != 2 {
		t.Fatalf("parameters %v", a.Parameters)
	}
	p, _ = plan(t, `{"prompt":"a fox","send_images":false}`)
	if a := p.Answer([]string{"aW1n"}, 64, 64, time.Now()); len(a.Images) != 0 || a.Images == nil {
		t.Fatalf("send_images false answered images %v (want [] in JSON)", a.Images)
	}
}

func TestSetOptions(t *testing.T) {
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{"sd_model_checkpoint":"sd3-medium","CLIP_stop_at_last_layers":1}`, true},
		{`{"samples_format":"png"}`, true},
		{`{"sd_model_checkpoint":"sdxl"}`, false},
		{`{"sd_model_checkpoint":7}`, false},
		{`[]`, false},
	} {
		if err := SetOptions([]byte(tt.body), "sd3-medium"); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.body, err)
		}
	}
}

func TestOptionsCheckpoint(t *testing.T) {
	for _, tt := range []struct {
		body string
		ckpt string
		set  bool
		ok   bool
	}{
		{`{"sd_model_checkpoint":"sd3-other","CLIP_stop_at_last_layers":1}`, "sd3-other", true, true},
		{`{"samples_format":"png"}`, "", false, true},
		{`{"sd_model_checkpoint":7}`, "", false, false},
		{`{"sd_model_checkpoint":""}`, "", false, false},
		{`[]`, "", false, false},
	} {
		ckpt, set, err := OptionsCheckpoint([]byte(tt.body))
		if ckpt != tt.ckpt || set != tt.set || (err == nil) != tt.ok {
			t.Errorf("%s: %q, %v, %v; want %q, %v, ok %v", tt.body, ckpt, set, err, tt.ckpt, tt.set, tt.ok)
		}
	}
}
