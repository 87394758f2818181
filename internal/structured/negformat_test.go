package structured

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/genq/genq/internal/structured/ajvtest"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
)

// TestNegatedFormatLeftOut: under not, if or oneOf, where the negation is
// not negated again, the strings that fail a format are left out of it:
// genq takes fewer instances than the schema allows, never more; negated
// twice, or with nothing else left, the format is refused as before.
func TestNegatedFormatLeftOut(t *testing.T) {
	// A user and an enterprise, as GitHub's owner: both may hold at once.
	const owner = `{"oneOf": [
		{"type": "object", "properties": {"login": {"type": "string"}, "url": {"type": "string"}}, "required": ["login"]},
		{"type": "object", "properties": {"slug": {"type": "string"}, "url": {"type": "string", "format": "uri"}}, "required": ["slug"]}]}`
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
		compileErr   string
	}{
		{name: "oneOf whose other branch has a format", schema: owner,
			ok: []string{`{"login":"a","url":"https://x.example"}`, `{"slug":"s","url":"https://x.example"}`, `{"login":"a","url":"no uri"}`},
			// The last is valid (the enterprise fails by its url alone):
			// what leaving the format's failures out costs.
			refused: []string{`{"login":"a","slug":"s","url":"https://x.example"}`, `{"slug":"s","url":"no uri"}`, `{}`,
				`{"login":"a","slug":"s","url":"no uri"}`}},
		{name: "not over a string with a format", schema: `{"not": {"type": "string", "format": "date"}}`,
			ok: []string{`1`, `null`, `{}`}, refused: []string{`"2024-01-01"`, `"not a date"`}},
		{name: "not over a format alone", schema: `{"not": {"format": "date"}}`, compileErr: `not over "format"`},
		{name: "not negated again", schema: `{"not": {"not": {"type": "string", "format": "date"}, "type": "integer"}}`, compileErr: `not over "format"`},
		{name: "oneOf within not", schema: `{"not": {"oneOf": [{"type": "string", "format": "date"}, {"type": "string", "maxLength": 3}]}}`,
			compileErr: `not over "format"`},
		{name: "if whose negation leaves nothing", schema: `{"if": {"type": "string", "format": "date"}, "then": {"type": "string", "maxLength": 3}, "else": {"type": "string"}}`,
			compileErr: `leaves out the strings that fail a format`},
		{name: "annotation under 2020-12", schema: `{"$schema": "https://json-schema.org/draft/2020-12/schema", "not": {"format": "date"}}`,
			compileErr: `can never be satisfied`},
	} {
		g, ok := compileOrRefuse(t, tc.name, tc.schema, tc.compileErr)
		if !ok {
			continue
		}
		checkTexts(t, g, tc.ok, tc.refused)
		takesOnlyValid(t, tc.name, tc.schema, g, append(tc.ok, tc.refused...))
	}
}

// TestOneOfWithFewerViolations: a oneOf whose exact lowering makes more
// than maxBranches alternatives keeps, of each other branch's violations,
// its type and one name it requires that the branch does not: it takes
// fewer instances than the schema allows, never more.
func TestOneOfWithFewerViolations(t *testing.T) {
	branch := func(name, typ string) string {
		var props []string
		for i := range 20 {
			props = append(props, fmt.Sprintf(`"p%d":{"type":%q}`, i, typ))
		}
		return fmt.Sprintf(`{"type":"object","required":[%q],"properties":{%s}}`, name, strings.Join(props, ","))
	}
	// Exactly: each branch times 22 violations of each of the two others.
	schema := `{"oneOf":[` + branch("a", "string") + `,` + branch("b", "integer") + `,` + branch("c", "boolean") + `]}`
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	// Members in the schema's order: an object listing more than 6
	// properties is written so.
	checkTexts(t, g, []string{`{"a":"x"}`, `{"p0":2,"b":1}`, `{"c":true}`},
		// The last is valid (b's p0 must be an integer): what fewer
		// violations cost.
		[]string{`{"a":"x","b":1}`, `{"p0":3,"b":1,"c":2}`, `{}`, `[]`, `{"p0":1,"a":"x"}`, `{"p0":"s","a":"x","b":1}`})
	takesOnlyValid(t, "oneOf of three", schema, g, nil)
	// Within not, the same oneOf is refused, naming the size.
	if _, err := Compile([]byte(`{"not":` + schema + `}`)); err == nil || !strings.Contains(err.Error(), "alternatives") {
		t.Errorf("the oneOf within not: %v, want a refusal naming its alternatives", err)
	}
}

// takesOnlyValid checks with ajv, formats asserting, that every instance
// genq takes of schema, of those listed and of those random walks write,
// is valid: fewer instances, never more.
func takesOnlyValid(t *testing.T, name, schema string, g *grammar.Grammar, instances []string) {
	t.Helper()
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	line := ajvtest.Line{Schema: json.RawMessage(schema), AssertFormats: true}
	var got []bool
	for _, in := range instances {
		line.Answers, got = append(line.Answers, in), append(got, matches(g, in))
	}
	for w := range 24 {
		if out, ok := walk(t, g, v, toks, eos, rand.New(rand.NewPCG(uint64(w), 52)), 400, nil); ok {
			line.Answers, got = append(line.Answers, string(out)), append(got, true)
		}
	}
	checkAgainstAjv(t, []ajvtest.Line{line}, [][]bool{got}, []int{0}, func(int) string { return name }, nil)
}

// TestOneOfWithFewerViolationsBySize: an overlapping oneOf whose exact
// lowering is too large to compile (GitHub's secret-scanning locations:
// open objects, each requiring a name of its own beside properties that
// others require) keeps fewer violations of the other branches, and one
// whose other branch's negation would hold a oneOf that cannot be
// negated keeps fewer of that branch's: each compiles, takes one
// instance of each branch and no instance ajv refuses.
func TestOneOfWithFewerViolationsBySize(t *testing.T) {
	common := `"path":{"type":"string"},"start_line":{"type":"number"},"end_line":{"type":"number"},"blob_sha":{"type":"string"},"commit_sha":{"type":"string"}`
	branches := []string{
		`{"type":"object","properties":{` + common + `,"blob_url":{"type":"string"}},"required":["path","start_line","end_line","blob_sha","commit_sha","blob_url"]}`,
		`{"type":"object","properties":{` + common + `,"page_url":{"type":"string"}},"required":["path","start_line","end_line","blob_sha","commit_sha","page_url"]}`,
	}
	for i := range 11 {
		branches = append(branches, fmt.Sprintf(`{"type":"object","properties":{"url%d":{"type":"string"},"html_url":{"type":"string"}},"required":["url%d"]}`, i, i))
	}
	locations := `{"oneOf":[` + strings.Join(branches, ",") + `]}`
	nested := `{"oneOf":[
		{"type":"object","properties":{"field":{"type":"object","properties":{"from":{"oneOf":[
			{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"}}},
			{"type":"object","properties":{"id":{"type":"string"},"title":{"type":"string"},"duration":{"type":"number"}}},
			{"type":"object","properties":{"id":{"type":"string"},"color":{"type":"string"}}}]}}}},"required":["field"]},
		{"type":"object","properties":{"body":{"type":"object","properties":{"from":{"type":"string"}}}},"required":["body"]}]}`
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
	}{
		{"locations", locations,
			[]string{`{"path":"a","start_line":1,"end_line":2,"blob_sha":"x","commit_sha":"y","blob_url":"u"}`, `{"url3":"u"}`, `{"url0":"u","html_url":"h"}`},
			[]string{`{"url0":"u","url1":"v"}`, `{"path":"a","start_line":1,"end_line":2,"blob_sha":"x","commit_sha":"y","blob_url":"u","page_url":"p"}`, `{}`}},
		{"a oneOf within the branch to negate", nested,
			[]string{`{"field":{"from":{"name":"n","title":1,"color":2}}}`, `{"body":{"from":"x"}}`, `{"field":{}}`},
			[]string{`{"field":{},"body":{}}`, `{"field":{"from":{"id":"a"}}}`, `{"body":{"from":1}}`}},
	} {
		g, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkTexts(t, g, tc.ok, tc.refused)
		takesOnlyValid(t, tc.name, tc.schema, g, append(tc.ok, tc.refused...))
	}
}
