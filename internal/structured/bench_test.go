package structured

import (
	"bufio"
	"context"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/structured/vocabtest"
)

// benchVocab is Llama 3's vocabulary when scripts/fetch-vocab.sh has
// written it, else a synthetic one of the same size: every byte, then
// words of lowercase letters, half of them after a space, lengths drawn
// like a BPE vocabulary's (mostly 3 to 8 bytes), and some punctuation runs.
func benchVocab(b *testing.B) ([][]byte, []int32, string) {
	b.Helper()
	const size = 128256
	if f, err := os.Open(filepath.Join("..", "..", ".cache", "llama3-vocab.hex")); err == nil {
		defer f.Close()
		var toks [][]byte
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			t, err := hex.DecodeString(sc.Text())
			if err != nil {
				b.Fatal(err)
			}
			toks = append(toks, t)
		}
		if len(toks) == size {
			// <|end_of_text|> and <|eot_id|>
			return toks, []int32{128001, 128009}, "llama3"
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	toks := make([][]byte, 0, size)
	seen := map[string]bool{}
	for c := 0; c < 256; c++ {
		toks = append(toks, []byte{byte(c)})
		seen[string(rune(c))] = true
	}
	punct := []byte(`{}[]":,.;()-_!?'/\ `)
	for len(toks) < size-1 {
		var t []byte
		if rng.IntN(20) == 0 {
			for n := 2 + rng.IntN(3); n > 0; n-- {
				t = append(t, punct[rng.IntN(len(punct))])
			}
		} else {
			if rng.IntN(2) == 0 {
				t = append(t, ' ')
			}
			n := 1 + rng.IntN(4) + rng.IntN(5)
			for ; n > 0; n-- {
				t = append(t, byte('a'+rng.IntN(26)))
			}
		}
		if !seen[string(t)] {
			seen[string(t)] = true
			toks = append(toks, t)
		}
	}
	toks = append(toks, nil) // the end-of-sequence token has no bytes
	return toks, []int32{size - 1}, "synthetic"
}

func BenchmarkNewVocab(b *testing.B) {
	toks, eos, name := benchVocab(b)
	b.Logf("vocabulary: %s, %d tokens", name, len(toks))
	for b.Loop() {
		grammar.NewVocab(toks, eos)
	}
}

func BenchmarkVocabWarm(b *testing.B) {
	toks, eos, _ := benchVocab(b)
	for b.Loop() {
		grammar.NewVocab(toks, eos).Warm(CompileJSONObject())
	}
}

// BenchmarkMask walks every corpus schema with random tokens and times each
// mask, on a vocabulary warmed as a model's is at load. Three figures: the
// first walks (cold: the grammars' own node masks are worked out as the
// walks reach them), the same walks again (warm: a cached grammar answering
// as before), and new walks over the same grammars (fresh: some nodes
// reached for the first time).
func BenchmarkMask(b *testing.B) {
	toks, eos, name := benchVocab(b)
	v := grammar.NewVocab(toks, eos)
	v.Warm(CompileJSONObject())
	corpus := loadCorpus(b)
	grammars := make([]*grammar.Grammar, len(corpus))
	for i, c := range corpus {
		g, err := Compile(c.Schema)
		if err != nil {
			b.Fatal(err)
		}
		grammars[i] = g
	}
	isEOS := map[int32]bool{}
	for _, e := range eos {
		isEOS[e] = true
	}
	mask := make([]uint64, (v.Size()+63)/64)
	pass := func(times *[]time.Duration, seed uint64) {
		for i, g := range grammars {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			m := g.NewMatcher()
			for step := 0; step < 64; step++ {
				t0 := time.Now()
				m.Mask(v, mask)
				*times = append(*times, time.Since(t0))
				ids := vocabtest.Allowed(mask)
				id := ids[rng.IntN(len(ids))]
				if isEOS[id] {
					break
				}
				if !m.Advance(toks[id]) {
					b.Fatalf("mask and matcher disagree on %q", toks[id])
				}
			}
		}
	}
	var cold, warm, fresh []time.Duration
	pass(&cold, 0)
	b.ResetTimer()
	for b.Loop() {
		pass(&warm, 0)
	}
	b.StopTimer()
	pass(&fresh, 1)
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(warm, 0.5), "median-µs/mask")
	b.ReportMetric(q(warm, 0.99), "p99-µs/mask")
	b.ReportMetric(q(cold, 0.5), "cold-median-µs/mask")
	b.ReportMetric(q(cold, 0.99), "cold-p99-µs/mask")
	b.ReportMetric(q(fresh, 0.5), "fresh-median-µs/mask")
	b.ReportMetric(q(fresh, 0.99), "fresh-p99-µs/mask")
	b.Logf("vocabulary: %s; masks: %d cold (max %v), %d warm (max %v), %d fresh (max %v)",
		name, len(cold), slices.Max(cold), len(warm), slices.Max(warm), len(fresh), slices.Max(fresh))
}

// typicalSchema is a tool's parameters as applications write them.
const typicalSchema = `{"type":"object","properties":{"title":{"type":"string"},"start":{"type":"string"},"end":{"type":"string"},"attendees":{"type":"array","items":{"type":"object","properties":{"email":{"type":"string"},"optional":{"type":"boolean"}},"required":["email","optional"],"additionalProperties":false}},"reminder_minutes":{"type":["integer","null"]},"priority":{"enum":["low","normal","high"]}},"required":["title","start","end","attendees","reminder_minutes","priority"],"additionalProperties":false}`

func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := Compile([]byte(typicalSchema)); err != nil {
			b.Fatal(err)
		}
	}
}

// zodEventSchema is what zod writes for an id and a time: each string a
// format and a pattern, compiled as the product of the two.
const zodEventSchema = `{"type":"object","properties":{"id":{"type":"string","format":"uuid","pattern":"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$"},"at":{"type":"string","format":"date-time","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$"}},"required":["id","at"],"additionalProperties":false}`

func BenchmarkCompileProduct(b *testing.B) {
	for b.Loop() {
		if _, err := Compile([]byte(zodEventSchema)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileCached(b *testing.B) {
	c := NewCache(16)
	if _, err := c.Compile([]byte(typicalSchema)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c.Compile([]byte(typicalSchema))
	}
}

// BenchmarkPrepare works out every node mask of the typical schema on a
// warmed vocabulary.
func BenchmarkPrepare(b *testing.B) {
	toks, eos, _ := benchVocab(b)
	v := grammar.NewVocab(toks, eos)
	v.Warm(CompileJSONObject())
	for b.Loop() {
		g, err := Compile([]byte(typicalSchema))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.Prepare(context.Background(), v, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpeningMask times the mask of a tool-calling answer's first
// token (Opening.Mask), the step at which it is widest: a lazy answer
// allows nearly the whole vocabulary, less the openings the grammar
// refuses; a required one, after a reasoning tag's start, the call's
// openings. The vocabulary is benchVocab's with each format's special
// tokens added.
func BenchmarkOpeningMask(b *testing.B) {
	toks, eos, name := benchVocab(b)
	toks = append(slices.Clone(toks), []byte("<tool_call>"), []byte("</tool_call>"), []byte("[TOOL_CALLS]"), []byte("<think>"), []byte("</think>"))
	v := grammar.NewVocab(toks, eos)
	v.Warm(CompileJSONObject())
	job := genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: "user", Content: "x"}}, Tools: []genq.Tool{{Type: "function",
		Function: genq.ToolFunction{Name: "create_event", Parameters: []byte(typicalSchema)}}}}}
	required := job
	required.ToolChoice = &genq.ToolChoice{Mode: genq.ToolChoiceRequired}
	mask := make([]uint64, (v.Size()+63)/64)
	for _, tc := range []struct {
		name string
		job  genq.Job
		d    toolcall.Dialect
	}{
		{"llama3-json lazy", job, toolcall.Dialect{Format: toolcall.Llama3JSON}},
		{"hermes lazy", job, toolcall.Dialect{Format: toolcall.Hermes}},
		{"hermes+think lazy", job, toolcall.Dialect{Format: toolcall.Hermes, Reasoning: true}},
		{"hermes+think required", required, toolcall.Dialect{Format: toolcall.Hermes, Reasoning: true}},
		{"mistral lazy", job, toolcall.Dialect{Format: toolcall.Mistral}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := NewCache(1).ForJobIn(tc.job, tc.d)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Grammar.Prepare(context.Background(), v, 0); err != nil {
				b.Fatal(err)
			}
			o, start := c.NewOpening(), c.Grammar.NewMatcher()
			for b.Loop() {
				o.Mask(start, v, mask)
			}
			b.ReportMetric(float64(len(vocabtest.Allowed(mask))), "allowed")
		})
	}
	b.Logf("vocabulary: %s, %d tokens", name, len(toks))
}
