package structured

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/structured/ajvtest"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
)

// realWorldSchema is one schema of the corpus, named by where it came from.
type realWorldSchema struct {
	source, name string
	schema       []byte
}

// realWorldSchemas reads the corpus scripts/fetch-schema-corpus.sh unpacks
// into dir: GitHub's REST API components (OpenAPI's #/components/schemas
// references become #/$defs, every component beside each as its $defs),
// GitHub's webhook event definitions (each with the file's definitions
// beside it) and AsyncAPI's specification schemas, a file each.
func realWorldSchemas(t testing.TB, dir string) []realWorldSchema {
	t.Helper()
	var out []realWorldSchema
	api, err := os.ReadFile(filepath.Join(dir, "octokit-openapi", "generated", "api.github.com.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(bytes.ReplaceAll(api, []byte(`"#/components/schemas/`), []byte(`"#/$defs/`)), &doc); err != nil {
		t.Fatal(err)
	}
	out = append(out, withDefs("github rest api", doc.Components.Schemas, "$defs")...)

	hooks, err := os.ReadFile(filepath.Join(dir, "octokit-webhooks-schemas", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(hooks, &root); err != nil {
		t.Fatal(err)
	}
	out = append(out, withDefs("github webhooks", root.Definitions, "definitions")...)

	files, _ := filepath.Glob(filepath.Join(dir, "asyncapi-specs", "definitions", "*", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Join(dir, "asyncapi-specs"), f)
		out = append(out, realWorldSchema{"asyncapi", rel, data})
	}
	return out
}

// withDefs makes each of schemas a document of its own, with the
// definitions it refers to, transitively, beside it under key.
func withDefs(source string, schemas map[string]json.RawMessage, key string) []realWorldSchema {
	ref := regexp.MustCompile(`"#/` + regexp.QuoteMeta(key) + `/([^"/]+)"`)
	var out []realWorldSchema
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		s := bytes.TrimSpace(schemas[name])
		if len(s) < 2 || s[0] != '{' {
			continue
		}
		needed := map[string]json.RawMessage{}
		queue := [][]byte{s}
		for len(queue) > 0 {
			for _, m := range ref.FindAllSubmatch(queue[0], -1) {
				n := string(m[1])
				if _, ok := needed[n]; ok || schemas[n] == nil {
					continue
				}
				needed[n] = schemas[n]
				queue = append(queue, schemas[n])
			}
			queue = queue[1:]
		}
		defs, _ := json.Marshal(needed)
		doc := append([]byte(`{"`+key+`":`), defs...)
		if len(s) > 2 {
			doc = append(append(doc, ','), s[1:]...)
		} else {
			doc = append(doc, '}')
		}
		out = append(out, realWorldSchema{source, name, doc})
	}
	return out
}

// corpusVocab is Llama 3's vocabulary, warmed as a model's is at load,
// or nil without it.
func corpusVocab(t *testing.T) *grammar.Vocab {
	if _, err := os.Stat(filepath.Join("..", "..", ".cache", "llama3-vocab.hex")); err != nil {
		return nil
	}
	v, _, _ := llama3(t)
	v.Warm(CompileJSONObject())
	return v
}

// TestRealWorldSchemas compiles a corpus of real-world schemas
// (GENQ_SCHEMA_CORPUS, a folder scripts/fetch-schema-corpus.sh fills) and
// reports the share compiled per source, the compile time's percentiles
// and the most frequent reasons for refusal; with GENQ_CORPUS_REPORT set,
// as Markdown there. It fails only where a schema's compile panics.
func TestRealWorldSchemas(t *testing.T) {
	dir := os.Getenv("GENQ_SCHEMA_CORPUS")
	if dir == "" {
		t.Skip("GENQ_SCHEMA_CORPUS is unset (scripts/fetch-schema-corpus.sh DIR)")
	}
	schemas := realWorldSchemas(t, dir)
	type tally struct{ n, compiled int }
	bySource := map[string]*tally{}
	reasons := map[string]int{}
	var times, prepared []time.Duration
	// With Llama 3's vocabulary at hand, each compiled grammar is also
	// prepared as the worker does before the first token: compile and
	// masks within the worker's default budget (TEXT_SCHEMA_PREPARE_BUDGET),
	// one vocabulary for all as one model serves them.
	const budget = 25 * time.Millisecond
	vocab := corpusVocab(t)
	worst, worstName, whole := time.Duration(0), "", 0
	for _, s := range schemas {
		tl := bySource[s.source]
		if tl == nil {
			tl = &tally{}
			bySource[s.source] = tl
		}
		tl.n++
		start := time.Now()
		g, err := Compile(s.schema)
		times = append(times, time.Since(start))
		if err != nil {
			reasons[refusedKeyword(err)]++
			continue
		}
		tl.compiled++
		if vocab != nil {
			done := false
			if left := budget - time.Since(start); left > 0 { // else the worker leaves it all to the background
				if done, err = g.Prepare(context.Background(), vocab, left); err != nil {
					t.Fatal(err)
				}
			}
			if done {
				whole++
			}
			d := time.Since(start)
			prepared = append(prepared, d)
			if d > worst {
				worst, worstName = d, s.source+"/"+s.name
			}
		}
	}
	slices.Sort(times)
	pct := func(p float64) time.Duration { return times[min(len(times)-1, int(p*float64(len(times))))] }
	var s strings.Builder
	fmt.Fprintf(&s, "| source | schemas | compiled | share |\n|---|---|---|---|\n")
	total := tally{}
	for _, src := range slices.Sorted(maps.Keys(bySource)) {
		tl := bySource[src]
		total.n += tl.n
		total.compiled += tl.compiled
		fmt.Fprintf(&s, "| %s | %d | %d | %.0f%% |\n", src, tl.n, tl.compiled, 100*float64(tl.compiled)/float64(tl.n))
	}
	fmt.Fprintf(&s, "| **all** | %d | %d | **%.0f%%** |\n\n", total.n, total.compiled, 100*float64(total.compiled)/float64(total.n))
	fmt.Fprintf(&s, "Compile time (each schema once, its grammar built; masks are worked out later, per vocabulary): p50 %s, p99 %s, largest %s.\n\n",
		pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), times[len(times)-1].Round(time.Microsecond))
	if len(prepared) > 0 {
		slices.Sort(prepared)
		pp := func(p float64) time.Duration { return prepared[min(len(prepared)-1, int(p*float64(len(prepared))))] }
		fmt.Fprintf(&s, "Before the first token, with Llama 3's vocabulary, as the worker does with its default budget of %s (compile, then the masks of the nodes an answer reaches first until the budget is spent; the rest in the background): p50 %s, p99 %s, largest %s (%s); %d of %d compiled schemas (%.0f%%) had every mask worked out within it.\n\n",
			budget, pp(0.5).Round(time.Microsecond), pp(0.99).Round(time.Microsecond), worst.Round(time.Microsecond), worstName, whole, len(prepared), 100*float64(whole)/float64(len(prepared)))
	}
	type reason struct {
		why string
		n   int
	}
	var rs []reason
	for k, n := range reasons {
		rs = append(rs, reason{k, n})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].n > rs[j].n || rs[i].n == rs[j].n && rs[i].why < rs[j].why })
	fmt.Fprintf(&s, "Refused for (the keyword each refusal names, most frequent first): ")
	var parts []string
	for _, r := range rs[:min(len(rs), 12)] {
		parts = append(parts, fmt.Sprintf("`%s` %d", r.why, r.n))
	}
	s.WriteString(strings.Join(parts, ", ") + ".\n")
	t.Log("\n" + s.String())
	if path := os.Getenv("GENQ_CORPUS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRealWorldWrongAccepts checks, for the corpus TestRealWorldSchemas
// reads, that genq accepts no answer its schema forbids: for every schema
// genq compiles, random walks (a model picking uniformly among the tokens
// the mask allows, over a small vocabulary) write answers, and ajv, whose
// draft and format assertion follow the schema's $schema, validates each.
// An answer ajv refuses is a wrong accept and fails the test; a schema ajv
// cannot compile (a draft it lacks) is counted and skipped.
func TestRealWorldWrongAccepts(t *testing.T) {
	dir := os.Getenv("GENQ_SCHEMA_CORPUS")
	if dir == "" {
		t.Skip("GENQ_SCHEMA_CORPUS is unset (scripts/fetch-schema-corpus.sh DIR)")
	}
	schemas := realWorldSchemas(t, dir)
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	const walks, maxSteps = 3, 3000
	var lines []ajvtest.Line
	var names []string
	compiled, capped := 0, 0
	for i, s := range schemas {
		g, err := Compile(s.schema)
		if err != nil {
			continue
		}
		compiled++
		line := ajvtest.Line{Schema: s.schema}
		for w := 0; w < walks; w++ {
			out, ok := walk(t, g, v, toks, eos, rand.New(rand.NewPCG(uint64(i), uint64(w))), maxSteps, nil)
			if !ok {
				capped++
				continue
			}
			line.Answers = append(line.Answers, string(out))
		}
		if len(line.Answers) > 0 {
			lines = append(lines, line)
			names = append(names, s.source+"/"+s.name)
		}
	}
	errs, ran := ajvtest.Check(t, lines)
	if !ran {
		t.Skip("ajv cannot run: npm ci in test/structured")
	}
	answers, wrong, skipped := 0, 0, 0
	for i, e := range errs {
		if len(e) > 0 && strings.HasPrefix(e[0], "ajv cannot compile") {
			skipped++
			continue
		}
		for j, msg := range e {
			answers++
			if msg != "" {
				wrong++
				t.Errorf("%s: ajv refuses %.300q: %s", names[i], lines[i].Answers[j], msg)
			}
		}
	}
	t.Logf("%d schemas, %d compiled; %d answers checked by ajv (%d schemas ajv cannot compile, %d walks hit the step cap): %d wrong accepts",
		len(schemas), compiled, answers, skipped, capped, wrong)
}
