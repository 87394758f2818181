package embedgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// tinyModel writes the tiny BERT once per test into a temporary directory.
func tinyModel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := tinygguf.WriteBERT(filepath.Join(dir, tinygguf.BERTFileName("tiny")), "tiny", "", 1); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openPaused loads the tiny model with its step loop not yet running, so
// a test can queue several jobs' inputs before the first step.
func openPaused(t *testing.T, cfg Config) *Backend {
	t.Helper()
	if cfg.ModelDir == "" {
		cfg.ModelDir = tinyModel(t)
	}
	b, err := open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func texts(ss ...string) genq.EmbeddingRequest {
	var r genq.EmbeddingRequest
	for _, s := range ss {
		r.Inputs = append(r.Inputs, genq.EmbeddingInput{Text: s})
	}
	return r
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// waitQueued waits until n inputs wait for a step.
func waitQueued(t *testing.T, b *Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.sched.queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d inputs queued, want %d", b.sched.queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Eight jobs' inputs, queued while no step runs, are computed in one
// engine step, and each vector is the one its input gets alone.
func TestJobsShareOneStep(t *testing.T) {
	b := openPaused(t, Config{})
	const jobs, per = 8, 3
	results := make([][][]float32, jobs)
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := texts(fmt.Sprintf("job %d asks about the cat", j), fmt.Sprintf("the dog of job %d", j), "hello world")
			vecs, tokens, err := b.Embed(context.Background(), req)
			if err == nil && len(tokens) != per {
				err = fmt.Errorf("job %d: %d token counts, want %d", j, len(tokens), per)
			}
			results[j] = vecs
			errs <- err
		}()
	}
	waitQueued(t, b, jobs*per)
	go b.sched.loop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := b.Stats(); s.Steps != 1 || s.Inputs != jobs*per {
		t.Fatalf("stats %+v: want the %d inputs of %d jobs in 1 step", s, jobs*per, jobs)
	}
	for j := range jobs {
		alone, _, err := b.Embed(context.Background(), texts(fmt.Sprintf("job %d asks about the cat", j)))
		if err != nil {
			t.Fatal(err)
		}
		if len(results[j][0]) != b.Width() {
			t.Fatalf("job %d: %d dimensions, want %d", j, len(results[j][0]), b.Width())
		}
		if c := genq.Cosine(results[j][0], alone[0]); c < 0.99999 {
			t.Errorf("job %d: batched vector's cosine to the vector alone is %.7f", j, c)
		}
		if n := norm(results[j][0]); math.Abs(n-1) > 1e-5 {
			t.Errorf("job %d: norm %.7f, want unit vectors", j, n)
		}
	}
	// Different texts give different vectors: the inputs were not mixed.
	if c := genq.Cosine(results[0][0], results[0][1]); c > 0.999 {
		t.Errorf("two different texts' vectors have cosine %.5f", c)
	}
}

// A step holds at most EMBEDDING_BATCH_INPUTS inputs and
// EMBEDDING_STEP_TOKENS tokens, within EMBEDDING_BATCH_TOKENS.
func TestStepBounds(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		inputs    int
		wantSteps int64
	}{
		{"inputs", Config{BatchInputs: 4}, 10, 3},
		// "the cat" is [CLS] the cat [SEP]: 4 tokens; 16 tokens hold 4.
		{"tokens", Config{BatchTokens: 16}, 10, 3},
		{"both wide", Config{}, 10, 1},
		// 8 tokens hold 2 inputs.
		{"step tokens", Config{StepTokens: 8}, 10, 5},
		{"step tokens past the batch's", Config{BatchTokens: 16, StepTokens: 64}, 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := openPaused(t, tt.cfg)
			go b.sched.loop()
			req := genq.EmbeddingRequest{}
			for range tt.inputs {
				req.Inputs = append(req.Inputs, genq.EmbeddingInput{Text: "the cat"})
			}
			vecs, tokens, err := b.Embed(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(vecs) != tt.inputs || tokens[0] != 4 {
				t.Fatalf("%d vectors, first of %d tokens: want %d of 4", len(vecs), tokens[0], tt.inputs)
			}
			if s := b.Stats(); s.Steps != tt.wantSteps {
				t.Fatalf("%d steps, want %d", s.Steps, tt.wantSteps)
			}
		})
	}
}

// Inputs past the model's context, token ids past its vocabulary and
// dimensions it does not allow are refused as invalid, naming the field.
func TestRefusals(t *testing.T) {
	b := openPaused(t, Config{Dimensions: "16,32"})
	go b.sched.loop()
	long := ""
	for range tinygguf.BERTContext {
		long += "cat "
	}
	tests := []struct {
		name      string
		req       genq.EmbeddingRequest
		wantField string
		wantWidth int
		wantToks  int
	}{
		{"too long", texts(long), "input", 0, 0},
		{"cut when asked", genq.EmbeddingRequest{Inputs: texts(long).Inputs, Truncate: true}, "", 64, tinygguf.BERTContext},
		{"token id past the vocabulary", genq.EmbeddingRequest{Inputs: []genq.EmbeddingInput{{TokenIDs: []int32{2, 1 << 20, 3}}}}, "input", 0, 0},
		{"token ids", genq.EmbeddingRequest{Inputs: []genq.EmbeddingInput{{TokenIDs: []int32{2, 40, 3}}}}, "", 64, 3},
		{"dimensions not allowed", genq.EmbeddingRequest{Inputs: texts("a").Inputs, Dimensions: 24}, "dimensions", 0, 0},
		{"dimensions allowed", genq.EmbeddingRequest{Inputs: texts("a").Inputs, Dimensions: 32}, "", 32, 3},
		{"dimensions of the model", genq.EmbeddingRequest{Inputs: texts("a").Inputs, Dimensions: 64}, "", 64, 3},
		{"empty input", genq.EmbeddingRequest{Inputs: []genq.EmbeddingInput{{}}}, "input", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vecs, tokens, err := b.Embed(context.Background(), tt.req)
			if tt.wantField != "" {
				var e *genq.Error
				if !errors.As(err, &e) || e.Code != genq.Invalid || e.Field != tt.wantField {
					t.Fatalf("err %v: want invalid, field %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(vecs[0]) != tt.wantWidth || tokens[0] != tt.wantToks {
				t.Fatalf("%d dimensions of %d tokens: want %d of %d", len(vecs[0]), tokens[0], tt.wantWidth, tt.wantToks)
			}
			if n := norm(vecs[0]); math.Abs(n-1) > 1e-5 {
				t.Errorf("norm %.7f, want unit vectors", n)
			}
		})
	}
}

// The job's result is the EmbeddingResult JSON, usage summing the tokens.
func TestGenerateResult(t *testing.T) {
	b := openPaused(t, Config{})
	go b.sched.loop()
	job := genq.Job{Envelope: genq.Envelope{ID: "j1", Variant: "embedding_tiny_bert"}, EmbeddingRequest: texts("hello world", "the cat")}
	res, err := b.Generate(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got genq.EmbeddingResult
	if err := json.Unmarshal(res.Data, &got); err != nil || res.ContentType != "application/json" {
		t.Fatalf("result %s %.200s…: %v", res.ContentType, res.Data, err)
	}
	if len(got.Embeddings) != 2 || fmt.Sprint(got.Tokens) != "[4 4]" || got.Usage.PromptTokens != 8 || got.Model != "tiny-bert.gguf" {
		t.Fatalf("result %+v: want 2 vectors of 4 tokens each, 8 in all, from tiny-bert.gguf", got)
	}
	if !strings.HasPrefix(string(res.Data), `{"usage":`) {
		t.Fatalf("result %.60s…: want usage first", res.Data)
	}
	// A job of text is not this worker's.
	_, err = b.Generate(context.Background(), genq.Job{Envelope: genq.Envelope{ID: "j2", Variant: "embedding_tiny_bert", Text: "hi"}}, nil)
	if genq.ErrorCode(err) != genq.Invalid {
		t.Fatalf("a text job: err %v, want invalid", err)
	}
}

// A chat model is no embedding model: it pools nothing, and fails to
// open, saying so.
func TestOpenRefusesAChatModel(t *testing.T) {
	dir := t.TempDir()
	if err := tinygguf.Write(filepath.Join(dir, "chat.gguf"), tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), Config{ModelDir: dir}, nil)
	if err == nil || !strings.Contains(err.Error(), "pooling is none") {
		t.Fatalf("err %v: want the model's pooling named", err)
	}
}

// A wrong file or directory fails to open in genq's words, before the
// engine is asked to read it.
func TestOpenRefusesWrongFiles(t *testing.T) {
	dir, empty, two := t.TempDir(), t.TempDir(), t.TempDir()
	notGGUF := filepath.Join(dir, "notes.gguf")
	if err := os.WriteFile(notGGUF, []byte("this is not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.gguf", "b.gguf"} {
		if err := os.WriteFile(filepath.Join(two, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"not a GGUF file", Config{ModelFile: notGGUF}, "embedding model: " + notGGUF + ": not a GGUF file"},
		{"missing file", Config{ModelFile: filepath.Join(dir, "absent.gguf")}, "no such file"},
		{"empty directory", Config{ModelDir: empty}, "no .gguf file in " + empty + " (genqctl models tiny --family bert"},
		{"two models in the directory", Config{ModelDir: two}, "name one with EMBEDDING_MODEL_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each fails before the engine loads: no backend to close.
			if _, err := Open(context.Background(), tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v; want it to say %q", err, tc.want)
			}
		})
	}
}
