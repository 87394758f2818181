package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/test/localstack"
)

// corruptModel: a catalogue of two chat models on one worker, one of
// them a corrupt file. Requests for both, interleaved: the good model's
// are answered, the corrupt one's fail cleanly (the load's reason, after
// the attempt limit), nothing is lost or run twice, and the worker keeps
// running (no crash loop).
func corruptModel(ctx context.Context, e env) (localstack.Report, error) {
	dir := filepath.Join(e.work, "corrupt-model")
	s := e.ten.keyed(&localstack.Stack{Bin: e.bin, Dir: dir, Variant: "B", Env: append(append([]string{}, commonEnv...), "JOB_MAX_ATTEMPTS=3")})
	defer s.Close()
	modelsFile, err := corruptCatalogue(ctx, s)
	if err == nil {
		err = s.StartNATS(ctx)
	}
	if err == nil {
		err = s.StartAPI(ctx, "MODELS_FILE="+modelsFile)
	}
	var worker *localstack.Proc
	if err == nil {
		worker, err = s.StartWorker(ctx, true, "MODELS_FILE="+modelsFile, "WORKER_MODELS=tiny,broken")
	}
	if err != nil {
		return localstack.Report{}, err
	}
	models := make([]string, 40)
	for i := range models {
		models[i] = []string{"tiny", "broken"}[i%2]
	}
	outs := fireChats(ctx, e.client, s.URL(), models, 4, 90*time.Second)
	rep := localstack.Summarize("", outs, workerLogs(s))
	good, clean := 0, 0
	for i, o := range outs {
		switch {
		case models[i] == "tiny" && o.Status == http.StatusOK:
			good++
		case models[i] == "broken" && o.Status >= 500 && bytes.Contains(o.Body, []byte("the model broken could not be loaded")):
			clean++
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("the good model answered %d/20; the corrupt one failed %d/20 with its load's reason; %d worker(s) ran, %d exited",
		good, clean, len(s.Workers()), exited(s)))
	switch {
	case good != 20 || clean != 20:
		return rep, fmt.Errorf("good %d/20 answered and corrupt %d/20 failed cleanly, want 20 and 20", good, clean)
	case worker.Exited() || len(s.Workers()) != 1:
		return rep, fmt.Errorf("the worker did not keep running")
	}
	return rep, nil
}

// corruptCatalogue writes the stack's tiny model, a corrupt GGUF beside
// it, and a MODELS_FILE naming both (the corrupt one's name and kind
// given, as its header cannot say them), and returns the file's path.
func corruptCatalogue(ctx context.Context, s *localstack.Stack) (string, error) {
	if err := s.WriteTinyModel(ctx); err != nil {
		return "", err
	}
	tiny, err := filepath.Glob(filepath.Join(s.ModelDir, "*.gguf"))
	if err != nil || len(tiny) != 1 {
		return "", fmt.Errorf("the tiny model: %v files, %v", tiny, err)
	}
	broken := filepath.Join(s.Dir, "broken.gguf")
	// A GGUF's magic, then nothing a GGUF reader can follow.
	if err := os.WriteFile(broken, append([]byte("GGUF"), bytes.Repeat([]byte{0xff}, 4096)...), 0o644); err != nil {
		return "", err
	}
	return writeCatalogue(s, catalog.FileSpec{Models: []catalog.ModelSpec{
		{Name: "tiny", Path: tiny[0]},
		{Name: "broken", Kind: genq.KindChat, Path: broken},
	}})
}

// writeCatalogue writes spec as the stack's MODELS_FILE and returns its
// path.
func writeCatalogue(s *localstack.Stack, spec catalog.FileSpec) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, "models.json")
	return path, os.WriteFile(path, raw, 0o644)
}

// fireChats sends one chat completion per model name to url through
// client, at most concurrency at once, each with its own timeout.
func fireChats(ctx context.Context, client *http.Client, url string, models []string, concurrency int, timeout time.Duration) []localstack.Outcome {
	return localstack.FireEach(len(models), concurrency, func(i int) localstack.Outcome {
		return chat(ctx, client, url, models[i], fmt.Sprintf("request %d: tell me about queues", i), timeout)
	})
}

func chat(ctx context.Context, client *http.Client, url, model, text string, timeout time.Duration) localstack.Outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 8, "messages": []map[string]string{{"role": "user", "content": text}}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return localstack.Outcome{Err: err, Latency: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return localstack.Outcome{Status: resp.StatusCode, Err: err, Latency: time.Since(start), JobID: resp.Header.Get("Genq-Job-Id"), Body: b, Header: resp.Header}
}

func exited(s *localstack.Stack) int {
	n := 0
	for _, w := range s.Workers() {
		if w.Exited() {
			n++
		}
	}
	return n
}
