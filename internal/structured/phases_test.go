package structured

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/structured/grammar"
)

// phaseTimes is one compile split into its phases, in CPU time of the
// thread: the schema's parse, reading its draft and identifiers, building
// the rules, Finish's trim and checks, and the first mask without Prepare
// (the walks and DFA states it needs, on a vocabulary whose builtins are
// warm).
type phaseTimes struct {
	name                                   string
	parse, draft, build, finish, firstMask time.Duration
	nodes                                  int
	err                                    error
}

func (p phaseTimes) total() time.Duration {
	return p.parse + p.draft + p.build + p.finish + p.firstMask
}

// compilePhases compiles schema as CompileWith does, timing each phase.
func compilePhases(schema []byte, v *grammar.Vocab) phaseTimes {
	var p phaseTimes
	t := now()
	root, err := parseJSON(schema)
	p.parse = t.since().cpu
	if err != nil {
		p.err = err
		return p
	}
	c := newCompiler()
	c.root = root
	t = now()
	err = c.readDraft(root, false)
	p.draft = t.since().cpu
	if err != nil {
		p.err = err
		return p
	}
	t = now()
	c.rootRule = c.b.NewRule("#")
	f, err := c.compile(root, "#")
	p.build = t.since().cpu
	if err != nil {
		p.err = err
		return p
	}
	t = now()
	c.b.Define(c.rootRule, f)
	c.b.Grammar.Top = c.rootRule
	p.err = c.b.Finish()
	p.finish = t.since().cpu
	p.nodes = len(c.b.Grammar.Nodes)
	if p.err != nil {
		return p
	}
	t = now()
	mask := make([]uint64, (v.Size()+63)/64)
	c.b.Grammar.NewMatcher().Mask(v, mask)
	p.firstMask = t.since().cpu
	return p
}

// BenchmarkSchemaPhases compiles every schema at hand (allBenchSchemas,
// GENQ_SCHEMA_BENCH_MATCH filtering by name) GENQ_SCHEMA_PHASE_RUNS times
// (3 unless set) and lists the GENQ_SCHEMA_PHASE_TOP slowest (20 unless
// set) by the least total of their runs, phase by phase: where the
// compile's tail goes. Run it with -benchtime 1x.
func BenchmarkSchemaPhases(b *testing.B) {
	v, _, _ := llama3(b)
	v.Warm(CompileJSONObject())
	schemas := allBenchSchemas(b)
	if match := os.Getenv("GENQ_SCHEMA_BENCH_MATCH"); match != "" {
		schemas = slices.DeleteFunc(schemas, func(s benchSchema) bool { return !strings.Contains(s.name, match) })
	}
	runs, top := 3, 20
	if n, err := strconv.Atoi(os.Getenv("GENQ_SCHEMA_PHASE_RUNS")); err == nil && n > 0 {
		runs = n
	}
	if n, err := strconv.Atoi(os.Getenv("GENQ_SCHEMA_PHASE_TOP")); err == nil && n > 0 {
		top = n
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		var best []phaseTimes
		for _, s := range schemas {
			var least phaseTimes
			for i := 0; i < runs; i++ {
				p := compilePhases(s.schema, v)
				if i == 0 || p.total() < least.total() {
					least = p
				}
			}
			least.name = s.name
			best = append(best, least)
		}
		slices.SortFunc(best, func(x, y phaseTimes) int { return cmp.Compare(y.total(), x.total()) })
		ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1e3) }
		var s strings.Builder
		fmt.Fprintf(&s, "%d schemas, least of %d runs, CPU ms\n\n| schema | nodes | parse | draft | build | finish | first mask | total | refused |\n|---|---|---|---|---|---|---|---|---|\n", len(best), runs)
		for _, p := range best[:min(top, len(best))] {
			refused := ""
			if p.err != nil {
				refused = p.err.Error()
				if len(refused) > 60 {
					refused = refused[:60]
				}
			}
			fmt.Fprintf(&s, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", p.name, p.nodes, ms(p.parse), ms(p.draft), ms(p.build), ms(p.finish), ms(p.firstMask), ms(p.total()), refused)
		}
		b.Log("\n" + s.String())
		if path := os.Getenv("GENQ_SCHEMA_PHASE_REPORT"); path != "" {
			if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}
