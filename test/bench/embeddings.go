package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/embedgen"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/test/localstack"
)

// Embeddings per second through HTTP: genq's /v1/embeddings (api, NATS,
// one embedding worker) against llama-server --embedding on the same file
// (MiniLM-L6's shape with random weights), the same requests at the same
// concurrency, the servers taking turns going first. Two loads: many
// requests of one input each (what a retrieval service's queries are),
// where genq packs inputs of concurrent requests into one engine step,
// and a few requests of many inputs (indexing documents).

// embLoad is one load: requests of inputs each, sent concurrency at a
// time.
type embLoad struct {
	name                         string
	requests, inputs, concurrent int
}

type embResult struct {
	load  embLoad
	rates map[string][]float64 // embeddings per second, per server, one per run
	// cpu is the CPU milliseconds an embedding took, per server and
	// process (embProcs), one per run.
	cpu map[string]map[string][]float64
}

// embProcs are the processes whose CPU a run counts, per server: the
// load generator (this process) is counted with each.
var embProcs = map[string][]string{"genq": {"NATS", "api", "worker", "client"}, "llama-server": {"llama-server", "client"}}

type embBench struct {
	threads, batchTokens, batchInputs, slots int
	results                                  []embResult
	minCosine                                float64
	peer                                     string
	width                                    int
}

// The servers' bounds, the same for both: a step of at most
// embBatchInputs inputs (genq's EMBEDDING_BATCH_INPUTS, llama-server's
// parallel slots, each a sequence of one decode) and embBatchTokens
// tokens, on embThreads threads; genq's worker holds embSlots jobs.
const (
	embThreads     = 2
	embBatchTokens = 4096
	embBatchInputs = 64
	embSlots       = 16
)

func (b *bench) embeddings(ctx context.Context) error {
	loads := []embLoad{{"one input a request", 256, 1, 16}, {"64 inputs a request", 16, 64, 4}}
	if b.quick {
		loads = []embLoad{{"one input a request", 64, 1, 16}, {"64 inputs a request", 4, 64, 4}}
	}
	dir := filepath.Join(b.work, "embeddings")
	model := filepath.Join(dir, "model")
	if out, err := exec.CommandContext(ctx, b.bin.Genqctl, "models", "tiny", "--family", "bert", "--size", "mini", "--dir", model).CombinedOutput(); err != nil {
		return fmt.Errorf("embedding model: %w\n%s", err, out)
	}
	file := filepath.Join(model, "mini-bert.gguf")
	e := &embBench{threads: embThreads, batchTokens: embBatchTokens, batchInputs: embBatchInputs, slots: embSlots, minCosine: 1}
	b.emb = e

	// The api's catalogue holds the embedding model, which one worker
	// serves (and loads before the first request, as the peer does).
	models := "MODELS=mini-bert=" + file
	s := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: "B", ModelDir: model}
	defer s.Close()
	err := s.StartNATS(ctx)
	if err == nil {
		err = s.StartAPI(ctx, models)
	}
	if err == nil {
		_, err = s.StartWorker(ctx, true, models, "WORKER_MODELS=mini-bert", "EMBEDDING_THREADS="+strconv.Itoa(embThreads),
			"EMBEDDING_BATCH_TOKENS="+strconv.Itoa(embBatchTokens), "EMBEDDING_BATCH_INPUTS="+strconv.Itoa(embBatchInputs), "SLOTS="+strconv.Itoa(embSlots))
	}
	if err != nil {
		return err
	}
	bin, how := findLlamaServer()
	e.peer = how
	if bin == "" {
		return fmt.Errorf("embeddings need the peer: %s", how)
	}
	peerURL, stop, peerPID, err := startEmbeddingPeer(ctx, bin, file, dir)
	if err != nil {
		return err
	}
	defer stop()
	targets := map[string]string{"genq": s.URL() + "/v1/embeddings", "llama-server": peerURL + "/v1/embeddings"}
	if err := e.agree(ctx, targets); err != nil {
		return err
	}
	pids := map[string]map[string]int{
		"genq":         {"NATS": s.NATS.PID(), "api": s.API.PID(), "worker": s.Workers()[0].PID(), "client": os.Getpid()},
		"llama-server": {"llama-server": peerPID, "client": os.Getpid()},
	}
	for _, l := range loads {
		r := embResult{load: l, rates: map[string][]float64{}, cpu: map[string]map[string][]float64{"genq": {}, "llama-server": {}}}
		for run := range b.runs {
			order := []string{"genq", "llama-server"}
			if run%2 == 1 {
				slices.Reverse(order)
			}
			for _, name := range order {
				before := embTicks(pids[name])
				rate, err := embRate(ctx, targets[name], l)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", name, l.name, err)
				}
				r.rates[name] = append(r.rates[name], rate)
				for proc, t := range embTicks(pids[name]) {
					ms := float64(t-before[proc]) * 1000 / clockTick / float64(l.requests*l.inputs)
					r.cpu[name][proc] = append(r.cpu[name][proc], ms)
				}
				fmt.Fprintf(b.out, "   %s, %s: %.0f embeddings/s\n", l.name, name, rate)
			}
		}
		e.results = append(e.results, r)
	}
	return nil
}

// embTicks is the CPU time, in clock ticks, of each process named (and
// of its children: the worker's supervisor's).
func embTicks(pids map[string]int) map[string]uint64 {
	out := map[string]uint64{}
	for name, pid := range pids {
		if pid == os.Getpid() {
			out[name] = procTicks(pid) // its children are the stack, counted apart
			continue
		}
		out[name] = treeTicks(pid)
	}
	return out
}

// startEmbeddingPeer starts llama-server --embedding on model with genq's
// threads and steps of as many tokens and inputs (its parallel slots, each
// of the model's 512 positions).
func startEmbeddingPeer(ctx context.Context, bin, model, dir string) (string, func(), int, error) {
	args := []string{"-m", model, "--embedding",
		"-t", strconv.Itoa(embThreads), "-tb", strconv.Itoa(embThreads), "-np", strconv.Itoa(embBatchInputs),
		"-c", strconv.Itoa(embBatchInputs * 512), "-b", strconv.Itoa(embBatchTokens), "-ub", strconv.Itoa(embBatchTokens)}
	return startPeer(ctx, "llama-server-embedding", bin, dir, args)
}

// embText is input i: a sentence of a few dozen tokens, different for
// every input.
func embText(i int) string {
	words := []string{"the", "queue", "model", "vector", "search", "document", "question", "answer", "cat", "dog", "water", "people"}
	var sb strings.Builder
	fmt.Fprintf(&sb, "document %d:", i)
	for k := range 20 + i%13 {
		sb.WriteString(" " + words[(i*7+k*k)%len(words)])
	}
	return sb.String()
}

type embResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

func postEmbeddings(ctx context.Context, client *http.Client, url string, inputs []string) (embResponse, error) {
	var out embResponse
	body, _ := json.Marshal(map[string]any{"input": inputs, "model": "mini-bert", "encoding_format": "float"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		return out, fmt.Errorf("status %d: %s", resp.StatusCode, msg.String())
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, err
	}
	if len(out.Data) != len(inputs) {
		return out, fmt.Errorf("%d vectors for %d inputs", len(out.Data), len(inputs))
	}
	slices.SortFunc(out.Data, func(a, b struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}) int {
		return a.Index - b.Index
	})
	return out, nil
}

// agree checks that the two servers give the same vectors for the same
// inputs before any is timed, and keeps the least cosine.
func (e *embBench) agree(ctx context.Context, targets map[string]string) error {
	inputs := make([]string, 32)
	for i := range inputs {
		inputs[i] = embText(i)
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	g, err := postEmbeddings(ctx, client, targets["genq"], inputs)
	if err != nil {
		return fmt.Errorf("genq: %w", err)
	}
	p, err := postEmbeddings(ctx, client, targets["llama-server"], inputs)
	if err != nil {
		return fmt.Errorf("llama-server: %w", err)
	}
	e.width = len(g.Data[0].Embedding)
	for i := range inputs {
		a, b := g.Data[i].Embedding, p.Data[i].Embedding
		if len(a) != len(b) {
			return fmt.Errorf("input %d: genq gives %d dimensions, llama-server %d", i, len(a), len(b))
		}
		e.minCosine = min(e.minCosine, genq.Cosine(a, b))
	}
	if e.minCosine < 0.9999 {
		return fmt.Errorf("genq's vectors differ from llama-server's: least cosine %.6f", e.minCosine)
	}
	return nil
}

// embRate sends load's requests to url, concurrent at a time, and returns
// the embeddings answered per second of the whole.
func embRate(ctx context.Context, url string, l embLoad) (float64, error) {
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: l.concurrent}}
	next := make(chan int)
	errs := make(chan error, l.concurrent)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range l.concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				inputs := make([]string, l.inputs)
				for i := range inputs {
					inputs[i] = embText(r*l.inputs + i)
				}
				if _, err := postEmbeddings(ctx, client, url, inputs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for r := range l.requests {
		select {
		case next <- r:
		case err := <-errs:
			close(next)
			wg.Wait()
			return 0, err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return float64(l.requests*l.inputs) / time.Since(t0).Seconds(), nil
}

func (b *bench) embeddingsMarkdown() string {
	e := b.emb
	if e == nil {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "`make bench` (or `go run ./test/bench -only embeddings`), commit `%s`, %s, on %d cores of %s, load average %s. "+
		"The model: `genqctl models tiny --family bert --size mini` (MiniLM-L6's blocks: 6 layers at width 384, %d dimensions, mean pooling; random weights, F16). "+
		"genq: the api, NATS and one embedding worker (%d jobs at once, steps of at most %d inputs and %d tokens, %d threads; on the CPU a step of several inputs stops at %d tokens, `EMBEDDING_STEP_TOKENS`' default), through `POST /v1/embeddings`; "+
		"llama-server --embedding on the same file (%s) with %d parallel slots (inputs a step), `-b`/`-ub` %d and %d threads. "+
		"Both answer the same requests, %d runs each, taking turns going first; the inputs are sentences of 20 to 32 words (about 25 to 40 tokens). "+
		"Before any is timed the two give the same vectors: least cosine over 32 inputs **%.6f**.\n\n",
		commit(b.root), time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), procfs.CPUName(), loadAverage(),
		e.width, e.slots, e.batchInputs, e.batchTokens, e.threads, embedgen.DefaultCPUStepTokens, e.peer, e.batchInputs, e.batchTokens, e.threads, b.runs, e.minCosine)
	sb.WriteString("| load | genq, embeddings/s | llama-server, embeddings/s | genq / llama-server |\n|---|---|---|---|\n")
	for _, r := range e.results {
		g, p := median(r.rates["genq"]), median(r.rates["llama-server"])
		fmt.Fprintf(&sb, "| %d requests of %s, %d at a time | %.0f (runs %s) | %.0f (runs %s) | **%.2f×** |\n",
			r.load.requests, r.load.name, r.load.concurrent, g, runsOf(r.rates["genq"]), p, runsOf(r.rates["llama-server"]), g/p)
	}
	sb.WriteString("\nCPU an embedding, in milliseconds (the median of the runs; the client is the load generator, this process, on the same cores):\n\n")
	sb.WriteString("| load | genq: NATS | api | worker | client | all | llama-server: server | client | all |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range e.results {
		fmt.Fprintf(&sb, "| %s |", r.load.name)
		for _, name := range []string{"genq", "llama-server"} {
			all := 0.0
			for _, proc := range embProcs[name] {
				m := median(r.cpu[name][proc])
				all += m
				fmt.Fprintf(&sb, " %.2f |", m)
			}
			fmt.Fprintf(&sb, " %.2f |", all)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func runsOf(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, ", ")
}
