package structured

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/genq/genq/internal/structured/ajvtest"
	"github.com/genq/genq/internal/structured/grammar"
)

// TestLengthRegionBounds holds a format's or pattern's string to its
// length bounds exactly, through the real matcher and Llama 3's masks:
// on each side of each bound, an escape and a multi-byte character
// counted as one character each.
func TestLengthRegionBounds(t *testing.T) {
	v, toks, eos := llama3(t)
	uri := func(n int, c string) string { return `"http://a.b/` + strings.Repeat(c, n-len("http://a.b/")) + `"` }
	pat := func(n int, c string) string { return `"x` + strings.Repeat(c, n-1) + `"` }
	tests := []struct {
		name   string
		schema string
		ok     []string
		bad    []string
	}{
		{"uri at most 32", `{"type":"string","format":"uri","maxLength":32}`,
			[]string{uri(32, "c"), uri(12, "c"), `"http://a.b/` + strings.Repeat("%41", 7) + `"`},
			[]string{uri(33, "c"), `"http://a.b/` + strings.Repeat("%41", 8) + `"`, uri(31, "c")[:len(uri(31, "c"))-1] + `ab"`}},
		{"iri at most 32", `{"type":"string","format":"iri","maxLength":32}`,
			[]string{uri(32, "é"), uri(32, "語"), uri(32, "😀")},
			[]string{uri(33, "é"), uri(33, "語"), uri(33, "😀")}},
		{"uri at most 4096", `{"type":"string","format":"uri","maxLength":4096}`,
			[]string{uri(4096, "c"), uri(20, "c")},
			[]string{uri(4097, "c"), `"not a uri"`}},
		{"iri at most 2100", `{"type":"string","format":"iri","maxLength":2100}`,
			[]string{uri(2100, "é")},
			[]string{uri(2101, "é")}},
		{"uri between 20 and 30", `{"type":"string","format":"uri","minLength":20,"maxLength":30}`,
			[]string{uri(20, "c"), uri(30, "c")},
			[]string{uri(19, "c"), uri(31, "c")}},
		{"iri at least 1500", `{"type":"string","format":"iri","minLength":1500}`,
			[]string{uri(1500, "c"), uri(2000, "é")},
			[]string{uri(1499, "c"), uri(1499, "é")}},
		{"pattern between 3 and 5", `{"type":"string","pattern":"^x[a-z\\n]*$","minLength":3,"maxLength":5}`,
			[]string{pat(3, "a"), pat(5, "a"), pat(5, `\n`), pat(3, `\n`)},
			[]string{pat(2, "a"), pat(6, "a"), pat(6, `\n`), pat(2, `\n`)}},
		{"email at most 254", `{"type":"string","format":"email","maxLength":254}`,
			[]string{`"a@b.co"`, `"` + strings.Repeat("a", 249) + `@b.co"`},
			[]string{`"` + strings.Repeat("a", 250) + `@b.co"`, `"ab.co"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Nodes) > 20_000 {
				t.Errorf("%d nodes: the region should not grow with the bounds", len(g.Nodes))
			}
			checkFeeds(t, g, v, toks, eos, tc.ok, tc.bad)
		})
	}
}

// TestLengthRegionMasks checks the mask against each token's own advance
// near the bounds, where the count decides: a long token just past max,
// the closing quote just below min, and a prefix no way from which fits
// (a uri's "http://" needs a host before the string may end).
func TestLengthRegionMasks(t *testing.T) {
	v, toks, eos := llama3(t)
	mask := make([]uint64, (v.Size()+63)/64)
	tests := []struct {
		schema   string
		prepare  bool // masks worked out ahead, at the region's first count
		prefixes []string
	}{
		{`{"type":"string","format":"uri","minLength":15,"maxLength":40}`, false, []string{"", "h", "http://", "http:",
			"http://a.b/cc", "http://a.b/cccc", "http://a.b/" + strings.Repeat("c", 28), "http://a.b/" + strings.Repeat("%41", 8) + "%", "http://a.b/%4"}},
		{`{"type":"string","pattern":"^x[a-z\\n]*$","minLength":6,"maxLength":12}`, false, []string{"x", "x\\n\\n\\n\\n", "xa\\n\\na", "x" + strings.Repeat("\\n", 10), "x" + strings.Repeat("\\n", 11)}},
		{`{"type":"string","pattern":"^x[a-z\\n]*$","maxLength":3000}`, true, []string{"", "x", "xa\\n\\na", "x" + strings.Repeat("\\n", 2990)}},
	}
	for _, tc := range tests {
		g, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		if tc.prepare {
			if done, err := g.Prepare(context.Background(), v, 0); !done || err != nil {
				t.Fatalf("%s: prepared %v, %v", tc.schema, done, err)
			}
		}
		for _, prefix := range tc.prefixes {
			m := g.NewMatcher()
			if !m.Advance([]byte(`"` + prefix)) {
				t.Fatalf("%s: refused the prefix %q", tc.schema, prefix)
			}
			m.Mask(v, mask)
			bruteForce(t, m, mask, toks, eos, fmt.Sprintf("%s after %q", tc.schema, prefix))
		}
	}
	g, err := Compile([]byte(tests[0].schema))
	if err != nil {
		t.Fatal(err)
	}
	// 39 characters and a "%" that needs two more: no way fits in 40.
	if g.NewMatcher().Advance([]byte(`"http://a.b/` + strings.Repeat("%41", 9) + "%")) {
		t.Error("took a percent-encoding that cannot end within maxLength")
	}
}

// TestLengthRegionGaps holds a date-time, whose ways take 20 or 22
// characters and up but never 21, to bounds around that gap: a window of
// two meets its lengths wherever [fewest, most] does (the region counts
// it), a window of one may not (the product decides: no string fits).
func TestLengthRegionGaps(t *testing.T) {
	v, toks, eos := llama3(t)
	g, err := Compile([]byte(`{"type":"string","format":"date-time","minLength":21,"maxLength":22}`))
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, g, []string{`"2020-01-01T00:00:00.5Z"`}, []string{`"2020-01-01T00:00:00Z"`, `"2020-01-01T00:00:00.55Z"`})
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		walk(t, g, v, toks, eos, rng, 60, nil) // fails on a dead end
	}
	const want = "never be satisfied"
	if _, err := Compile([]byte(`{"type":"string","format":"date-time","minLength":21,"maxLength":21}`)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("date-time of 21 characters: got %v, want an error with %q", err, want)
	}
}

// TestLengthRegionAgainstAjv walks random answers through formats and
// patterns beside length bounds, tokens of Llama 3 at random, and has
// ajv, written apart from genq, validate every answer that ends; the
// masks on the way must equal a token-by-token check at the first walk.
func TestLengthRegionAgainstAjv(t *testing.T) {
	v, toks, eos := llama3(t)
	schemas := []string{
		`{"type":"string","format":"uri","maxLength":12}`,
		`{"type":"string","format":"uri","minLength":10,"maxLength":14}`,
		`{"type":"string","format":"email","minLength":6,"maxLength":9}`,
		`{"type":"string","format":"ipv4","maxLength":9}`,
		`{"type":"string","pattern":"^[a-zé\\n]+$","minLength":4,"maxLength":7}`,
		`{"type":"string","format":"uri-reference","minLength":3,"maxLength":6}`,
	}
	var lines []ajvtest.Line
	var got [][]bool
	var exact []int
	for i, schema := range schemas {
		full := schema
		g, err := Compile([]byte(full))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		line := ajvtest.Line{Schema: json.RawMessage(full), AssertFormats: true}
		var accepted []bool
		for w := range 24 {
			var check func(m *grammar.Matcher, mask []uint64)
			if w == 0 {
				check = func(m *grammar.Matcher, mask []uint64) { bruteForce(t, m, mask, toks, eos, schema) }
			}
			out, ok := walk(t, g, v, toks, eos, rand.New(rand.NewPCG(uint64(i), uint64(w))), 40, check)
			if ok {
				line.Answers = append(line.Answers, string(out))
				accepted = append(accepted, true)
			}
		}
		lines, got, exact = append(lines, line), append(got, accepted), append(exact, 0)
	}
	checkAgainstAjv(t, lines, got, exact, func(i int) string { return schemas[i] }, nil)
}

// TestLengthRegionExhaustive checks every string of up to six
// characters over a small alphabet against Go's regexp and a count of
// runes: patterns whose ways leave gaps of one character (even numbers
// of characters; 2, 4 or 6) under windows wide enough for a region and
// too narrow for one (the product; where no string fits, the schema is
// refused), and a prefix the matcher takes must have an end within the
// bounds (no dead end).
func TestLengthRegionExhaustive(t *testing.T) {
	alphabet := []string{"a", "b", "c", "d", "é", "\n"}
	var all []string
	var grow func(s string, n int)
	grow = func(s string, n int) {
		all = append(all, s)
		if n == 0 {
			return
		}
		for _, a := range alphabet {
			grow(s+a, n-1)
		}
	}
	grow("", 6)
	for _, tc := range []struct {
		pattern string
		bounds  [2]int
	}{
		{`^(ab|abcd)*$`, [2]int{3, 5}}, {`^(ab|abcd)*$`, [2]int{2, 6}}, {`^(ab|abcd)*$`, [2]int{4, 4}},
		{`^(ab|abcd)*$`, [2]int{3, 4}}, {`^(ab|abcd)*$`, [2]int{5, 5}}, {`^(ab|abcd)*$`, [2]int{0, 3}},
		{`^(ab|abcd)*$`, [2]int{6, -1}}, {`^(a|bbb)(a|bbb)$`, [2]int{3, 3}}, {`^(a|bbb)(a|bbb)$`, [2]int{3, 5}},
		{`^(a|bbb)(a|bbb)$`, [2]int{4, 4}}, {`^(a|bbb)(a|bbb)$`, [2]int{1, 3}}, {`^(a|bbb)(a|bbb)$`, [2]int{5, -1}},
	} {
		pattern, b := tc.pattern, tc.bounds
		re := regexp.MustCompile(pattern)
		schema := fmt.Sprintf(`{"type":"string","pattern":%q,"minLength":%d`, pattern, b[0])
		if b[1] >= 0 {
			schema += fmt.Sprintf(`,"maxLength":%d`, b[1])
		}
		schema += "}"
		fits := func(s string) bool {
			n := utf8.RuneCountInString(s)
			return re.MatchString(s) && n >= b[0] && (b[1] < 0 || n <= b[1])
		}
		g, err := Compile([]byte(schema))
		if err != nil && strings.Contains(err.Error(), "never be satisfied") && !slices.ContainsFunc(all, fits) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		// completes tells whether some string of all begins with s and fits.
		completes := map[string]bool{}
		for _, s := range all {
			if fits(s) {
				for i := range len(s) + 1 {
					completes[s[:i]] = true
				}
			}
		}
		for _, s := range all {
			text, _ := json.Marshal(s)
			if got, want := accepts(g, string(text)), fits(s); got != want {
				t.Errorf("%s: %q: accepted %v, want %v", schema, s, got, want)
			}
			// A prefix is taken exactly when it completes. Under a
			// maxLength every completion is among the strings; with
			// none, a prefix of two completes within six if at all.
			if b[1] >= 0 || utf8.RuneCountInString(s) <= 2 {
				m := g.NewMatcher()
				took := m.Advance(text[:len(text)-1])
				if took != completes[s] {
					t.Errorf("%s: the prefix %q: taken %v, completes %v", schema, s, took, completes[s])
				}
			}
		}
	}
}
