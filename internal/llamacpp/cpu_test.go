package llamacpp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// The CPU checks: ggml compiles its CPU kernels per instruction set, and a
// kernel that only some CPUs run can crash only there (the AMX matrix
// product did, on Sapphire Rapids: scripts/llama-patches/0005). So every
// weight type is decoded on every CPU backend this machine can run, the
// native build's and each variant of the portable one, each in a process
// of its own, and their logits are held to each other's.

// portableEnv names the portable build's libraries (make engine-portable).
const portableEnv = "LLAMA_PORTABLE_LIB_DIR"

// childEnv, set, makes TestCPUVariants the child that decodes on the
// libraries in the directory it names.
const childEnv = "GENQ_CPU_CHECK_DIR"

// unsupportedExit is the child's exit status when the CPU lacks what its
// variant was compiled for (ggml_backend_score is 0).
const unsupportedExit = 3

// cpuModel is one model the check decodes.
type cpuModel struct {
	Name    string
	Weights tinygguf.Weights
	Size    string
}

func cpuModels() []cpuModel {
	// Variant A's own test model, where the AMX product died; then every
	// type on the small llama, whose rows K-quants store whole.
	ms := []cpuModel{{"tiny-q4_0", tinygguf.WeightsQ4_0, "tiny"}}
	for _, w := range tinygguf.AllWeights {
		ms = append(ms, cpuModel{"small-" + string(w), w, "small"})
	}
	return ms
}

// cpuPrompt is 40 tokens, so the first Decode multiplies matrices by
// matrices (the batched kernels, AMX's tiles among them) before the one-
// token steps multiply them by vectors.
func cpuPrompt() []int32 {
	p := make([]int32, 40)
	for i := range p {
		p[i] = int32(1 + (i*37)%200)
	}
	return p
}

// cpuSteps is how many tokens are decoded one at a time after the prompt.
const cpuSteps = 4

// cpuResult is what a child reports of one model.
type cpuResult struct {
	Model  string      `json:"model"`
	Tokens []int32     `json:"tokens"` // greedy, after the prompt
	Logits [][]float32 `json:"logits"` // the prompt's last, then each step's
}

type cpuReport struct {
	SystemInfo string      `json:"system_info"`
	Results    []cpuResult `json:"results"`
}

// TestCPUVariants decodes a few tokens of every weight type (Q4_0, Q8_0,
// Q4_K_M, BF16, F16, F32) on the native build and on each variant of the
// portable build that this CPU can run, each in a child process, so that a
// kernel that dies (SIGILL, SIGSEGV) fails here, naming the signal, rather
// than on a user's first request. Each answer's logits must be finite and
// close to the F32 model's on the same backend (quantisation moves them a
// little, a wrong kernel a lot), and each backend's close to the native
// build's.
func TestCPUVariants(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		cpuChild(t, dir)
		return
	}
	native := requireDir(t, LibDirEnv, "make engine")
	portable := requireDir(t, portableEnv, "make engine-portable")

	models := t.TempDir()
	for _, m := range cpuModels() {
		if err := tinygguf.Write(filepath.Join(models, m.Name+".gguf"), tinygguf.Options{Weights: m.Weights, Size: m.Size, Seed: 7}); err != nil {
			t.Fatal(err)
		}
	}

	type backend struct{ name, dir string }
	backends := []backend{{"native", native}}
	variants, _ := filepath.Glob(filepath.Join(portable, "libggml-cpu-*.so"))
	if len(variants) == 0 {
		t.Fatalf("%s (%s) holds no libggml-cpu-*.so: it is not the portable build", portableEnv, portable)
	}
	for _, v := range variants {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(v), "libggml-cpu-"), ".so")
		backends = append(backends, backend{"portable-" + name, oneVariant(t, portable, v)})
	}

	var ref *cpuReport
	ran := 0
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rep, unsupported := runCPUChild(t, b.dir, models)
			if unsupported {
				t.Skipf("this CPU lacks what %s was compiled for", b.name)
			}
			ran++
			t.Logf("%s: %s", b.name, rep.SystemInfo)
			if strings.Contains(rep.SystemInfo, "AMX_INT8 = 1") {
				t.Errorf("%s was built with ggml's AMX code (AMX_INT8 = 1); scripts/llama-patches/0005 keeps it out", b.name)
			}
			checkAgainstF32(t, rep)
			if ref == nil {
				ref = rep
				return
			}
			for i, r := range rep.Results {
				if c := genq.Cosine(r.Logits[0], ref.Results[i].Logits[0]); c < 0.999 {
					t.Errorf("%s: the prompt's logits are %.5f alike (cosine) to the native build's; want 0.999 or more", r.Model, c)
				}
			}
		})
	}
	if ran < 2 {
		t.Errorf("only %d CPU backends ran: want the native build and at least one portable variant", ran)
	}
}

// requireDir is the directory env names, which must hold libllama.so; the
// test is skipped without it, unless GENQ_REQUIRE_PEER=1 (make test).
func requireDir(t *testing.T, env, target string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "libllama.so")); err == nil {
			return dir
		}
	}
	msg := fmt.Sprintf("no engine in %s=%q: %s builds it", env, dir, target)
	if os.Getenv("GENQ_REQUIRE_PEER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// oneVariant is a directory holding the portable build's libraries with
// only one CPU variant, so that ggml, which loads the best-scoring variant
// it finds, loads that one.
func oneVariant(t *testing.T, portable, variant string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(portable)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, "libggml-cpu-") && n != filepath.Base(variant) {
			continue
		}
		if err := os.Symlink(filepath.Join(portable, n), filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runCPUChild runs this test binary as the child over the libraries in dir
// and returns its report, or unsupported when its variant is not for this
// CPU. A child killed by a signal fails the test with the signal's name.
func runCPUChild(t *testing.T, dir, models string) (rep *cpuReport, unsupported bool) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCPUVariants$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, "GENQ_CPU_CHECK_MODELS="+models, "GENQ_CPU_CHECK_OUT="+out)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("the engine died of %v (%s) decoding on %s; its output:\n%s", ws.Signal(), sigName(ws.Signal()), dir, tail(logs.String()))
		}
		if exit.ExitCode() == unsupportedExit {
			return nil, true
		}
		t.Fatalf("the child failed (%v):\n%s", err, tail(logs.String()))
	case err != nil:
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the child wrote no report: %v\n%s", err, tail(logs.String()))
	}
	rep = &cpuReport{}
	if err := json.Unmarshal(b, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(cpuModels()) {
		t.Fatalf("the child reported %d models, want %d", len(rep.Results), len(cpuModels()))
	}
	return rep, false
}

// sigName is a signal's usual name: SIGILL, not "illegal instruction".
func sigName(s syscall.Signal) string {
	for _, n := range []struct {
		s    syscall.Signal
		name string
	}{{syscall.SIGILL, "SIGILL"}, {syscall.SIGSEGV, "SIGSEGV"}, {syscall.SIGBUS, "SIGBUS"}, {syscall.SIGABRT, "SIGABRT"}, {syscall.SIGFPE, "SIGFPE"}} {
		if n.s == s {
			return n.name
		}
	}
	return fmt.Sprintf("signal %d", int(s))
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// checkAgainstF32 holds every model's logits to the F32 model's of the same
// size on the same backend.
func checkAgainstF32(t *testing.T, rep *cpuReport) {
	t.Helper()
	f32 := slices.IndexFunc(rep.Results, func(r cpuResult) bool { return r.Model == "small-f32" })
	if f32 < 0 {
		t.Fatal("no F32 model in the report")
	}
	var alike []string
	for _, r := range rep.Results {
		for i, l := range r.Logits {
			for _, v := range l {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: logits %d hold %v", r.Model, i, v)
				}
			}
		}
		if !strings.HasPrefix(r.Model, "small-") {
			continue
		}
		// The prompt's logits: the steps after it follow each model's own
		// greedy tokens, which quantisation may change.
		c := genq.Cosine(r.Logits[0], rep.Results[f32].Logits[0])
		alike = append(alike, fmt.Sprintf("%s %.4f", strings.TrimPrefix(r.Model, "small-"), c))
		if c < 0.95 {
			t.Errorf("%s: the prompt's logits are %.4f alike (cosine) to the F32 model's; want 0.95 or more", r.Model, c)
		}
	}
	t.Logf("alike to F32: %s", strings.Join(alike, ", "))
}

// cpuChild is the child: it loads the libraries in dir and decodes each
// model, writing the report to GENQ_CPU_CHECK_OUT.
func cpuChild(t *testing.T, dir string) {
	if variants, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so")); len(variants) == 1 {
		if !variantRuns(t, variants[0]) {
			os.Exit(unsupportedExit)
		}
	}
	lib, err := Load(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rep := cpuReport{SystemInfo: lib.SystemInfo}
	for _, m := range cpuModels() {
		rep.Results = append(rep.Results, decodeOn(t, lib, filepath.Join(os.Getenv("GENQ_CPU_CHECK_MODELS"), m.Name+".gguf"), m.Name))
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("GENQ_CPU_CHECK_OUT"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// variantRuns asks a variant, as ggml does before it loads one, whether
// this CPU has what it was compiled for.
func variantRuns(t *testing.T, path string) bool {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	var score func() int32
	purego.RegisterLibFunc(&score, h, "ggml_backend_score")
	return score() > 0
}

// decodeOn decodes the prompt, then cpuSteps greedy tokens one at a time,
// on two threads (so the kernels' work is split as a worker's is).
func decodeOn(t *testing.T, lib *Library, path, name string) cpuResult {
	m, err := lib.OpenModel(path, ModelParams{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer m.Close()
	prompt := cpuPrompt()
	ctx, err := m.NewContext(ContextParams{Cells: 256, Sequences: 1, Batch: len(prompt), Threads: 2, FlashAttention: "auto"})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer ctx.Close()
	b := NewBatch(len(prompt))
	defer b.Free()
	for i, tok := range prompt {
		if _, err := b.Add(tok, i, 0, i == len(prompt)-1); err != nil {
			t.Fatal(err)
		}
	}
	res := cpuResult{Model: name}
	last := len(prompt) - 1
	pos := len(prompt)
	for step := 0; ; step++ {
		if err := ctx.Decode(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		row, err := ctx.Logits(last)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l := slices.Clone(row)
		res.Logits = append(res.Logits, l)
		if step == cpuSteps {
			return res
		}
		next := int32(0)
		for i, v := range l {
			if v > l[next] {
				next = int32(i)
			}
		}
		res.Tokens = append(res.Tokens, next)
		b.Clear()
		if _, err := b.Add(next, pos, 0, true); err != nil {
			t.Fatal(err)
		}
		last, pos = 0, pos+1
	}
}
