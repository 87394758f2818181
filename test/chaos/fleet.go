package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/test/localstack"
)

// The faults of a worker of several models (docs/text.md, "Many
// models") beside the corrupt file of models.go: a worker killed while
// it loads, and a budget too small for any model.

// killWhileLoading: a worker of a catalogue is killed with SIGKILL while
// it loads the model its first jobs need. The model is a 200 MB one
// ("mid"), whose load takes long enough to be caught: the harness freezes
// the worker (SIGSTOP) the moment it logs the load's start, checks that
// the load has not ended, then kills it. A second worker starts 2 s later,
// as Kubernetes would, loads the model and answers every request once.
func killWhileLoading(ctx context.Context, e env) (localstack.Report, error) {
	dir := filepath.Join(e.work, "kill-while-loading")
	// A small context and two slots keep the KV cache of a 100M-parameter
	// model small on a shared machine.
	s := e.ten.keyed(&localstack.Stack{Bin: e.bin, Dir: dir, Variant: "B",
		Env: append(append([]string{}, commonEnv...), "TEXT_CONTEXT_SIZE=512", "SLOTS=2")})
	defer s.Close()
	modelsFile, err := oneModelCatalogue(ctx, s, "mid", "--size", "mid")
	if err != nil {
		return localstack.Report{}, err
	}
	victim, err := startCatalogueStack(ctx, s, modelsFile)
	if err != nil {
		return localstack.Report{}, err
	}
	caught := make(chan loadKill, 1)
	go func() { caught <- killMidLoad(ctx, s, victim, "MODELS_FILE="+modelsFile) }()
	models := slices.Repeat([]string{"mid"}, 16)
	outs := fireChats(ctx, e.client, s.URL(), models, 4, 90*time.Second)
	k := <-caught
	rep := localstack.Summarize("", outs, workerLogs(s))
	rep.Notes = append(rep.Notes, fmt.Sprintf("worker frozen %s after it logged the load's start, load unfinished: %v, then killed; the replacement loaded the model in %s and answered %d/16; ack wait 3s",
		k.after.Round(100*time.Microsecond), k.midLoad, loadTook(s.Workers()[len(s.Workers())-1].Log()), rep.OK))
	switch {
	case k.err != nil:
		return rep, k.err
	case !k.midLoad:
		return rep, errors.New("the kill came after the load ended: not the fault this scenario is for")
	case rep.OK != len(models):
		return rep, fmt.Errorf("%d/%d answered, want every one", rep.OK, len(models))
	}
	return rep, nil
}

// loadKill is what killMidLoad did.
type loadKill struct {
	midLoad bool          // the load had not ended when the worker froze
	after   time.Duration // from the load's log line to the freeze
	err     error
}

// killMidLoad freezes w as soon as its log shows a model's load starting,
// reads whether the load ended before the freeze, kills it, and starts a
// replacement (with env) two seconds later.
func killMidLoad(ctx context.Context, s *localstack.Stack, w *localstack.Proc, env ...string) loadKill {
	const loading = `"msg":"loading a model"`
	for !strings.Contains(w.Log(), loading) {
		if ctx.Err() != nil || w.Exited() {
			return loadKill{err: fmt.Errorf("the worker never started a load: %v", ctx.Err())}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := signalWorker(w, syscall.SIGSTOP); err != nil {
		return loadKill{err: err}
	}
	frozenAt := time.Now()
	log := w.Log()
	k := loadKill{midLoad: !strings.Contains(log, `"msg":"model loaded"`)}
	if at, ok := logLineTime(log, loading); ok {
		k.after = frozenAt.Sub(at)
	}
	w.Kill()
	time.Sleep(2 * time.Second)
	_, k.err = s.StartWorker(ctx, false, env...)
	return k
}

// logLineTime is the time of the first line of log holding msg.
func logLineTime(log, msg string) (time.Time, bool) {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, msg) {
			if m := logTime.FindStringSubmatch(line); m != nil {
				at, err := time.Parse(time.RFC3339Nano, m[1])
				return at, err == nil
			}
		}
	}
	return time.Time{}, false
}

// loadTook is what a worker's log says its first load took, or "?".
func loadTook(log string) string {
	for line := range strings.SplitSeq(log, "\n") {
		if _, rest, ok := strings.Cut(line, `"msg":"model loaded"`); ok {
			if _, took, ok := strings.Cut(rest, `"took":"`); ok {
				took, _, _ = strings.Cut(took, `"`)
				return took
			}
		}
	}
	return "?"
}

// budgetTooSmall: a worker of a catalogue whose MODEL_MEMORY_BUDGET
// (1 MB) is below its only model. It stays up (no crash loop), pulls
// nothing and announces why; every request for the model gets a 503 at
// once that names the budget, and nothing is queued. A second worker with
// room then starts, and the same requests are answered: the api refuses
// only while no live worker can load the model.
func budgetTooSmall(ctx context.Context, e env) (localstack.Report, error) {
	dir := filepath.Join(e.work, "budget-too-small")
	s := e.ten.keyed(&localstack.Stack{Bin: e.bin, Dir: dir, Variant: "B", Env: append([]string{}, commonEnv...)})
	defer s.Close()
	modelsFile, err := oneModelCatalogue(ctx, s, "tiny")
	if err == nil {
		err = s.StartNATS(ctx)
	}
	if err == nil {
		err = s.StartAPI(ctx, "MODELS_FILE="+modelsFile)
	}
	var small *localstack.Proc
	if err == nil {
		small, err = s.StartWorker(ctx, false, "MODELS_FILE="+modelsFile, "MODEL_MEMORY_BUDGET=1MB")
	}
	if err == nil {
		err = small.WaitLog(ctx, `"msg":"refusing a model this worker can never load"`)
	}
	if err == nil {
		err = waitListed(ctx, e.client, s.URL(), "tiny", func(m listedModel) bool { return slices.Contains(m.UnloadableOn, small.Name) })
	}
	if err != nil {
		return localstack.Report{}, err
	}
	refused := fireChats(ctx, e.client, s.URL(), slices.Repeat([]string{"tiny"}, 20), 4, 60*time.Second)
	clean, slowest := 0, time.Duration(0)
	for _, o := range refused {
		slowest = max(slowest, o.Latency)
		if o.Status == http.StatusServiceUnavailable && o.Header.Get("Retry-After") != "" && bytes.Contains(o.Body, []byte("MODEL_MEMORY_BUDGET of 1000000 bytes")) {
			clean++
		}
	}
	time.Sleep(4 * time.Second) // a heartbeat's life: the small worker must still be up
	up := !small.Exited()
	big, err := s.StartWorker(ctx, true, "MODELS_FILE="+modelsFile)
	if err == nil {
		err = waitListed(ctx, e.client, s.URL(), "tiny", func(m listedModel) bool { return slices.Contains(m.LoadableOn, big.Name) })
	}
	if err != nil {
		return localstack.Report{}, err
	}
	served := fireChats(ctx, e.client, s.URL(), slices.Repeat([]string{"tiny"}, 8), 4, 60*time.Second)
	rep := localstack.Summarize("", append(refused, served...), workerLogs(s))
	ranOnSmall := strings.Count(small.Log(), `"msg":"job started"`)
	rep.Notes = append(rep.Notes, fmt.Sprintf("MODEL_MEMORY_BUDGET=1MB, below the tiny model and its KV cache: %d/20 answered 503 naming the budget, the slowest in %s; the worker up after: %v, jobs it started: %d; then a worker with room: %d/8 ok",
		clean, slowest.Round(time.Millisecond), up, ranOnSmall, rep.OK))
	switch {
	case clean != len(refused) || slowest > time.Second:
		return rep, fmt.Errorf("%d/%d refused cleanly, the slowest in %s; want all, within 1s", clean, len(refused), slowest)
	case !up || ranOnSmall > 0:
		return rep, fmt.Errorf("the worker over its budget exited (%v) or started %d jobs", !up, ranOnSmall)
	case rep.OK != len(served):
		return rep, fmt.Errorf("%d/%d answered once a worker with room was up", rep.OK, len(served))
	}
	return rep, nil
}

// oneModelCatalogue writes the stack's tiny model (of genqctl's extra
// arguments) and a MODELS_FILE naming it name, and returns the file's
// path.
func oneModelCatalogue(ctx context.Context, s *localstack.Stack, name string, modelArgs ...string) (string, error) {
	if err := s.WriteTinyModel(ctx, modelArgs...); err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(s.ModelDir, "*.gguf"))
	if err != nil || len(files) != 1 {
		return "", fmt.Errorf("the tiny model: %v files, %v", files, err)
	}
	return writeCatalogue(s, catalog.FileSpec{Models: []catalog.ModelSpec{{Name: name, Path: files[0]}}})
}

// startCatalogueStack starts s's NATS, its api and one worker serving
// the catalogue of modelsFile, ready before it returns.
func startCatalogueStack(ctx context.Context, s *localstack.Stack, modelsFile string) (*localstack.Proc, error) {
	err := s.StartNATS(ctx)
	if err == nil {
		err = s.StartAPI(ctx, "MODELS_FILE="+modelsFile)
	}
	if err != nil {
		return nil, err
	}
	return s.StartWorker(ctx, true, "MODELS_FILE="+modelsFile)
}

// listedModel is a model of GET /v1/models, as far as the scenarios read.
type listedModel struct {
	ID           string   `json:"id"`
	LoadableOn   []string `json:"loadable_on"`
	UnloadableOn []string `json:"unloadable_on"`
}

// waitListed waits until GET /v1/models, asked through client, lists
// model as ok says.
func waitListed(ctx context.Context, client *http.Client, url, model string, ok func(listedModel) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var last []byte
	for {
		var list struct {
			Data []listedModel `json:"data"`
		}
		if err := localstack.Call(ctx, client, http.MethodGet, url+"/v1/models", "", nil, &list); err == nil {
			for _, m := range list.Data {
				if m.ID == model && ok(m) {
					return nil
				}
			}
			last, _ = json.Marshal(list.Data)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("GET /v1/models never listed %s as wanted: %s", model, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// signalWorker signals a worker's process group: its supervisor and the
// worker process the supervisor runs (in the same group), which a signal
// to the supervisor's pid alone would leave running.
func signalWorker(p *localstack.Proc, sig syscall.Signal) error { return syscall.Kill(-p.PID(), sig) }
