package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/embedgen"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/internal/worker"
)

// embeddingModel is the tests' embedding model's name in the catalogue,
// and embeddingQueue its queue token, by the catalogue's rule.
const embeddingModel = "genq-embedding"

var embeddingQueue = genq.QueueToken(genq.KindEmbedding, embeddingModel)

// embeddingCatalog is a variant B api's catalogue with the embedding
// model besides: the chat model takes every unknown name, as without a
// catalogue; OpenAI's own embedding model's name is an alias.
func embeddingCatalog(t *testing.T) *genq.Catalog {
	t.Helper()
	c, err := genq.NewCatalog([]genq.Model{genq.SeedModel(genq.VariantB),
		{Name: embeddingModel, Kind: genq.KindEmbedding, Queue: embeddingQueue, Aliases: []string{"text-embedding-3-small"}}},
		map[string]string{"*": genq.SeedModel(genq.VariantB).Name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// embeddingStack is a variant B api that also serves /v1/embeddings, and
// one embedding worker on the tiny BERT, whose file it returns.
func embeddingStack(t *testing.T) (*stack, *embedgen.Backend, string) {
	t.Helper()
	return embeddingStackWith(t, stackOptions{})
}

// embeddingStackWith is embeddingStack on o's api (its variant B, its
// catalogue embeddingCatalog).
func embeddingStackWith(t *testing.T, o stackOptions) (*stack, *embedgen.Backend, string) {
	t.Helper()
	model := filepath.Join(t.TempDir(), tinygguf.BERTFileName("tiny"))
	if err := tinygguf.WriteBERT(model, "tiny", "", 1); err != nil {
		t.Fatal(err)
	}
	o.variant, o.http.Catalog = genq.VariantB, embeddingCatalog(t)
	s := newStack(t, o)
	b, err := embedgen.Open(context.Background(), embedgen.Config{ModelFile: model, Threads: 1}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	conn, _ := openConn(t, s.ns, s.settings, embeddingQueue)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := worker.Config{WorkerID: "e-" + uuid.NewString()[:8], Variant: embeddingQueue, PollWait: 500 * time.Millisecond,
		HeartbeatEvery: 500 * time.Millisecond, RetryDelay: 100 * time.Millisecond, DrainGrace: time.Second}
	rt := worker.New(cfg, conn, b, testLog(t), prometheus.NewRegistry())
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, b, model
}

type embeddingAnswer struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string  `json:"message"`
		Param   *string `json:"param"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// embed posts body to url (the api's or the peer's /v1/embeddings).
func embed(t *testing.T, url string, body map[string]any) (int, embeddingAnswer) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var a embeddingAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, a
}

// vectors reads an answer's vectors, floats or base64.
func (a embeddingAnswer) vectors(t *testing.T) [][]float64 {
	t.Helper()
	out := make([][]float64, len(a.Data))
	for _, d := range a.Data {
		var s string
		if json.Unmarshal(d.Embedding, &s) == nil {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < len(raw); k += 4 {
				out[d.Index] = append(out[d.Index], float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[k:]))))
			}
			continue
		}
		if err := json.Unmarshal(d.Embedding, &out[d.Index]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEmbeddingsMatchLlamaServer: /v1/embeddings, through the queue to an
// embedding worker, gives llama-server --embedding's vectors for the same
// inputs on the same file, as floats and as base64, for texts and token
// ids; requests sent at once all come back whole.
func TestEmbeddingsMatchLlamaServer(t *testing.T) {
	bin := llamaServer(t)
	s, b, model := embeddingStack(t)
	peer := startLlamaServer(t, bin, model, "--embedding", "-t", "1", "-np", "2")
	texts := []string{"hello world", "the cat sat on the mat", "Queues wait; models answer!", "embedding 42"}
	_, want := embed(t, peer+"/v1/embeddings", map[string]any{"input": texts})
	wantV := want.vectors(t)
	// The ids of [CLS] hello world [SEP]: token ids are embedded as they
	// are, so they carry the special tokens a text gets.
	tokens := peerTokenize(t, peer, "[CLS]hello world[SEP]")

	tests := []struct {
		name   string
		body   map[string]any
		want   [][]float64
		tokens int
	}{
		{"strings, floats, the model named", map[string]any{"input": texts, "model": embeddingModel}, wantV, 0},
		{"one string, an alias", map[string]any{"input": texts[2], "model": "text-embedding-3-small"}, wantV[2:3], 0},
		{"one string, base64", map[string]any{"input": texts[1], "encoding_format": "base64"}, wantV[1:2], 0},
		{"token ids", map[string]any{"input": tokens}, wantV[:1], len(tokens)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := embed(t, s.api.URL+"/v1/embeddings", tt.body)
			if status != http.StatusOK || got.Object != "list" || got.Model != embeddingModel {
				t.Fatalf("%d %+v: want 200 naming %s", status, got, embeddingModel)
			}
			g := got.vectors(t)
			for i := range tt.want {
				if len(g[i]) != len(tt.want[i]) {
					t.Fatalf("input %d: %d dimensions, llama-server gives %d", i, len(g[i]), len(tt.want[i]))
				}
				if c := genq.Cosine(g[i], tt.want[i]); c < 0.9999 {
					t.Errorf("input %d: cosine %.6f to llama-server's vector", i, c)
				}
			}
			if tt.tokens > 0 && got.Usage.PromptTokens != tt.tokens {
				t.Errorf("usage %+v: want %d prompt tokens", got.Usage, tt.tokens)
			}
		})
	}

	// Twelve requests at once: every one answered whole, and the worker's
	// steps held every input once.
	before := b.Stats()
	var wg sync.WaitGroup
	errs := make(chan string, 12)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, got := embed(t, s.api.URL+"/v1/embeddings", map[string]any{"input": []string{texts[i%4], texts[(i+1)%4]}})
			if status != http.StatusOK || len(got.Data) != 2 {
				errs <- fmt.Sprintf("request %d: %d, %d vectors", i, status, len(got.Data))
				return
			}
			if c := genq.Cosine(got.vectors(t)[0], wantV[i%4]); c < 0.9999 {
				errs <- fmt.Sprintf("request %d: cosine %.6f", i, c)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if after := b.Stats(); after.Inputs-before.Inputs != 24 || after.Steps-before.Steps > 12 {
		t.Errorf("12 requests of 2 inputs took %d steps of %d inputs", after.Steps-before.Steps, after.Inputs-before.Inputs)
	}
}

// TestEmbeddingsRefusals: what the api refuses, and what the worker
// refuses, are 400s in OpenAI's shape naming their param; an input past
// the context is cut instead when the request asks.
func TestEmbeddingsRefusals(t *testing.T) {
	s, _, _ := embeddingStack(t)
	tests := []struct {
		name  string
		body  map[string]any
		param string
	}{
		{"no input", map[string]any{"model": embeddingModel}, "input"},
		{"an empty string", map[string]any{"input": ""}, "input"},
		{"too long for the model (the worker says)", map[string]any{"input": strings.Repeat("cat ", 600)}, "input"},
		{"a token id past the vocabulary (the worker says)", map[string]any{"input": []int{2, 1 << 20, 3}}, "input"},
		{"dimensions the model does not allow (the worker says)", map[string]any{"input": "a", "dimensions": 16}, "dimensions"},
		{"another encoding", map[string]any{"input": "a", "encoding_format": "int8"}, "encoding_format"},
	}
	// A model the catalogue does not hold, or one of another kind, is
	// OpenAI's 404, and nothing is queued.
	for _, name := range []string{"no-such-model", genq.SeedModel(genq.VariantB).Name} {
		status, got := embed(t, s.api.URL+"/v1/embeddings", map[string]any{"input": "a", "model": name})
		if status != http.StatusNotFound || got.Error == nil || got.Error.Code != "model_not_found" {
			t.Fatalf("model %s: %d %+v: want 404 model_not_found", name, status, got.Error)
		}
	}
	t.Run("too long, cut when asked", func(t *testing.T) {
		status, got := embed(t, s.api.URL+"/v1/embeddings", map[string]any{"input": strings.Repeat("cat ", 600), "truncate": true})
		if status != http.StatusOK || got.Usage.PromptTokens != tinygguf.BERTContext {
			t.Fatalf("%d, usage %+v: want 200 and the model's %d tokens", status, got.Usage, tinygguf.BERTContext)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := embed(t, s.api.URL+"/v1/embeddings", tt.body)
			if status != http.StatusBadRequest || got.Error == nil || got.Error.Param == nil || *got.Error.Param != tt.param ||
				got.Error.Type != "invalid_request_error" {
				t.Fatalf("%d %+v: want 400 naming %s", status, got.Error, tt.param)
			}
		})
	}
}

// TestEmbeddingsLargestRequest: OpenAI's 2,048 inputs in one request come
// back whole, their result (1.4 MB of JSON on the tiny model) past NATS's
// 1 MB payload, through the results store; 2,049 are refused.
func TestEmbeddingsLargestRequest(t *testing.T) {
	s, _, _ := embeddingStack(t)
	inputs := make([]string, genq.MaxEmbeddingInputs)
	for i := range inputs {
		inputs[i] = fmt.Sprintf("cat %d", i)
	}
	status, got := embed(t, s.api.URL+"/v1/embeddings", map[string]any{"input": inputs})
	if status != http.StatusOK || len(got.Data) != len(inputs) {
		t.Fatalf("%d, %d vectors: want 200 and %d", status, len(got.Data), len(inputs))
	}
	for i, d := range got.Data {
		if d.Index != i {
			t.Fatalf("vector %d has index %d", i, d.Index)
		}
	}
	status, _ = embed(t, s.api.URL+"/v1/embeddings", map[string]any{"input": append(inputs, "one more")})
	if status != http.StatusBadRequest {
		t.Fatalf("2,049 inputs: %d, want 400", status)
	}
}

// TestEmbeddingsUsage: an embeddings request counts its inputs' tokens for
// its tenant, under its route, on the usage route.
func TestEmbeddingsUsage(t *testing.T) {
	s, _, _ := embeddingStackWith(t, stackOptions{tenants: true, keys: keyLines(t, "k-a tenant=a")})
	r := s.callKey("POST", "/v1/embeddings", "k-a", `{"input":["hello world","the cat"]}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	u := s.callKey("GET", "/v1/usage", "k-a", "")
	var page usagePage
	if err := json.Unmarshal(u.body, &page); err != nil || len(page.Data) != 1 || len(page.Data[0].Results) != 1 {
		t.Fatalf("%d %s: %v", u.status, u.body, err)
	}
	// [CLS] hello world [SEP] and [CLS] the cat [SEP].
	if got := page.Data[0].Results[0]; got.Route != "/v1/embeddings" || got.NumModelRequests != 1 || got.InputTokens != 8 || got.OutputTokens != 0 {
		t.Fatalf("usage %+v: want one request of 8 input tokens on /v1/embeddings", got)
	}
}

// usagePage is what the embeddings tests read of a /v1/usage page.
type usagePage struct {
	Data []struct {
		Results []struct {
			Route            string
			NumModelRequests int `json:"num_model_requests"`
			InputTokens      int `json:"input_tokens"`
			OutputTokens     int `json:"output_tokens"`
		}
	}
}

// An embeddings request queued as an asynchronous job is answered as the
// route answers it, and its tokens are counted for its tenant once, under
// /v1/jobs, however often its outcome is read.
func TestEmbeddingsAsyncJob(t *testing.T) {
	s, _, _ := embeddingStackWith(t, stackOptions{tenants: true, keys: keyLines(t, "k-a tenant=a")})
	direct := s.callKey("POST", "/v1/embeddings", "k-a", `{"input":["hello world","the cat"],"encoding_format":"base64"}`)
	if direct.status != http.StatusOK {
		t.Fatalf("%d %s", direct.status, direct.body)
	}
	r := s.callKey("POST", "/v1/jobs", "k-a", `{"type":"embedding","request":{"input":["hello world","the cat"],"encoding_format":"base64"}}`)
	var queued struct{ ID, Type, Status string }
	if err := json.Unmarshal(r.body, &queued); err != nil || r.status != http.StatusAccepted || queued.Type != "embedding" {
		t.Fatalf("%d %s; want 202 for an embedding job", r.status, r.body)
	}
	var st struct {
		Status string          `json:"status"`
		Result embeddingAnswer `json:"result"`
	}
	for end := time.Now().Add(20 * time.Second); st.Status != "succeeded"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("job %s: %+v", queued.ID, st)
		}
		g := s.callKey("GET", "/v1/jobs/"+queued.ID, "k-a", "")
		if err := json.Unmarshal(g.body, &st); err != nil || g.status != http.StatusOK || st.Status == "failed" {
			t.Fatalf("%d %s", g.status, g.body)
		}
	}
	s.callKey("GET", "/v1/jobs/"+queued.ID, "k-a", "") // read again: not counted again
	var want embeddingAnswer
	if err := json.Unmarshal(direct.body, &want); err != nil {
		t.Fatal(err)
	}
	got, wantV := st.Result.vectors(t), want.vectors(t)
	if st.Result.Object != "list" || len(got) != 2 || st.Result.Usage.PromptTokens != 8 || genq.Cosine(got[0], wantV[0]) < 0.9999 || genq.Cosine(got[1], wantV[1]) < 0.9999 {
		t.Fatalf("job result %+v; want the route's two vectors and 8 prompt tokens", st.Result)
	}
	var page usagePage
	u := s.callKey("GET", "/v1/usage", "k-a", "")
	if err := json.Unmarshal(u.body, &page); err != nil || len(page.Data) != 1 {
		t.Fatalf("%d %s: %v", u.status, u.body, err)
	}
	byRoute := map[string][2]int{}
	for _, res := range page.Data[0].Results {
		byRoute[res.Route] = [2]int{res.NumModelRequests, res.InputTokens}
	}
	if byRoute["/v1/jobs"] != [2]int{1, 8} || byRoute["/v1/embeddings"] != [2]int{1, 8} {
		t.Fatalf("usage by route %v; want one request of 8 tokens on each of /v1/jobs and /v1/embeddings", byRoute)
	}
}
