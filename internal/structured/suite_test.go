package structured

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/genq/genq/internal/structured/ajvtest"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
)

// suiteDir is the official JSON Schema Test Suite's draft 2020-12 tests:
// JSONSCHEMA_SUITE, or the shared folder beside the repository.
func suiteDir() string {
	if d := os.Getenv("JSONSCHEMA_SUITE"); d != "" {
		return filepath.Join(d, "tests", "draft2020-12")
	}
	return filepath.Join("..", "..", "..", "shared", "jsonschema-test-suite", "tests", "draft2020-12")
}

// readSuiteFile reads one of the suite's files: its groups of a schema
// and its cases.
func readSuiteFile(t testing.TB, file string) []suiteGroup {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var groups []suiteGroup
	if err := json.Unmarshal(data, &groups); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return groups
}

// llama3 is Llama 3's vocabulary from .cache/llama3-vocab.hex (make test
// fetches it) and its end-of-turn token.
func llama3(t testing.TB) (*grammar.Vocab, [][]byte, int32) {
	t.Helper()
	toks := vocabtest.Llama3(t)
	return grammar.NewVocab(toks, []int32{vocabtest.Llama3EOS}), toks, vocabtest.Llama3EOS
}

// checkFeeds holds g to allowing every text of ok and none of bad, each
// fed through a matcher of its own.
func checkFeeds(t *testing.T, g *grammar.Grammar, v *grammar.Vocab, toks [][]byte, eos int32, ok, bad []string) {
	t.Helper()
	for _, s := range ok {
		if !feed(g.NewMatcher(), v, toks, eos, []byte(s)) {
			t.Errorf("refused %d bytes that the schema allows: %.60s…", len(s), s)
		}
	}
	for _, s := range bad {
		if feed(g.NewMatcher(), v, toks, eos, []byte(s)) {
			t.Errorf("allowed %d bytes that the schema refuses: %.60s…", len(s), s)
		}
	}
}

// feed writes text through m a token at a time, as a model constrained by
// the mask would: at each step the longest token the mask allows that
// begins the rest (every byte is a token of its own, so a text the grammar
// allows always goes through), then end-of-sequence. It reports whether the
// whole text and the end were allowed.
func feed(m *grammar.Matcher, v *grammar.Vocab, toks [][]byte, eos int32, text []byte) bool {
	mask := make([]uint64, (v.Size()+63)/64)
	allowed := func(id int) bool { return mask[id>>6]&(1<<(id&63)) != 0 }
	for len(text) > 0 {
		m.Mask(v, mask)
		best := -1
		for id, tok := range toks {
			if len(tok) > 0 && allowed(id) && bytes.HasPrefix(text, tok) && (best < 0 || len(tok) > len(toks[best])) {
				best = id
			}
		}
		if best < 0 || !m.Advance(toks[best]) {
			return false
		}
		text = text[len(toks[best]):]
	}
	m.Mask(v, mask)
	return allowed(int(eos))
}

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// suiteCount is one keyword file's figures.
type suiteCount struct {
	file                 string
	groups, compiled     int
	cases, compiledCases int
	passed               int
	refusedBy            map[string]int // the keyword a refused schema was refused for
}

// TestJSONSchemaSuite runs the official JSON Schema Test Suite (draft
// 2020-12, outside optional/) through the compiler and the matcher: for
// every schema genq compiles, each valid instance, compact, goes through
// the mask and the matcher with Llama 3's vocabulary to its end, and each
// invalid one is refused somewhere. A schema genq refuses counts as
// refused, with the keyword its error names. With GENQ_SUITE_REPORT set,
// the figures are written there as Markdown.
func TestJSONSchemaSuite(t *testing.T) {
	runSuite(t, "*.json", Options{}, "GENQ_SUITE_REPORT")
}

// TestJSONSchemaSuiteFormats runs the suite's optional/format files as
// TestJSONSchemaSuite does, with formats asserting (their schemas'
// 2020-12 meta-schema would make them annotations): every format genq
// compiles must take each valid string and refuse each invalid one.
func TestJSONSchemaSuiteFormats(t *testing.T) {
	runSuite(t, filepath.Join("optional", "format", "*.json"), Options{AssertFormats: true}, "GENQ_SUITE_FORMAT_REPORT")
}

// runSuite runs the suite's files that glob names, each schema compiled
// with opts; reportEnv names the variable of the report's path.
func runSuite(t *testing.T, glob string, opts Options, reportEnv string) {
	files, _ := filepath.Glob(filepath.Join(suiteDir(), glob))
	if len(files) == 0 {
		t.Skipf("no JSON Schema Test Suite at %s (JSONSCHEMA_SUITE)", suiteDir())
	}
	v, toks, eos := llama3(t)
	var counts []suiteCount
	for _, file := range files {
		groups := readSuiteFile(t, file)
		c := suiteCount{file: strings.TrimSuffix(filepath.Base(file), ".json"), refusedBy: map[string]int{}}
		for _, grp := range groups {
			c.groups++
			c.cases += len(grp.Tests)
			g, err := CompileWith(grp.Schema, opts)
			if err != nil {
				c.refusedBy[refusedKeyword(err)]++
				continue
			}
			c.compiled++
			c.compiledCases += len(grp.Tests)
			for _, tc := range grp.Tests {
				var text bytes.Buffer
				if err := json.Compact(&text, tc.Data); err != nil {
					t.Fatal(err)
				}
				inst := utf8Escapes(text.Bytes())
				name := c.file + " / " + grp.Description + " / " + tc.Description
				if got := feed(g.NewMatcher(), v, toks, eos, inst); got == tc.Valid {
					c.passed++
				} else {
					t.Errorf("%s: %s was %s", name, inst, map[bool]string{true: "accepted", false: "refused"}[got])
				}
			}
		}
		counts = append(counts, c)
	}
	report := suiteReport(counts)
	t.Log("\n" + report)
	if path := os.Getenv(reportEnv); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// utf8Escapes writes the \u escapes of characters beyond ASCII in a JSON
// text's strings as the characters' UTF-8, as a model writes them and
// genq's grammars take them (a character is one way in a grammar, not
// two); U+2028 and U+2029 keep their escapes, as Go writes them.
func utf8Escapes(text []byte) []byte {
	var out []byte
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' {
			out = append(out, text[i])
			continue
		}
		if r, n := escapedRune(text[i:]); r >= 0x80 && r != 0x2028 && r != 0x2029 {
			out = utf8.AppendRune(out, r)
			i += n - 1
			continue
		}
		out = append(out, text[i], text[i+1]) // an escape kept whole
		i++
	}
	return out
}

// escapedRune reads a \u escape (a surrogate pair's two) at the start of
// b: the character and the bytes read, or -1.
func escapedRune(b []byte) (rune, int) {
	hex4 := func(b []byte) rune {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(string(b[2:6]), 16, 32)
		if err != nil {
			return -1
		}
		return rune(n)
	}
	r := hex4(b)
	if utf16.IsSurrogate(r) {
		r2 := hex4(b[6:])
		if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
			return d, 12
		}
		return -1, 0
	}
	return r, 6
}

// refusedKeyword is the keyword a compile error names, the first quoted
// word in it.
func refusedKeyword(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "can never be satisfied"):
		return "unsatisfiable"
	case strings.Contains(msg, "oneOf whose branches"):
		return "oneOf with branches that may overlap"
	case strings.Contains(msg, "the schema is") && strings.Contains(msg, "bytes; the limit is"):
		return "over 256 KiB"
	case strings.Contains(msg, "too large"):
		return "over the state limit"
	case strings.Contains(msg, "refers to another document"):
		return "$ref to another document"
	case strings.Contains(msg, "the 2020-12 meta-schema"):
		return "$ref to the meta-schema"
	case strings.Contains(msg, "depends on the dynamic scope"):
		return "$dynamicRef in a rewritten scope"
	case strings.Contains(msg, "genq enforces multipleOf p/10^k"):
		return "multipleOf p/10^k with p over 1000"
	}
	if i := strings.IndexByte(msg, '"'); i >= 0 {
		if j := strings.IndexByte(msg[i+1:], '"'); j >= 0 {
			return msg[i+1 : i+1+j]
		}
	}
	return msg
}

func suiteReport(counts []suiteCount) string {
	var s strings.Builder
	fmt.Fprintf(&s, "| keyword file | schemas | compiled | cases | cases of compiled schemas | passed | refused for |\n|---|---|---|---|---|---|---|\n")
	var tot suiteCount
	for _, c := range counts {
		var why []string
		for k, n := range c.refusedBy {
			why = append(why, fmt.Sprintf("`%s` %d", k, n))
		}
		slices.Sort(why)
		fmt.Fprintf(&s, "| %s | %d | %d | %d | %d | %d | %s |\n", c.file, c.groups, c.compiled, c.cases, c.compiledCases, c.passed, strings.Join(why, ", "))
		tot.groups += c.groups
		tot.compiled += c.compiled
		tot.cases += c.cases
		tot.compiledCases += c.compiledCases
		tot.passed += c.passed
	}
	fmt.Fprintf(&s, "| **all** | %d | %d | %d | %d | %d | |\n", tot.groups, tot.compiled, tot.cases, tot.compiledCases, tot.passed)
	return s.String()
}

// TestAjvFollowsTheSuitesFormats checks the validator random walks are
// checked with (ajv, test/structured) against the suite's optional/format
// cases, for each format genq enforces that ajv knows: ajv must take every
// case the suite says is valid, or a walk's valid answer would count as a
// wrong accept. Where ajv takes an invalid one, it checks less than the
// suite, which TestJSONSchemaSuiteFormats covers; those are logged.
func TestAjvFollowsTheSuitesFormats(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(suiteDir(), "optional", "format", "*.json"))
	if len(files) == 0 {
		t.Skipf("no JSON Schema Test Suite at %s (JSONSCHEMA_SUITE)", suiteDir())
	}
	// ajv-formats has no iri or iri-reference: ajv takes any string.
	unknownToAjv := []string{"iri", "iri-reference"}
	var lines []ajvtest.Line
	var want [][]bool
	for _, file := range files {
		format := strings.TrimSuffix(filepath.Base(file), ".json")
		if _, ok := formatPattern(format); !ok || slices.Contains(unknownToAjv, format) {
			continue
		}
		groups := readSuiteFile(t, file)
		for _, g := range groups {
			line := ajvtest.Line{Schema: json.RawMessage(`{"format":` + strconv.Quote(format) + `}`), AssertFormats: true}
			var w []bool
			for _, tc := range g.Tests {
				line.Answers = append(line.Answers, string(tc.Data))
				w = append(w, tc.Valid)
			}
			lines = append(lines, line)
			want = append(want, w)
		}
	}
	errs, ran := ajvtest.Check(t, lines)
	if !ran {
		t.Skip("ajv cannot run: npm ci in test/structured")
	}
	wider := 0
	for i, e := range errs {
		for j, msg := range e {
			switch {
			case want[i][j] && msg != "":
				t.Errorf("%s: ajv refuses %s, which the suite takes: %s", lines[i].Schema, lines[i].Answers[j], msg)
			case !want[i][j] && msg == "":
				wider++
				t.Logf("%s: ajv takes %s, which the suite refuses", lines[i].Schema, lines[i].Answers[j])
			}
		}
	}
	t.Logf("ajv takes %d invalid cases of the suite", wider)
}
