package structured

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
	"golang.org/x/sys/unix"
)

// benchSchema is one schema of every corpus at hand, with a valid instance
// where its source gives one (the official suite's).
type benchSchema struct {
	name     string
	schema   []byte
	instance []byte
}

// allBenchSchemas gathers every schema we have: the official suite's
// draft 2020-12 groups (each with its first valid instance), the repo's
// corpus, the npm corpus when GENQ_SCHEMA_CORPUS names it, and agents'
// tool sets when GENQ_AGENT_TOOLS names JSON-lines files (a list, as
// PATH's) of request bodies with "tools", as make test-agents records
// them in results/agents/tools-*.jsonl.
func allBenchSchemas(t testing.TB) []benchSchema {
	t.Helper()
	var out []benchSchema
	files, _ := filepath.Glob(filepath.Join(suiteDir(), "*.json"))
	for _, f := range files {
		groups := readSuiteFile(t, f)
		for i, gr := range groups {
			s := benchSchema{name: fmt.Sprintf("suite/%s#%d", filepath.Base(f), i), schema: gr.Schema}
			for _, tc := range gr.Tests {
				if tc.Valid {
					s.instance = tc.Data
					break
				}
			}
			out = append(out, s)
		}
	}
	for i, c := range loadCorpus(t) {
		out = append(out, benchSchema{name: fmt.Sprintf("testdata/corpus.json#%d", i), schema: c.Schema})
	}
	if dir := os.Getenv("GENQ_SCHEMA_CORPUS"); dir != "" {
		for _, s := range realWorldSchemas(t, dir) {
			out = append(out, benchSchema{name: s.source + "/" + s.name, schema: s.schema})
		}
	}
	for _, path := range filepath.SplitList(os.Getenv("GENQ_AGENT_TOOLS")) {
		out = append(out, agentToolSchemas(t, path)...)
	}
	return out
}

// agentToolSchemas reads request bodies, one a line, and makes each
// tool's input schema (Anthropic's input_schema, chat completions'
// function.parameters, or the Responses API's parameters, a namespace's
// tools among them) a schema of its own.
func agentToolSchemas(t testing.TB, path string) []benchSchema {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []benchSchema
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for line := 0; sc.Scan(); line++ {
		var body struct {
			Tools []agentTool `json:"tools"`
		}
		if json.Unmarshal(sc.Bytes(), &body) != nil {
			continue // a line that records no tools' texts
		}
		for _, tl := range body.Tools {
			for _, tl := range append([]agentTool{tl}, tl.Tools...) {
				name, schema := tl.Name, cmp.Or(given(tl.InputSchema), given(tl.Parameters))
				if schema == "" {
					name, schema = tl.Function.Name, given(tl.Function.Parameters)
				}
				if schema != "" {
					out = append(out, benchSchema{name: fmt.Sprintf("agents/%d/%s", line, name), schema: json.RawMessage(schema)})
				}
			}
		}
	}
	return out
}

// agentTool is a tool as an agent sends it, in any of the three APIs'
// shapes; a Responses namespace holds tools of its own.
type agentTool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
	Parameters  json.RawMessage `json:"parameters"`
	Function    struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
	Tools []agentTool `json:"tools"`
}

// given is a schema's text, "" where it is absent or null.
func given(raw json.RawMessage) string {
	if s := strings.TrimSpace(string(raw)); s != "null" {
		return s
	}
	return ""
}

// clocks reads wall time and this thread's CPU time: on a machine other
// work keeps busy, CPU time is what the work itself cost one core.
type clocks struct{ wall, cpu time.Duration }

func now() clocks {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) //nolint:errcheck // Linux always has it
	return clocks{time.Duration(time.Now().UnixNano()), time.Duration(ts.Nano())}
}

func (c clocks) since() clocks {
	n := now()
	return clocks{n.wall - c.wall, n.cpu - c.cpu}
}

// schemaRun is what one schema cost in one pass.
type schemaRun struct {
	name       string
	compiled   bool
	cached     bool
	compile    clocks
	firstMask  clocks // compile, prepare within the budget, first mask
	masks      []clocks
	maxMask    time.Duration // of CPU time
	maxMaskPos int
}

// benchPrepareBudget is the worker's default TEXT_SCHEMA_PREPARE_BUDGET.
const benchPrepareBudget = 25 * time.Millisecond

// runSchema compiles s through c as the worker does (the cache, the
// prepare budget counting the compile), takes the first mask, then feeds
// s's instance (or, without one, a random walk of up to steps tokens)
// timing each mask.
func runSchema(c *Cache, v *grammar.Vocab, toks [][]byte, eos int32, s benchSchema, rng *rand.Rand, steps int) schemaRun {
	r := schemaRun{name: s.name}
	r.cached = c.get(sha256.Sum256(s.schema)) != nil
	start := now()
	g, err := c.Compile(s.schema)
	r.compile = start.since()
	if err != nil {
		return r
	}
	r.compiled = true
	if left := benchPrepareBudget - r.compile.wall; left > 0 {
		g.Prepare(context.Background(), v, left) //nolint:errcheck // a background context does not end
	}
	m := g.NewMatcher()
	mask := make([]uint64, (v.Size()+63)/64)
	m.Mask(v, mask)
	r.firstMask = start.since()
	text := s.instance
	for step := 0; step < steps; step++ {
		var id int32 = -1
		if len(text) > 0 {
			id = longestAllowed(mask, toks, text)
		} else if s.instance == nil {
			ids := vocabtest.Allowed(mask)
			id = ids[rng.IntN(len(ids))]
		}
		if id < 0 || id == eos || !m.Advance(toks[id]) {
			break
		}
		if len(text) > 0 {
			text = text[len(toks[id]):]
		}
		t0 := now()
		m.Mask(v, mask)
		d := t0.since()
		r.masks = append(r.masks, d)
		if d.cpu > r.maxMask {
			r.maxMask, r.maxMaskPos = d.cpu, step
		}
	}
	return r
}

// longestAllowed is the longest token the mask allows that begins text,
// or -1: the tokens a model writing text would take.
func longestAllowed(mask []uint64, toks [][]byte, text []byte) int32 {
	best := int32(-1)
	for id, tok := range toks {
		if len(tok) > 0 && mask[id>>6]&(1<<(id&63)) != 0 && bytes.HasPrefix(text, tok) && (best < 0 || len(tok) > len(toks[best])) {
			best = int32(id)
		}
	}
	return best
}

// rssBytes reads the process's resident memory now and at its peak.
func rssBytes() (now, peak int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			now = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return now, peak
}

func durPct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// BenchmarkSchemas runs every schema at hand (allBenchSchemas) through one
// worker-like process: one Llama 3 vocabulary, warmed; a grammar cache of
// the worker's size; each schema compiled, prepared within the worker's
// default budget and masked, then fed its instance or a random walk, with
// every mask timed. GENQ_SCHEMA_BENCH_PASSES passes (3 unless set), each
// in a fresh shuffled order; GENQ_SCHEMA_BENCH_EVERY=k takes every k-th
// schema, GENQ_SCHEMA_BENCH_MATCH those whose names hold it. It reports compile, compile-to-first-mask and per-token mask
// percentiles, and resident memory above the vocabulary's own; with
// GENQ_SCHEMA_REPORT set, as Markdown there. Run it with -benchtime 1x.
func BenchmarkSchemas(b *testing.B) {
	v, toks, eos := llama3(b)
	v.Warm(CompileJSONObject())
	schemas := allBenchSchemas(b)
	every, _ := strconv.Atoi(os.Getenv("GENQ_SCHEMA_BENCH_EVERY"))
	if every > 1 {
		var kept []benchSchema
		for i := 0; i < len(schemas); i += every {
			kept = append(kept, schemas[i])
		}
		schemas = kept
	}
	if match := os.Getenv("GENQ_SCHEMA_BENCH_MATCH"); match != "" {
		schemas = slices.DeleteFunc(schemas, func(s benchSchema) bool { return !strings.Contains(s.name, match) })
	}
	passes := 3
	if n, err := strconv.Atoi(os.Getenv("GENQ_SCHEMA_BENCH_PASSES")); err == nil && n > 0 {
		passes = n
	}
	// Thread CPU time is this goroutine's only while it keeps its thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	runtime.GC()
	debug.FreeOSMemory()
	base, _ := rssBytes()
	for b.Loop() {
		c := NewCache(benchGrammarCache)
		var runs []schemaRun
		for pass := 0; pass < passes; pass++ {
			rng := rand.New(rand.NewPCG(uint64(pass), 7))
			order := rng.Perm(len(schemas))
			for _, i := range order {
				runs = append(runs, runSchema(c, v, toks, eos, schemas[i], rand.New(rand.NewPCG(uint64(i), 1)), 32))
			}
		}
		now, peak := rssBytes()
		runtime.GC()
		debug.FreeOSMemory()
		after, _ := rssBytes()
		report := schemaReport(runs, len(schemas), passes, base, now, peak, after)
		b.Log("\n" + report)
		if path := os.Getenv("GENQ_SCHEMA_REPORT"); path != "" {
			if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchGrammarCache is the worker's grammar cache size (textgen's
// grammarCacheSize).
const benchGrammarCache = 256

func schemaReport(runs []schemaRun, n, passes int, base, now, peak, after int64) string {
	var compile, first, masks []clocks
	compiled := 0
	for _, r := range runs {
		if r.cached {
			continue
		}
		compile = append(compile, r.compile)
		if !r.compiled {
			continue
		}
		compiled++
		first = append(first, r.firstMask)
	}
	for _, r := range runs {
		masks = append(masks, r.masks...)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1e3) }
	us := func(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }
	mb := func(x int64) string { return fmt.Sprintf("%d MB", x>>20) }
	// row is a measure's p50, p99 and max, in CPU time then wall time.
	row := func(name string, cs []clocks, unit func(time.Duration) string) string {
		var cpu, wall []time.Duration
		for _, c := range cs {
			cpu, wall = append(cpu, c.cpu), append(wall, c.wall)
		}
		return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |\n", name,
			unit(durPct(cpu, 0.5)), unit(durPct(cpu, 0.99)), ms(durPct(cpu, 1)),
			unit(durPct(wall, 0.5)), unit(durPct(wall, 0.99)), ms(durPct(wall, 1)))
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%d schemas, %d passes in shuffled orders; %d compiles (cache misses), %d of them compiled; %d masks timed.\n\n", n, passes, len(compile), compiled, len(masks))
	fmt.Fprintf(&s, "| | CPU p50 | CPU p99 | CPU max | wall p50 | wall p99 | wall max |\n|---|---|---|---|---|---|---|\n")
	s.WriteString(row("compile", compile, ms))
	s.WriteString(row(fmt.Sprintf("compile + prepare (%s budget) + first mask", benchPrepareBudget), first, ms))
	s.WriteString(row("mask per token", masks, us))
	s.WriteString("\n")
	slices.SortFunc(runs, func(a, b schemaRun) int { return cmp.Compare(b.firstMask.cpu, a.firstMask.cpu) })
	var slow []string
	for _, r := range runs[:min(8, len(runs))] {
		slow = append(slow, fmt.Sprintf("%s %s (compile %s)", r.name, ms(r.firstMask.cpu), ms(r.compile.cpu)))
	}
	fmt.Fprintf(&s, "Slowest to the first mask, CPU time: %s.\n\n", strings.Join(slow, "; "))
	slices.SortFunc(runs, func(a, b schemaRun) int { return cmp.Compare(b.maxMask, a.maxMask) })
	slow = slow[:0]
	for _, r := range runs[:min(8, len(runs))] {
		slow = append(slow, fmt.Sprintf("%s %s (step %d)", r.name, ms(r.maxMask), r.maxMaskPos))
	}
	fmt.Fprintf(&s, "Largest masks, CPU time: %s.\n\n", strings.Join(slow, "; "))
	fmt.Fprintf(&s, "Resident memory above the warmed vocabulary's (%s): at the end %s, peak %s, after a GC and FreeOSMemory %s.\n", mb(base), mb(now-base), mb(peak-base), mb(after-base))
	return s.String()
}
