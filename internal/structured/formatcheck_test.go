package structured

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
)

// TestCheckedFormatMasks: where a format is tested as a whole value
// (hostname, idn-hostname, regex), each mask along answers is what the
// matcher takes, token by token: before a string, inside it, where a
// token would end it, and after it.
func TestCheckedFormatMasks(t *testing.T) {
	g, err := Compile([]byte(`{"type":"object","properties":{` +
		`"h":{"type":"string","format":"hostname"},` +
		`"i":{"type":"string","format":"idn-hostname"},` +
		`"r":{"type":"array","items":{"type":"string","format":"regex"}}},` +
		`"required":["h","i","r"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	prefixes := []string{`{"h":`, `{"h":"`, `{"h":"xn--X`, `{"h":"xn--9n2bp8q.xn--9t4b11yi5`, `{"h":"www.example`,
		`{"h":"a.com","i":"`, `{"h":"a.com","i":"l·`, `{"h":"a.com","i":"실례.테스트`,
		`{"h":"a.com","i":"b","r":[`, `{"h":"a.com","i":"b","r":["(a`, `{"h":"a.com","i":"b","r":["(?<n>x)\\k<n`,
		`{"h":"a.com","i":"b","r":["[z-`, `{"h":"a.com","i":"b","r":["x",`, `{"h":"a.com","i":"b","r":["(?`, `{"h":"a.com","i":"b","r":["a\\`,
		`{"h":"a.com","i":"b","r":["a*`}
	small, smallEOS := vocabtest.Small()
	for _, extra := range []string{`xn--X"`, `com"`, `a"`, `"*"`, `"a"`, `"(a)"`, `")"`, `a)"`, `"]`, `a"]`, `>"`, `>"]`, `"(", "`} {
		small = append(small, []byte(extra))
	}
	check := func(t *testing.T, toks [][]byte, eos int32) {
		v := grammar.NewVocab(toks, []int32{eos})
		mask := make([]uint64, (v.Size()+63)/64)
		for _, p := range prefixes {
			m := g.NewMatcher()
			if !m.Advance([]byte(p)) {
				t.Fatalf("%q refused", p)
			}
			m.Mask(v, mask)
			bruteForce(t, m, mask, toks, eos, "after "+p)
		}
	}
	t.Run("small", func(t *testing.T) { check(t, small, smallEOS) })
	t.Run("llama3", func(t *testing.T) { check(t, vocabtest.Llama3(t), vocabtest.Llama3EOS) })
}

// TestRegexFormatAgreesWithNode holds the format regex to a JavaScript
// engine: every pattern genq takes, of thousands made at random from
// regular expressions' pieces, must compile in node both with the u flag
// and without it; genq may refuse few that compile with it; and the
// automaton beside the test (regexSuperset) takes every one that does.
func TestRegexFormatAgreesWithNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("GENQ_REQUIRE_AJV") == "1" {
			t.Fatal("node is needed:", err)
		}
		t.Skip("no node")
	}
	pieces := []string{"a", "b", "0", "1", "2", "9", ",", "-", "(", ")", "[", "]", "{", "}", "*", "+", "?", "|", "^", "$",
		".", "\\", "\\d", "\\k<n>", "(?<n>", "(?:", "(?=", "(?<=", "(?!", "\\1", "\\2", "\\0", "\\p{L}", "\\p{Script=Greek}",
		"\\p{Foo}", "\\u{1F600}", "\\u0041", "\\x4", "\\cA", "\\c1", "[a-z]", "[z-a]", "[\\d-a]", "{2,1}", "{1,2}", "\\-", "\\/", "\\b", "é", "<", ">"}
	rng := rand.New(rand.NewPCG(52, 1))
	patterns := make([]string, 20000)
	for i := range patterns {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		patterns[i] = b.String()
	}
	in, _ := json.Marshal(patterns)
	const script = `const ps = JSON.parse(require("fs").readFileSync(0, "utf8"));
const ok = (p, f) => { try { new RegExp(p, f); return true } catch { return false } };
process.stdout.write(JSON.stringify(ps.map((p) => [ok(p, "u"), ok(p, "")])));`
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var verdicts [][2]bool
	if err := json.Unmarshal(out, &verdicts); err != nil {
		t.Fatal(err)
	}
	superset := regexp.MustCompile("^(" + regexSuperset() + ")$")
	taken, unicodeValid, refusedValid := 0, 0, 0
	for i, p := range patterns {
		if verdicts[i][0] && !superset.MatchString(p) {
			t.Errorf("node takes %q with the u flag, which the format's automaton refuses", p)
		}
		ours := validECMARegex(p)
		u, plain := verdicts[i][0], verdicts[i][1]
		if ours && !(u && plain) {
			t.Errorf("genq takes %q; node with the u flag: %v, without: %v", p, u, plain)
		}
		if ours {
			taken++
		}
		if u {
			unicodeValid++
			if !ours {
				refusedValid++
			}
		}
	}
	t.Logf("%d patterns: node takes %d with the u flag, genq %d; genq refuses %d that node takes", len(patterns), unicodeValid, taken, refusedValid)
	if refusedValid*100 > unicodeValid {
		t.Errorf("genq refuses %d of the %d patterns node takes with the u flag, over 1%%", refusedValid, unicodeValid)
	}
}

// TestCheckedFormatsBeside: a tested format beside other keywords and
// branches, and refused by name where genq would negate it.
func TestCheckedFormatsBeside(t *testing.T) {
	for _, tc := range []struct {
		schema      string
		ok, refused []string
		compileErr  string
	}{
		{schema: `{"anyOf":[{"type":"string","format":"hostname"},{"type":"string","pattern":"^x"}]}`,
			ok: []string{`"x_y"`, `"ab.c"`}, refused: []string{`"-a"`}},
		{schema: `{"oneOf":[{"type":"string","format":"hostname"},{"type":"integer"}]}`,
			ok: []string{`"abc"`, `1`}, refused: []string{`"-"`}},
		{schema: `{"type":"string","format":"hostname","enum":["a.com","-x","xn--X"]}`,
			ok: []string{`"a.com"`}, refused: []string{`"-x"`, `"xn--X"`}},
		{schema: `{"type":"string","format":"hostname","minLength":5,"pattern":"^a"}`,
			ok: []string{`"abcde"`}, refused: []string{`"ab"`, `"bcdef"`, `"a-b--"`}},
		{schema: `{"type":"array","items":{"type":"string","format":"regex"}}`,
			ok: []string{`["a(b)","\\d+"]`, `[]`}, refused: []string{`["a(b)","(?<x>)\\k<y>"]`}},
		{schema: `{"oneOf":[{"type":"string","format":"hostname"},{"type":"string","maxLength":3}]}`, compileErr: `format "hostname" is not supported`},
		{schema: `{"not":{"format":"regex"}}`, compileErr: `format "regex" is not supported`},
		{schema: `{"if":{"format":"idn-hostname"},"then":{"maxLength":3}}`, compileErr: `format "idn-hostname" is not supported`},
		{schema: `{"type":"object","propertyNames":{"format":"hostname"}}`, compileErr: `format "hostname" is not supported`},
	} {
		if g, ok := compileOrRefuse(t, tc.schema, tc.schema, tc.compileErr); ok {
			checkTexts(t, g, tc.ok, tc.refused)
		}
	}
}

// compileOrRefuse compiles schema, and, where compileErr is set, wants it
// refused with an error that holds compileErr; it returns the grammar
// where the schema compiled as wanted.
func compileOrRefuse(t *testing.T, name, schema, compileErr string) (*grammar.Grammar, bool) {
	t.Helper()
	g, err := Compile([]byte(schema))
	if compileErr != "" {
		if err == nil || !strings.Contains(err.Error(), compileErr) {
			t.Errorf("%s: the error is %v, want one with %q", name, err, compileErr)
		}
		return nil, false
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil, false
	}
	return g, true
}

// BenchmarkCheckedFormatMasks times every mask along the suite's valid
// instances of the formats tested as a whole value, each fed a token at a
// time as a model writing it would (the longest allowed token that
// begins the rest), over Llama 3's vocabulary, the grammar's masks
// prepared: a step's cost with the test (docs/benchmarks.md).
func BenchmarkCheckedFormatMasks(b *testing.B) {
	toks := vocabtest.Llama3(b)
	v := grammar.NewVocab(toks, []int32{vocabtest.Llama3EOS})
	mask := make([]uint64, (v.Size()+63)/64)
	var times []time.Duration
	for range b.N {
		for _, format := range []string{"hostname", "idn-hostname", "regex"} {
			g, err := Compile([]byte(`{"type":"string","format":"` + format + `"}`))
			if err != nil {
				b.Fatal(err)
			}
			// Every mask worked out first, as the worker's background
			// prepare does: what is timed is a step's own cost.
			if _, err := g.Prepare(context.Background(), v, 0); err != nil {
				b.Fatal(err)
			}
			file := filepath.Join(suiteDir(), "optional", "format", format+".json")
			for _, grp := range readSuiteFile(b, file) {
				for _, tc := range grp.Tests {
					var s string
					if !tc.Valid || len(tc.Data) == 0 || tc.Data[0] != '"' || json.Unmarshal(tc.Data, &s) != nil {
						continue
					}
					text, _ := json.Marshal(s)
					m := g.NewMatcher()
					for len(text) > 0 {
						start := time.Now()
						m.Mask(v, mask)
						times = append(times, time.Since(start))
						best := -1
						for id, tok := range toks {
							if len(tok) > 0 && mask[id>>6]&(1<<(id&63)) != 0 && bytes.HasPrefix(text, tok) && (best < 0 || len(tok) > len(toks[best])) {
								best = id
							}
						}
						if best < 0 || !m.Advance(toks[best]) {
							b.Fatalf("%s: %s refused at %q", format, s, text)
						}
						text = text[len(toks[best]):]
					}
				}
			}
		}
	}
	slices.Sort(times)
	at := func(q float64) time.Duration { return times[int(q*float64(len(times)-1))] }
	b.Logf("%d masks: p50 %v, p99 %v, max %v", len(times), at(0.5), at(0.99), times[len(times)-1])
	b.ReportMetric(float64(at(0.99).Microseconds()), "p99-µs")
}

// TestIDNHostnameSupersetHoldsEveryValidCodePoint: the automaton beside
// idn-hostname's test takes every code point IDNA2008 lets stand in a
// U-label (PVALID, CONTEXTJ, CONTEXTO by Go's tables), after a letter,
// and every one but a combining mark first: it may only be wider than the
// test, never narrower.
func TestIDNHostnameSupersetHoldsEveryValidCodePoint(t *testing.T) {
	re := regexp.MustCompile("^(" + idnHostnameSuperset() + ")$")
	n := 0
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF || idnaProperty(r) == disallowed {
			continue
		}
		n++
		if !re.MatchString("a" + string(r)) {
			t.Errorf("%U after a letter: refused", r)
		}
		if !unicode.Is(unicode.M, r) && !re.MatchString(string(r)+"a") {
			t.Errorf("%U first: refused", r)
		}
	}
	if n < 100_000 {
		t.Fatalf("only %d code points are valid in a U-label", n)
	}
	for _, s := range []string{"Bücher", "a™", "̀a"} {
		if re.MatchString(s) {
			t.Errorf("%q: taken, want refused as it is written", s)
		}
	}
}

// TestCheckedFormatDeadEnd: where a string's bound leaves no room to
// mend what the test will refuse (a backreference to a group that the
// two characters allowed cannot open), the mask allows nothing and the
// matcher says it stands in a checked string: the worker names the
// format in its error rather than a bare empty mask.
func TestCheckedFormatDeadEnd(t *testing.T) {
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	g, err := Compile([]byte(`{"type":"string","format":"regex","maxLength":2}`))
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	if !m.Advance([]byte(`"\\5`)) {
		t.Fatal(`"\\5 refused`)
	}
	mask := make([]uint64, (v.Size()+63)/64)
	m.Mask(v, mask)
	if ids := vocabtest.Allowed(mask); len(ids) != 0 || !m.InCheck() {
		t.Errorf("allowed %d tokens (%q…), in a checked string: %v; want none, true", len(ids), toks[ids[0]], m.InCheck())
	}
}
