package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
)

// queueJobs records the queue of every job it runs and answers as the
// worker of that queue would.
type queueJobs struct {
	mu     sync.Mutex
	queued []genq.Job
}

func (q *queueJobs) Run(_ context.Context, job genq.Job) (*genq.ReceivedResult, error) {
	q.mu.Lock()
	q.queued = append(q.queued, job)
	q.mu.Unlock()
	body := `{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`
	return &genq.ReceivedResult{JobID: job.ID, ContentType: "application/json", Body: io.NopCloser(strings.NewReader(body)),
		Attempt: 1, Worker: "w-" + string(job.Variant)}, nil
}

func (q *queueJobs) jobs() []genq.Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]genq.Job(nil), q.queued...)
}

func catalogServer(t *testing.T, jobs Jobs, fleet fakeWorkers) http.Handler {
	t.Helper()
	qwen := genq.QueueToken(genq.KindChat, "qwen3")
	cat, err := genq.NewCatalog([]genq.Model{
		{Name: "llama", Kind: genq.KindChat, Queue: genq.VariantB, ContextLength: 4096},
		{Name: "qwen3", Kind: genq.KindChat, Queue: qwen, Aliases: []string{"gpt-4o"}, ContextLength: 8192},
	}, map[string]string{"claude-sonnet-4-5": "qwen3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := 0
	return NewServer(Config{Variant: genq.VariantB, Catalog: cat, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute},
		Deps{Jobs: jobs, Workers: fleet, Fleet: fleet, Registry: prometheus.NewRegistry(),
			NewID: func() string { ids++; return "job-" + string(rune('0'+ids)) }, Log: slog.New(slog.DiscardHandler)})
}

func post(t *testing.T, h http.Handler, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	return rec
}

func TestRoutesByModel(t *testing.T) {
	qwen := genq.QueueToken(genq.KindChat, "qwen3")
	for _, tc := range []struct {
		name, path, body string
		queue            genq.Variant
		answer           string // the model the answer names
		keepAlive        *float64
	}{
		{"chat, named", "/v1/chat/completions", `{"model":"qwen3","messages":[{"role":"user","content":"x"}]}`, qwen, `"model":"qwen3"`, nil},
		{"chat, alias", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, qwen, `"model":"qwen3"`, nil},
		{"chat, default", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, genq.VariantB, `"model":"llama"`, nil},
		{"completions", "/v1/completions", `{"model":"llama","prompt":"x"}`, genq.VariantB, `"model":"llama"`, nil},
		{"responses", "/v1/responses", `{"model":"qwen3","input":"x"}`, qwen, `"model":"qwen3"`, nil},
		{"messages, operator's alias", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, qwen, `"model":"qwen3"`, nil},
		{"keep_alive", "/v1/chat/completions", `{"model":"qwen3","keep_alive":"0","messages":[{"role":"user","content":"x"}]}`, qwen, `"model":"qwen3"`, ptr(0.0)},
		{"messages, keep_alive duration", "/v1/messages", `{"model":"qwen3","keep_alive":"5m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, qwen, `"model":"qwen3"`, ptr(300.0)},
		{"messages, keep_alive -1", "/v1/messages", `{"model":"qwen3","keep_alive":-1,"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, qwen, `"model":"qwen3"`, ptr(float64(genq.KeepForever))},
		{"messages, keep_alive seconds", "/v1/messages", `{"model":"qwen3","keep_alive":90,"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, qwen, `"model":"qwen3"`, ptr(90.0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := &queueJobs{}
			rec := post(t, catalogServer(t, jobs, nil), tc.path, tc.body)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), tc.answer) {
				t.Fatalf("%d %s; want 200 naming %s", rec.Code, rec.Body, tc.answer)
			}
			q := jobs.jobs()
			if len(q) != 1 || q[0].Variant != tc.queue {
				t.Fatalf("queued %+v; want one job on %s", q, tc.queue)
			}
			switch got := q[0].KeepAlive; {
			case (got == nil) != (tc.keepAlive == nil):
				t.Errorf("keep_alive set %t; want set %t", got != nil, tc.keepAlive != nil)
			case got != nil && *got != *tc.keepAlive:
				t.Errorf("keep_alive %g; want %g", *got, *tc.keepAlive)
			}
		})
	}
}

// An unknown model is a 404 in each route's shape, and nothing is queued.
func TestUnknownModel(t *testing.T) {
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/v1/chat/completions", `{"model":"no-such-model","messages":[{"role":"user","content":"x"}]}`,
			`{"error":{"message":"The model ` + "`no-such-model`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
		{"/v1/completions", `{"model":"no-such-model","prompt":"x"}`, `"code":"model_not_found"`},
		{"/v1/responses", `{"model":"no-such-model","input":"x"}`, `"code":"model_not_found"`},
		{"/v1/messages", `{"model":"no-such-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
			`{"type":"error","error":{"type":"not_found_error","message":"The model ` + "`no-such-model`" + ` does not exist or you do not have access to it."}}`},
		{"/v1/messages/count_tokens", `{"model":"no-such-model","messages":[{"role":"user","content":"x"}]}`, `"type":"not_found_error"`},
		{"/v1/images/generations", `{"model":"no-such-model","prompt":"x"}`, `"code":"model_not_found"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			jobs := &queueJobs{}
			rec := post(t, catalogServer(t, jobs, nil), tc.path, tc.body)
			if tc.path == "/v1/images/generations" {
				// No image model here: the route is refused as on a text
				// variant, before the model is looked at.
				if rec.Code != http.StatusBadRequest {
					t.Errorf("%d %s; want 400", rec.Code, rec.Body)
				}
				return
			}
			if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("%d %s; want 404 with %s", rec.Code, rec.Body, tc.want)
			}
			if q := jobs.jobs(); len(q) != 0 {
				t.Errorf("queued %d jobs for an unknown model", len(q))
			}
		})
	}
}

func TestModelsList(t *testing.T) {
	qwen := genq.QueueToken(genq.KindChat, "qwen3")
	started := time.Unix(1_700_000_000, 0)
	fleet := fakeWorkers{
		{WorkerID: "w1", Variant: genq.VariantB, Model: "llama", StartedAt: started, Limits: &genq.Limits{ContextSize: 2048}},
		{WorkerID: "w1", Variant: qwen, Model: "qwen3", ModelState: genq.ModelUnloaded, StartedAt: started},
		{WorkerID: "w2", Variant: qwen, Model: "qwen3", ModelState: genq.ModelLoading, LoadProgress: 0.5, StartedAt: started},
	}
	h := catalogServer(t, &queueJobs{}, fleet)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	var list struct {
		Data []struct {
			ID            string   `json:"id"`
			Kind          string   `json:"kind"`
			ContextLength int      `json:"context_length"`
			LoadedOn      []string `json:"loaded_on"`
			LoadingOn     []string `json:"loading_on"`
			LoadProgress  float64  `json:"load_progress"`
			LoadableOn    []string `json:"loadable_on"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Data) != 2 {
		t.Fatalf("%s: %v; want two models", rec.Body, err)
	}
	llama, q := list.Data[0], list.Data[1]
	if llama.ID != "llama" || llama.Kind != "chat" || llama.ContextLength != 2048 || strings.Join(llama.LoadedOn, ",") != "w1" {
		t.Errorf("llama: %+v; want chat, context 2048 (its worker's), loaded on w1", llama)
	}
	if q.ID != "qwen3" || q.ContextLength != 8192 || len(q.LoadedOn) != 0 || strings.Join(q.LoadingOn, ",") != "w2" || q.LoadProgress != 0.5 || strings.Join(q.LoadableOn, ",") != "w1,w2" {
		t.Errorf("qwen3: %+v; want context 8192 (the catalogue's), loading on w2 (half done), loadable on w1 and w2", q)
	}
	for path, want := range map[string]int{"/v1/models/gpt-4o": 200, "/v1/models/qwen3": 200, "/v1/models/nope": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d %s; want %d", path, rec.Code, rec.Body, want)
		}
	}
}

// A model whose live workers all say they can never load it (over their
// memory budget) is refused at once, a 503 naming the budget in each
// route's shape, nothing queued; one live worker that can load it, or
// none live at all, and the request queues as before.
func TestUnloadableModel(t *testing.T) {
	qwen := genq.QueueToken(genq.KindChat, "qwen3")
	started := time.Unix(1_700_000_000, 0)
	tooSmall := func(id string) genq.Heartbeat {
		return genq.Heartbeat{WorkerID: id, Variant: qwen, Model: "qwen3", ModelState: genq.ModelUnloadable, StartedAt: started,
			LoadError: "the model qwen3 needs 9000 bytes (its file and the KV cache of its slots), over this worker's MODEL_MEMORY_BUDGET of 1000 bytes"}
	}
	canLoad := genq.Heartbeat{WorkerID: "big", Variant: qwen, Model: "qwen3", ModelState: genq.ModelUnloaded, StartedAt: started}
	for _, tc := range []struct {
		name    string
		fleet   fakeWorkers
		path    string
		body    string
		refused bool
	}{
		{"every worker too small, chat", fakeWorkers{tooSmall("w1"), tooSmall("w2")}, "/v1/chat/completions", `{"model":"qwen3","messages":[{"role":"user","content":"x"}]}`, true},
		{"every worker too small, messages", fakeWorkers{tooSmall("w1")}, "/v1/messages", `{"model":"qwen3","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, true},
		{"one worker can load it", fakeWorkers{tooSmall("w1"), canLoad}, "/v1/chat/completions", `{"model":"qwen3","messages":[{"role":"user","content":"x"}]}`, false},
		{"no worker live", fakeWorkers{}, "/v1/chat/completions", `{"model":"qwen3","messages":[{"role":"user","content":"x"}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := &queueJobs{}
			rec := post(t, catalogServer(t, jobs, tc.fleet), tc.path, tc.body)
			queued := len(jobs.jobs())
			if !tc.refused {
				if rec.Code != http.StatusOK || queued != 1 {
					t.Errorf("%d %s, %d queued; want 200 and the job queued", rec.Code, rec.Body, queued)
				}
				return
			}
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
				!strings.Contains(rec.Body.String(), "no live worker can load the model qwen3: the model qwen3 needs 9000 bytes") ||
				!strings.Contains(rec.Body.String(), "MODEL_MEMORY_BUDGET of 1000 bytes") {
				t.Errorf("%d %s; want 503 with Retry-After naming the budget", rec.Code, rec.Body)
			}
			if queued != 0 {
				t.Errorf("queued %d jobs for a model no worker can load", queued)
			}
		})
	}
	rec := httptest.NewRecorder()
	catalogServer(t, &queueJobs{}, fakeWorkers{tooSmall("w1"), canLoad}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models/qwen3", nil))
	var m struct {
		LoadableOn   []string `json:"loadable_on"`
		UnloadableOn []string `json:"unloadable_on"`
		LoadError    string   `json:"load_error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || strings.Join(m.LoadableOn, ",") != "big" ||
		strings.Join(m.UnloadableOn, ",") != "w1" || !strings.Contains(m.LoadError, "MODEL_MEMORY_BUDGET") {
		t.Errorf("/v1/models/qwen3: %s; want loadable on big, unloadable on w1 with the reason", rec.Body)
	}
}

// A deployment of the image variant with a chat model in its catalogue
// serves chat on that model.
func TestChatOnAnImageDeployment(t *testing.T) {
	qwen := genq.QueueToken(genq.KindChat, "qwen3")
	cat, err := genq.NewCatalog([]genq.Model{genq.SeedModel(genq.VariantC), {Name: "qwen3", Kind: genq.KindChat, Queue: qwen}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs := &queueJobs{}
	h := NewServer(Config{Variant: genq.VariantC, Catalog: cat, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute},
		Deps{Jobs: jobs, Workers: fakeWorkers{}, Registry: prometheus.NewRegistry(), NewID: func() string { return "job-1" }, Log: slog.New(slog.DiscardHandler)})
	rec := post(t, h, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"model":"qwen3"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if q := jobs.jobs(); len(q) != 1 || q[0].Variant != qwen {
		t.Errorf("queued %+v; want one job on %s", q, qwen)
	}
}

func ptr[T any](v T) *T { return &v }

// A key with a models= list sees only those models in GET /v1/models, and
// any other is a 404 at /v1/models/{id}, as for a model that is not there.
func TestModelsListPerKey(t *testing.T) {
	keys, err := tenant.ParseKeys("", "k-all\nk-llama models=llama\nk-alias models=gpt-4o", "test")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := genq.NewCatalog([]genq.Model{
		{Name: "llama", Kind: genq.KindChat, Queue: genq.VariantB},
		{Name: "qwen3", Kind: genq.KindChat, Queue: genq.QueueToken(genq.KindChat, "qwen3"), Aliases: []string{"gpt-4o"}},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := NewServer(Config{Variant: genq.VariantB, Catalog: cat, MaxBodyBytes: 1 << 20, JobTimeout: time.Minute},
		Deps{Jobs: &queueJobs{}, Workers: fakeWorkers(nil), Fleet: fakeWorkers(nil), Registry: prometheus.NewRegistry(),
			Log: slog.New(slog.DiscardHandler), Keys: tenant.NewKeys(keys)})
	for _, tc := range []struct {
		key, path string
		status    int
		ids       []string // the models listed, or the one answered
	}{
		{"k-all", "/v1/models", 200, []string{"llama", "qwen3"}},
		{"k-llama", "/v1/models", 200, []string{"llama"}},
		{"k-alias", "/v1/models", 200, []string{"qwen3"}},
		{"k-llama", "/v1/models/llama", 200, []string{"llama"}},
		{"k-llama", "/v1/models/qwen3", 404, nil},
		{"k-llama", "/v1/models/gpt-4o", 404, nil},
		{"k-alias", "/v1/models/gpt-4o", 200, []string{"qwen3"}},
		{"k-all", "/v1/models/qwen3", 200, []string{"qwen3"}},
	} {
		t.Run(tc.key+" "+tc.path, func(t *testing.T) {
			rec := send(h, http.MethodGet, tc.path, "", http.Header{"Authorization": {"Bearer " + tc.key}})
			if rec.Code != tc.status {
				t.Fatalf("%d %s; want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.status == 404 {
				if !strings.Contains(rec.Body.String(), `"code":"model_not_found"`) {
					t.Errorf("%s; want model_not_found", rec.Body)
				}
				return
			}
			var got struct {
				ID   string `json:"id"`
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			ids := []string{got.ID}
			if got.ID == "" {
				ids = nil
				for _, m := range got.Data {
					ids = append(ids, m.ID)
				}
			}
			if !slices.Equal(ids, tc.ids) {
				t.Errorf("%v; want %v", ids, tc.ids)
			}
		})
	}
}
