package structured

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/genq/genq/internal/structured/ajvtest"
)

// TestECMAScriptEscapes: the escapes ecmaPattern rewrites into Go's
// syntax match what ECMAScript's do. Each pattern takes the strings of ok
// and refuses those of refused (checked by hand against ECMA-262), alone
// and under not; and, where node and ajv are at hand, genq agrees with
// ajv (ECMAScript's RegExp with the u flag) on every string of the pool.
func TestECMAScriptEscapes(t *testing.T) {
	cases := []struct {
		pattern     string
		ok, refused []string
	}{
		{`^\S+$`, []string{"a", "ab-c", "é"}, []string{"", "a b", "a\u00a0b", "\u2028", "\ufeff", "a\vb"}},
		{`^\s$`, []string{" ", "\t", "\v", "\u00a0", "\u1680", "\u2005", "\u2028", "\u202f", "\u3000", "\ufeff"}, []string{"a", "\u200b", "\u0085"}},
		{`^[^\s]+$`, []string{"ab", "\u200b"}, []string{"a b", "\u00a0", "\u3000x"}},
		{`^[^\S\r\n]*$`, []string{"", " \t", "\u00a0"}, []string{"\n", " \r", "a"}},
		{`^[\s\d]+$`, []string{"1 2", "\u20281"}, []string{"a"}},
		{`^\u00e9\u0041$`, []string{"éA"}, []string{"eA", "é"}},
		{`^[\u0000-\u007F]*$`, []string{"", "abc~"}, []string{"é", "a\u0080"}},
		{`^\x41\cJ\0$`, []string{"A\n\u0000"}, []string{"A\n0", "A\r\u0000"}},
		{`^[\b]\v$`, []string{"\b\v"}, []string{"b\v", "\b "}},
		{`^[a\-\]]+$`, []string{"a-]"}, []string{"b"}},
	}
	var lines []ajvtest.Line
	pool := []string{"", "a", "A", " ", "\t", "\n", "\r", "\v", "\b", "\u0000", "\u0085", "\u00a0", "\u1680", "\u200b",
		"\u2028", "\u202f", "\ufeff", "é", "éA", "a b", "1 2", "A\n\u0000", "\b\v", "a-]", "ab", "~"}
	for _, tc := range cases {
		schema := `{"type":"string","pattern":` + quoteJSON(tc.pattern) + `}`
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Errorf("%s: %v", tc.pattern, err)
			continue
		}
		checkTexts(t, g, jsonStrings(tc.ok), jsonStrings(tc.refused))
		neg, err := Compile([]byte(`{"type":"string","not":{"pattern":` + quoteJSON(tc.pattern) + `}}`))
		if err != nil {
			t.Errorf("not %s: %v", tc.pattern, err)
			continue
		}
		checkTexts(t, neg, jsonStrings(tc.refused), jsonStrings(tc.ok))
		lines = append(lines, ajvtest.Line{Schema: json.RawMessage(schema), Answers: jsonStrings(pool)})
	}
	results, ran := ajvtest.Check(t, lines)
	if !ran {
		t.Log("ajv cannot run: the pool is left unchecked")
		return
	}
	for i, l := range lines {
		g, _ := Compile(l.Schema)
		for j, answer := range l.Answers {
			if strings.HasPrefix(results[i][0], "ajv cannot compile") {
				t.Fatalf("%s: %s", l.Schema, results[i][0])
			}
			if valid, got := results[i][j] == "", matches(g, answer); valid != got {
				t.Errorf("%s: genq takes %s: %v, ajv: %v", l.Schema, answer, got, valid)
			}
		}
	}
}

// TestPatternRefusals: what ECMAScript and Go read differently and genq
// does not rewrite is refused, naming it.
func TestPatternRefusals(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{`^(a)\1$`, `\1`},
		{`\bword\b`, `\b`},
		{`[]a]`, `empty class`},
		{`^[^]$`, `empty class`},
		{`\uD83D\uDE00`, `surrogate`},
		{`\u{1F600}`, `four hex digits`},
		{`\a`, `\a`},
		{`[[:alpha:]]`, `POSIX`},
		{`a\`, `lone backslash`},
	} {
		_, err := Compile([]byte(`{"type":"string","pattern":` + quoteJSON(tc.pattern) + `}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.pattern, err, tc.want)
		}
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonStrings are ss as JSON strings, as a model writes them: the line
// and paragraph separators json.Marshal escapes as themselves (genq's
// pattern automata know one spelling per character).
func jsonStrings(ss []string) []string {
	raw := strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029")
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = raw.Replace(quoteJSON(s))
	}
	return out
}

// TestLengthsBesidePatternsCounted: a length over 1,024 beside patterns
// an allOf joins or a not rejects is counted in a length region around
// their product, as beside one pattern, not refused (nor, as before, an
// internal error where the patterns were negated).
func TestLengthsBesidePatternsCounted(t *testing.T) {
	str := func(parts ...string) string { return quoteJSON(strings.Join(parts, "")) }
	x := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
	}{
		{"not pattern, maxLength", `{"not":{"pattern":"^a"},"maxLength":1500}`,
			// 1 satisfies the pattern (which holds only strings): not refuses it.
			[]string{str("b"), str("b", x(1499))},
			[]string{str("a"), str("ab"), str("b", x(1500)), `1`}},
		{"not pattern, minLength", `{"type":"string","not":{"pattern":"^a"},"minLength":1100}`,
			[]string{str(x(1100)), str(x(1200))},
			[]string{str(x(1099)), str("a", x(1200)), `1`}},
		{"two patterns of an allOf, maxLength", `{"allOf":[{"pattern":"^a"},{"pattern":"b$"}],"maxLength":2000}`,
			[]string{str("ab"), str("a", x(1998), "b")},
			[]string{str("a", x(1999), "b"), str("ba"), str("a")}},
		{"pattern and not pattern, both bounds", `{"type":"string","pattern":"^x","not":{"pattern":"y$"},"minLength":1030,"maxLength":1040}`,
			[]string{str(x(1030)), str(x(1039), "z")},
			[]string{str(x(1029)), str(x(1041)), str(x(1035), "y")}},
	} {
		g, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkTexts(t, g, tc.ok, tc.refused)
	}
}

// TestPropertyNamesLengthCounted: propertyNames' lengths over 1,024 are
// counted in a length region around the key's product (alone they were
// an internal error, beside a pattern refused): a key of the bounds'
// length is written, one past them is not, nor a listed name past them.
func TestPropertyNamesLengthCounted(t *testing.T) {
	key := func(s string, n int) string { return quoteJSON(s + strings.Repeat("x", n)) }
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
	}{
		{"maxLength alone", `{"type":"object","propertyNames":{"maxLength":1100}}`,
			[]string{`{}`, `{` + key("", 1100) + `:1}`, `{"a":1}`},
			[]string{`{` + key("", 1101) + `:1}`}},
		{"pattern and minLength", `{"type":"object","propertyNames":{"pattern":"^a","minLength":1030}}`,
			[]string{`{` + key("a", 1029) + `:1}`},
			[]string{`{` + key("a", 1028) + `:1}`, `{` + key("b", 1030) + `:1}`}},
		{"a listed name and patternProperties", `{"type":"object","properties":{"b":{"type":"integer"}},"patternProperties":{"^a":{"type":"string"}},
			"propertyNames":{"pattern":"^[ab]","maxLength":1050}}`,
			[]string{`{"b":1,` + key("a", 1049) + `:"s"}`, `{` + key("b", 10) + `:null}`},
			[]string{`{` + key("a", 1050) + `:"s"}`, `{` + key("a", 3) + `:1}`, `{"c":1}`, `{"b":"s"}`}},
	} {
		g, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkTexts(t, g, tc.ok, tc.refused)
	}
}
