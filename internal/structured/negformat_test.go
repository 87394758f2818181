package structured

import (
	"strings"
	"testing"
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
		g, err := Compile([]byte(tc.schema))
		if tc.compileErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.compileErr) {
				t.Errorf("%s: the error is %v, want one with %q", tc.name, err, tc.compileErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkTexts(t, g, tc.ok, tc.refused)
	}
}
