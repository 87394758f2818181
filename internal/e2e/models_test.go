package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/promtest"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/internal/worker"
)

// ranBy records which model's backend ran each job.
type ranBy struct {
	mu   sync.Mutex
	jobs map[string]string // job id → model name
	runs map[string]int    // job id → runs
}

func (r *ranBy) model(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id]
}

// recordingBackend is a real backend that notes the jobs it runs.
type recordingBackend struct {
	genq.Backend
	name string
	ran  *ranBy
}

func (b *recordingBackend) Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error) {
	b.ran.mu.Lock()
	b.ran.jobs[job.ID] = b.name
	if b.ran.runs == nil {
		b.ran.runs = map[string]int{}
	}
	b.ran.runs[job.ID]++
	b.ran.mu.Unlock()
	return b.Backend.Generate(ctx, job, progress)
}

// tinyModels writes tiny chat models of two families (a llama twice, with
// other weights, and a qwen3) and says them as catalogue models.
func tinyModels(t *testing.T) []genq.Model {
	t.Helper()
	dir := t.TempDir()
	var models []genq.Model
	for _, m := range []struct {
		name   string
		family tinygguf.Family
		seed   int64
	}{{"llama-a", tinygguf.FamilyLlama, 1}, {"qwen3", tinygguf.FamilyQwen3, 1}, {"llama-b", tinygguf.FamilyLlama, 2}} {
		path := filepath.Join(dir, m.name+".gguf")
		opts := tinygguf.OptionsFor(genq.VariantB, "tiny", m.seed)
		opts.Family = m.family
		if err := tinygguf.Write(path, opts); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, genq.Model{Name: m.name, Kind: genq.KindChat, Path: path, SizeBytes: st.Size(),
			Queue: genq.QueueToken(genq.KindChat, m.name)})
	}
	return models
}

// fleetStack is an api whose catalogue holds models, and one worker that
// serves them all within budget.
func fleetStack(t *testing.T, models []genq.Model, budget int64) (*stack, *ranBy, *worker.Fleet, *prometheus.Registry) {
	t.Helper()
	cat, err := genq.NewCatalog(models, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{http: httpapi.Config{Catalog: cat}})
	ran := &ranBy{jobs: map[string]string{}}
	fw := s.startFleet(t, models, budget, tinyLoader(t, ran, ""))
	return s, ran, fw.fleet, fw.reg
}

// tinyLoader loads the tiny models, each backend noting the jobs it runs
// as its model's (with suffix, to tell workers apart).
func tinyLoader(t *testing.T, ran *ranBy, suffix string) worker.Loader {
	return func(ctx context.Context, m genq.Model, progress func(float64)) (genq.Backend, error) {
		b, err := textgen.Open(ctx, textgen.Config{ModelFile: m.Path, Slots: 1, Threads: 1, MaxNewTokens: 4, IgnoreEOS: true}, testLog(t))
		if err != nil {
			return nil, err
		}
		return &recordingBackend{Backend: b, name: m.Name + suffix, ran: ran}, nil
	}
}

// fleetWorker is a worker of several models running in this process.
type fleetWorker struct {
	fleet *worker.Fleet
	reg   *prometheus.Registry
	conn  *natsqueue.Conn
}

// startFleet runs a worker serving models with load until the test ends.
func (s *stack) startFleet(t *testing.T, models []genq.Model, budget int64, load worker.Loader) fleetWorker {
	t.Helper()
	reg := prometheus.NewRegistry()
	fleet, err := worker.NewFleet(models, worker.FleetOptions{Budget: budget, KeepAlive: time.Hour, Load: load, Log: testLog(t), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	queues := make([]genq.Variant, len(models))
	for i, m := range models {
		queues[i] = m.Queue
	}
	conn, _ := openConn(t, s.ns, s.settings, queues...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	id := "fleet-" + uuid.NewString()[:8]
	cfg := worker.Config{WorkerID: id, PollWait: 500 * time.Millisecond, HeartbeatEvery: 300 * time.Millisecond, RetryDelay: 100 * time.Millisecond}
	info := func(m genq.Model) genq.BackendInfo { return genq.BackendInfo{Model: m.Name, Slots: 1} }
	go func() { done <- fleet.Serve(ctx, conn, cfg, info, testLog(t).With("worker_id", id), reg) }()
	t.Cleanup(func() { cancel(); <-done })
	return fleetWorker{fleet: fleet, reg: reg, conn: conn}
}

type chatAnswer struct {
	Model   string `json:"model"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

func (s *stack) chatWith(t *testing.T, model string) (response, chatAnswer) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Say something."}],"max_tokens":4}`, model)
	r := s.postKey("/v1/chat/completions", "", body)
	var a chatAnswer
	if r.status == 200 {
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
	}
	return r, a
}

type listedModel struct {
	ID         string   `json:"id"`
	LoadedOn   []string `json:"loaded_on"`
	LoadableOn []string `json:"loadable_on"`
}

func (s *stack) listModels(t *testing.T) map[string]listedModel {
	t.Helper()
	var list struct {
		Data []listedModel `json:"data"`
	}
	if err := json.Unmarshal(s.get("/v1/models").body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]listedModel{}
	for _, m := range list.Data {
		out[m.ID] = m
	}
	return out
}

// waitModels waits until /v1/models lists exactly loaded as loaded.
func (s *stack) waitModels(t *testing.T, loaded ...string) map[string]listedModel {
	t.Helper()
	slices.Sort(loaded)
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list := s.listModels(t)
		got = nil
		for id, m := range list {
			if len(m.LoadedOn) > 0 {
				got = append(got, id)
			}
		}
		slices.Sort(got)
		if slices.Equal(got, loaded) {
			return list
		}
	}
	t.Fatalf("/v1/models lists %v loaded, want %v", got, loaded)
	return nil
}

// waitLoadable waits until /v1/models lists n models, each loadable on
// the worker and none loaded.
func (s *stack) waitLoadable(t *testing.T, n int) {
	t.Helper()
	var list map[string]listedModel
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list = s.listModels(t)
		ok := len(list) == n
		for _, m := range list {
			ok = ok && len(m.LoadableOn) == 1 && len(m.LoadedOn) == 0
		}
		if ok {
			return
		}
	}
	t.Fatalf("/v1/models lists %+v; want %d models, each loadable on the worker, none loaded", list, n)
}

func fleetCounter(t *testing.T, reg *prometheus.Registry, name, model string) float64 {
	t.Helper()
	v, _ := promtest.Value(t, reg, name, "model", model)
	return v
}

// Three tiny models of two families on one worker whose budget holds two:
// interleaved requests are each run by the model they name, the least
// recently used idle model making room, and /v1/models and the metrics
// show the loads and evictions.
func TestFleetServesModelsByName(t *testing.T) {
	models := tinyModels(t)
	sizes := []int64{models[0].SizeBytes, models[1].SizeBytes, models[2].SizeBytes}
	slices.Sort(sizes)
	budget := sizes[1] + sizes[2] // any two fit, never three
	s, ran, fleet, reg := fleetStack(t, models, budget)
	s.waitLoadable(t, 3)

	order := []string{"llama-a", "qwen3", "llama-a", "llama-b", "qwen3", "llama-a", "llama-b"}
	for i, name := range order {
		r, a := s.chatWith(t, name)
		if r.status != 200 {
			t.Fatalf("request %d for %s: %d %s", i, name, r.status, r.body)
		}
		id := r.header.Get(httpapi.HeaderJobID)
		if a.Model != name || ran.model(id) != name {
			t.Fatalf("request %d for %s: the answer names %q and the job ran on %q", i, name, a.Model, ran.model(id))
		}
		if n := len(fleet.Loaded()); n > 2 {
			t.Fatalf("after request %d, %d models loaded within a budget of two", i, n)
		}
	}
	// llama-a, qwen3 load; llama-b evicts qwen3 (llama-a was used since);
	// qwen3 evicts llama-a; llama-a evicts llama-b; llama-b evicts qwen3.
	s.waitModels(t, "llama-a", "llama-b")
	for name, want := range map[string][2]float64{"llama-a": {2, 1}, "qwen3": {2, 2}, "llama-b": {2, 1}} {
		loads, evictions := fleetCounter(t, reg, "genq_worker_model_loads_total", name), fleetCounter(t, reg, "genq_worker_model_evictions_total", name)
		if loads != want[0] || evictions != want[1] {
			t.Errorf("%s: %v loads, %v evictions; want %v and %v", name, loads, evictions, want[0], want[1])
		}
	}

	// The UI's queue view shows the same, and its pickers the models.
	var ui struct {
		Models  []listedModel    `json:"models"`
		Workers []genq.Heartbeat `json:"workers"`
	}
	if err := json.Unmarshal(s.get("/ui/api/status").body, &ui); err != nil {
		t.Fatal(err)
	}
	states := map[string]genq.ModelState{}
	for _, hb := range ui.Workers {
		states[hb.Model] = hb.ModelState
	}
	if len(ui.Models) != 3 || states["llama-a"] != genq.ModelLoaded || states["qwen3"] != genq.ModelUnloaded {
		t.Errorf("the queue view: %d models, worker states %v; want 3, llama-a loaded and qwen3 unloaded", len(ui.Models), states)
	}

	// An unknown model: a 404, and nothing queued.
	before := s.jobsPublished()
	r, _ := s.chatWith(t, "no-such-model")
	if r.status != 404 || !strings.Contains(string(r.body), `"code":"model_not_found"`) {
		t.Errorf("an unknown model: %d %s", r.status, r.body)
	}
	if after := s.jobsPublished(); after != before {
		t.Errorf("%d jobs queued for an unknown model", after-before)
	}
}

// A model whose file is corrupt fails its jobs with the reason, and the
// worker goes on serving its other models.
func TestFleetCorruptModel(t *testing.T) {
	models := tinyModels(t)[:1]
	bad := filepath.Join(t.TempDir(), "broken.gguf")
	if err := os.WriteFile(bad, []byte("GGUF, but not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	models = append(models, genq.Model{Name: "broken", Kind: genq.KindChat, Path: bad, SizeBytes: 20, Queue: genq.QueueToken(genq.KindChat, "broken")})
	s, _, _, reg := fleetStack(t, models, 1<<40)
	start := time.Now()
	r, _ := s.chatWith(t, "broken")
	if r.status < 500 || !strings.Contains(string(r.body), "the model broken could not be loaded") {
		t.Errorf("a job for a corrupt model: %d %s; want a 5xx naming the model", r.status, r.body)
	}
	t.Logf("the corrupt model's job was answered in %v", time.Since(start).Round(time.Millisecond))
	if n := fleetCounter(t, reg, "genq_worker_model_load_failures_total", "broken"); n != 1 {
		t.Errorf("%v load failures; want 1 (its retries fail at once)", n)
	}
	if r, a := s.chatWith(t, "llama-a"); r.status != 200 || a.Model != "llama-a" {
		t.Errorf("the other model after: %d %s", r.status, r.body)
	}
}

// A batch's lines each go to the model they name, and each answer names it.
func TestFleetBatchLines(t *testing.T) {
	models := tinyModels(t)[:2]
	s, ran, _, _ := fleetStack(t, models, 1<<40)
	input := chatLines(6, func(i int) string { return fmt.Sprintf(`,"max_tokens":4,"model":%q`, models[i%2].Name) })
	up := s.upload("in.jsonl", input, "batch")
	file := decodeAs[struct {
		ID string `json:"id"`
	}](t, up)
	r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	b := decodeAs[batchObject](t, r)
	b = s.waitBatch(b.ID, func(b batchObject) bool { return b.Status == "completed" })
	if b.RequestCounts.Completed != 6 || b.OutputFileID == nil {
		t.Fatalf("batch %+v", b)
	}
	out := s.get("/v1/files/" + *b.OutputFileID + "/content")
	for line := range strings.SplitSeq(strings.TrimSpace(string(out.body)), "\n") {
		var l struct {
			CustomID string `json:"custom_id"`
			Response struct {
				Body struct {
					ID    string `json:"id"`
					Model string `json:"model"`
				} `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		var i int
		fmt.Sscanf(l.CustomID, "req-%d", &i)
		want := models[i%2].Name
		jobID := strings.TrimPrefix(l.Response.Body.ID, "chatcmpl-")
		if l.Response.Body.Model != want || ran.model(jobID) != want {
			t.Errorf("%s: the answer names %q and ran on %q; want %s", l.CustomID, l.Response.Body.Model, ran.model(jobID), want)
		}
	}
}

// A batch's line for a model the catalogue does not hold fails alone, with
// the 404 model_not_found its route would answer, in the error file; the
// other lines run.
func TestFleetBatchUnknownModel(t *testing.T) {
	models := tinyModels(t)[:1]
	s, _, _, _ := fleetStack(t, models, 1<<40)
	input := chatLines(3, func(i int) string {
		if i == 1 {
			return `,"max_tokens":4,"model":"no-such-model"`
		}
		return fmt.Sprintf(`,"max_tokens":4,"model":%q`, models[0].Name)
	})
	file := decodeAs[struct {
		ID string `json:"id"`
	}](t, s.upload("in.jsonl", input, "batch"))
	r := s.postKey("/v1/batches", "", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	b := decodeAs[batchObject](t, r)
	b = s.waitBatch(b.ID, func(b batchObject) bool { return b.Status == "completed" || b.Status == "failed" })
	if b.Status != "completed" || b.RequestCounts.Completed != 2 || b.RequestCounts.Failed != 1 || b.ErrorFileID == nil {
		t.Fatalf("batch %+v; want completed, 2 answered and 1 failed", b)
	}
	var l struct {
		CustomID string `json:"custom_id"`
		Response struct {
			StatusCode int `json:"status_code"`
			Body       struct {
				Error struct {
					Type, Code, Message string
					Param               *string
				} `json:"error"`
			} `json:"body"`
		} `json:"response"`
	}
	errLine := strings.TrimSpace(string(s.get("/v1/files/" + *b.ErrorFileID + "/content").body))
	if err := json.Unmarshal([]byte(errLine), &l); err != nil {
		t.Fatalf("error file %q: %v", errLine, err)
	}
	e := l.Response.Body.Error
	if l.CustomID != "req-1" || l.Response.StatusCode != 404 || e.Code != "model_not_found" || e.Type != "invalid_request_error" ||
		e.Param != nil || !strings.Contains(e.Message, "`no-such-model` does not exist") {
		t.Errorf("error line %s; want req-1's 404 model_not_found in OpenAI's shape", errLine)
	}
}

// A worker that dies while it loads a model loses no job: the job it held
// goes, after the ack wait, to another worker, which runs it once.
func TestFleetWorkerDiesWhileLoading(t *testing.T) {
	models := tinyModels(t)[:1]
	cat, err := genq.NewCatalog(models, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{http: httpapi.Config{Catalog: cat}})
	loading := make(chan struct{}, 1)
	stuck := func(ctx context.Context, m genq.Model, progress func(float64)) (genq.Backend, error) {
		loading <- struct{}{}
		<-t.Context().Done() // a load that never ends: the worker dies first
		return nil, t.Context().Err()
	}
	first := s.startFleet(t, models, 1<<40, stuck)
	answer := make(chan response, 1)
	go func() {
		r, _ := s.chatWith(t, "llama-a")
		answer <- r
	}()
	waitFor(t, loading, 10*time.Second, "the first worker to start loading")
	first.conn.NATS().Close() // dies, holding the job, mid-load

	ran := &ranBy{jobs: map[string]string{}}
	s.startFleet(t, models, 1<<40, tinyLoader(t, ran, "@second"))
	r := waitFor(t, answer, 30*time.Second, "the answer")
	id := r.header.Get(httpapi.HeaderJobID)
	if r.status != 200 || ran.model(id) != "llama-a@second" {
		t.Fatalf("%d %s, run on %q; want 200 from the second worker", r.status, r.body, ran.model(id))
	}
	ran.mu.Lock()
	defer ran.mu.Unlock()
	if n := ran.runs[id]; n != 1 {
		t.Errorf("the job ran %d times", n)
	}
}
