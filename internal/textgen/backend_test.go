package textgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// tinyModels are written once for the whole package: variant -> path.
var tinyModels = map[genq.Variant]string{}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "genq-ggml-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
		p := filepath.Join(dir, tinygguf.FileName(v, "tiny"))
		if err := tinygguf.Write(p, tinygguf.OptionsFor(v, "tiny", 1)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		tinyModels[v] = p
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// openTiny opens variant v's tiny model, greedy unless cfg says otherwise.
func openTiny(t testing.TB, v genq.Variant, cfg Config) *Backend {
	t.Helper()
	cfg.ModelFile = tinyModels[v]
	if cfg.Slots == 0 {
		cfg.Slots = 4
	}
	// One compute thread: ggml's threads spin while they wait for each other,
	// and on a busy 2-core machine (parallel test packages, builds) two
	// spinning threads slow each step down by an order of magnitude.
	cfg.Threads = 1
	// llama.cpp's flash attention on a CPU accumulates in F16, so its sums
	// depend on the order of a sequence's cells in the cache, which the
	// cache's history decides: answers would then differ by rounding
	// between a sequence alone and among others, which the tests here
	// compare exactly. Tests that want it say so.
	if cfg.FlashAttention == "" {
		cfg.FlashAttention = "off"
	}
	b, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestGenerateEndToEnd: a sampled answer comes back as non-empty UTF-8
// with no special token or prompt text in it. It ignores end-of-turn
// tokens, so that the answer is never empty because a random model chose
// to stop at once (which it may, on some CPU's arithmetic).
func TestGenerateEndToEnd(t *testing.T) {
	for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
		t.Run(string(v), func(t *testing.T) {
			b := openTiny(t, v, Config{Temperature: 0.6, TopP: 0.9, TopK: 50, Seed: 3, MaxNewTokens: 32, IgnoreEOS: true})
			info := b.Info()
			if info.Device.Kind != "cpu" || info.Device.Name == "" || info.Slots != 4 || info.Model != filepath.Base(tinyModels[v]) {
				t.Fatalf("Info() = %+v", info)
			}
			res, err := b.Generate(context.Background(), genq.Job{Envelope: genq.Envelope{ID: "1", Variant: v, Text: "Tell me a story."}}, func(genq.Progress) {})
			if err != nil {
				t.Fatal(err)
			}
			if res.ContentType != "application/json" {
				t.Fatalf("content type %q", res.ContentType)
			}
			var body genq.TextResult
			if err := json.Unmarshal(res.Data, &body); err != nil {
				t.Fatalf("body %q: %v", res.Data, err)
			}
			if body.GeneratedText == "" || !utf8.ValidString(body.GeneratedText) {
				t.Fatalf("generated_text %q: want non-empty valid UTF-8", body.GeneratedText)
			}
			for _, special := range append(tinygguf.Llama3Specials(), "You are a helpful assistant", "Tell me a story") {
				if strings.Contains(body.GeneratedText, special) {
					t.Fatalf("generated_text holds %q: %q", special, body.GeneratedText)
				}
			}
		})
	}
}

func TestGenerateRespectsMaxNewTokens(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{MaxNewTokens: 7})
	g, err := b.generate(context.Background(), "count")
	if err != nil {
		t.Fatal(err)
	}
	if g.Tokens < 1 || g.Tokens > 7 {
		t.Fatalf("generated %d tokens, want 1..7", g.Tokens)
	}
}

// TestAnswerLengthAndTheContext: an answer runs to the worker's cap or
// to the end of the context, whichever comes first; a max_tokens the
// context cannot hold after the prompt, and a prompt that fills it, are
// refused in OpenAI's words (genq.ContextExceeded); a count takes any
// prompt.
func TestAnswerLengthAndTheContext(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{ContextSize: 128, MaxNewTokens: 64, IgnoreEOS: true})
	ctx := context.Background()
	chat := func(text string, tr genq.TextRequest) genq.Job {
		tr.Messages = []genq.Message{{Role: genq.RoleUser, Content: text}}
		return genq.Job{Envelope: genq.Envelope{ID: "j", Variant: genq.VariantA}, TextRequest: tr}
	}
	long := strings.Repeat("x y z ", 500)
	tests := []struct {
		name   string
		job    genq.Job
		tokens func(prompt int) int // the answer's length, nil when refused
		answer int                  // the refusal's answer tokens
		field  string
	}{
		{"fits: the cap", chat("short question", genq.TextRequest{}), func(int) int { return 64 }, 0, ""},
		{"max_tokens over the cap: the cap", chat("short question", genq.TextRequest{MaxTokens: 32000}), func(int) int { return 64 }, 0, ""},
		{"no max_tokens near the end: what the context leaves", chat(strings.Repeat("word ", 20), genq.TextRequest{}), func(p int) int { return 128 - p }, 0, ""},
		{"max_tokens past what the context leaves", chat(strings.Repeat("word ", 20), genq.TextRequest{MaxTokens: 60}), nil, 60, "max_tokens"},
		{"the prompt alone past the context", chat(long, genq.TextRequest{MaxTokens: 8}), nil, 0, "messages"},
		{"a count of any prompt", chat(long, genq.TextRequest{CountOnly: true, MaxTokens: 1}), func(int) int { return 0 }, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.generateJob(ctx, tt.job)
			if tt.tokens != nil {
				if err != nil || got.Tokens != tt.tokens(got.PromptTokens) {
					t.Fatalf("answered %d tokens after %d (%v); want %d", got.Tokens, got.PromptTokens, err, tt.tokens(got.PromptTokens))
				}
				if got.Tokens > 0 && got.FinishReason != genq.FinishLength {
					t.Fatalf("finish reason %q, want length", got.FinishReason)
				}
				return
			}
			ce, ok := genq.ContextExceededOf(err)
			if !ok || ce.Context != 128 || ce.Answer != tt.answer || ce.Prompt < 64 || ce.Input != "messages" || genq.ErrorField(err) != tt.field {
				t.Fatalf("err = %v (%+v, field %q); want the context exceeded, answer %d, field %q", err, ce, genq.ErrorField(err), tt.answer, tt.field)
			}
		})
	}
}

// TestSeedMakesOutputReproducible: one seed draws the same answer twice,
// another a different one. End-of-turn tokens are ignored, so that both
// seeds draw 40 tokens: two answers a random model ended at once would be
// the same empty text.
func TestSeedMakesOutputReproducible(t *testing.T) {
	gen := func(seed int64) string {
		b := openTiny(t, genq.VariantB, Config{Temperature: 0.9, TopP: 0.95, Seed: seed, MaxNewTokens: 40, IgnoreEOS: true})
		g, err := b.generate(context.Background(), "Say something random.")
		if err != nil {
			t.Fatal(err)
		}
		return g.Text
	}
	a, again, other := gen(11), gen(11), gen(12)
	if a != again {
		t.Fatalf("seed 11 gave two answers:\n%q\n%q", a, again)
	}
	if a == other {
		t.Fatalf("seeds 11 and 12 gave the same answer %q", a)
	}
}

func TestOpenRejectsUnservableModels(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, override map[string]any) string {
		p := filepath.Join(dir, name)
		opts := tinygguf.OptionsFor(genq.VariantA, "tiny", 1)
		opts.Override = override
		if err := tinygguf.Write(p, opts); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notGGUF := filepath.Join(dir, "notes.gguf")
	os.WriteFile(notGGUF, []byte("this is not a model"), 0o644)
	empty := t.TempDir()
	two := t.TempDir()
	for _, n := range []string{"a.gguf", "b.gguf"} {
		os.WriteFile(filepath.Join(two, n), nil, 0o644)
	}

	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"not a GGUF file", Config{ModelFile: notGGUF}, "not a GGUF file"},
		{"unknown architecture", Config{ModelFile: write("arch.gguf", map[string]any{"general.architecture": "nosucharch"})}, `architecture "nosucharch" is not supported`},
		{"no chat template", Config{ModelFile: write("notmpl.gguf", map[string]any{"tokenizer.chat_template": nil})}, "no chat template"},
		{"chat template that is not Jinja", Config{ModelFile: write("oddtmpl.gguf", map[string]any{"tokenizer.chat_template": "{% for m in messages %}{{ m.content }}"})}, "cannot be compiled"},
		{"chat template that fails on every chat", Config{ModelFile: write("raisetmpl.gguf", map[string]any{"tokenizer.chat_template": "{{ raise_exception('no chats here') }}"})}, "no chats here"},
		{"missing file", Config{ModelFile: filepath.Join(dir, "absent.gguf")}, "no such file"},
		{"empty directory", Config{ModelDir: empty}, "no .gguf file"},
		{"two models in the directory", Config{ModelDir: two}, "2 .gguf files"},
		{"answer longer than the context", Config{ModelFile: tinyModels[genq.VariantA], ContextSize: 64, MaxNewTokens: 64}, "leaves no room"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Open(context.Background(), tt.cfg, nil)
			if err == nil {
				b.Close()
				t.Fatalf("Open succeeded; want an error about %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v; want it to say %q", err, tt.want)
			}
		})
	}
}

func TestOpenFindsTheOneModelInDir(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(tinyModels[genq.VariantA])
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model.gguf"), data, 0o644)
	b, err := Open(context.Background(), Config{ModelDir: dir, Slots: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Info().Model != "model.gguf" {
		t.Fatalf("Info().Model = %q", b.Info().Model)
	}
}

func TestGenerateAfterCloseFails(t *testing.T) {
	cfg := Config{ModelFile: tinyModels[genq.VariantA], Slots: 1}
	b, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	_, err = b.generate(context.Background(), "hi")
	if genq.ErrorCode(err) != genq.Unavailable {
		t.Fatalf("generate after Close: %v; want unavailable", err)
	}
}

// concurrently runs one generate per text at once and returns the answers.
func concurrently(t *testing.T, b *Backend, texts []string) []seqResult {
	t.Helper()
	out, errs := generateTogether(t, b, texts)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// generateTogether runs one generate per text and returns the answers and
// errors. The scheduler's loop is held until as many requests as its queue
// takes have arrived, so they are admitted to the same step however a
// loaded machine schedules the goroutines: tests that count sequences per
// step do not depend on the goroutines' start order.
func generateTogether(t *testing.T, b *Backend, texts []string) ([]seqResult, []error) {
	t.Helper()
	jobs := make([]genq.Job, len(texts))
	for i, text := range texts {
		jobs[i] = genq.Job{Envelope: genq.Envelope{Text: text}}
	}
	return jobsTogether(t, b, jobs)
}

// jobsTogether is generateTogether for jobs with their own parameters.
func jobsTogether(t *testing.T, b *Backend, jobs []genq.Job) ([]seqResult, []error) {
	t.Helper()
	out := make([]seqResult, len(jobs))
	errs := make([]error, len(jobs))
	queued := min(len(jobs), cap(b.sched.submit))
	held := make(chan struct{})
	released := make(chan error, 1)
	go func() {
		released <- b.sched.exclusively(context.Background(), func() {
			close(held)
			for deadline := time.Now().Add(30 * time.Second); len(b.sched.submit) < queued && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		})
	}()
	select {
	case <-held:
	case err := <-released:
		t.Fatalf("holding the scheduler: %v", err)
	}
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Go(func() { out[i], errs[i] = b.generateJob(context.Background(), job) })
	}
	wg.Wait()
	if err := <-released; err != nil {
		t.Fatalf("holding the scheduler: %v", err)
	}
	return out, errs
}
