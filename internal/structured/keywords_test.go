package structured

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The drafts the keyword audit runs, by the $schema each names ("" for
// none).
var auditDrafts = []struct {
	draft int
	uri   string
}{
	{draft4, "http://json-schema.org/draft-04/schema#"},
	{draft6, "http://json-schema.org/draft-06/schema#"},
	{draft7, "http://json-schema.org/draft-07/schema#"},
	{draft2019, "https://json-schema.org/draft/2019-09/schema"},
	{draft2020, "https://json-schema.org/draft/2020-12/schema"},
	{draftNone, ""},
}

// assertingKeywords are the keywords each draft's meta-schema defines that
// assert or apply schemas that assert (the validation and applicator
// vocabularies, and $ref's kin), format where its vocabulary makes it
// assert. A schema without $schema is read with every keyword of drafts 4
// to 2020-12.
func assertingKeywords(draft int) []string {
	d4 := []string{"$ref", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
		"maxLength", "minLength", "pattern", "additionalItems", "items", "maxItems", "minItems", "uniqueItems",
		"maxProperties", "minProperties", "required", "additionalProperties", "properties", "patternProperties",
		"dependencies", "enum", "type", "format", "allOf", "anyOf", "oneOf", "not"}
	d6 := append(slices.Clone(d4), "const", "contains", "propertyNames")
	d7 := append(slices.Clone(d6), "if", "then", "else")
	later := []string{"dependentRequired", "dependentSchemas", "maxContains", "minContains",
		"unevaluatedItems", "unevaluatedProperties"}
	d2019 := append(slices.DeleteFunc(slices.Clone(d7), func(k string) bool { return k == "dependencies" || k == "format" }), later...)
	switch draft {
	case draft4:
		return d4
	case draft6:
		return d6
	case draft7:
		return d7
	case draft2019:
		return append(d2019, "$recursiveRef")
	case draft2020:
		return append(slices.DeleteFunc(d2019, func(k string) bool { return k == "additionalItems" }), "prefixItems", "$dynamicRef")
	}
	return append(d7, append(later, "prefixItems", "$dynamicRef", "$recursiveRef")...)
}

// auditCase is a small schema with one keyword at work: ok is an instance
// it allows, bad one it forbids.
type auditCase struct {
	keyword string
	drafts  []int // nil: every draft whose keywords include keyword
	schema  string
	ok, bad string
	// alsoNamed is a keyword beside it whose naming in a refusal will do
	// (then's and else's if).
	alsoNamed string
}

var auditCases = []auditCase{
	{keyword: "type", schema: `{"type":"string"}`, ok: `"a"`, bad: `1`},
	{keyword: "type", drafts: []int{draft4}, schema: `{"type":"integer"}`, ok: `1`, bad: `1.0`},
	{keyword: "enum", schema: `{"enum":[1,"a"]}`, ok: `"a"`, bad: `2`},
	{keyword: "const", schema: `{"const":"a"}`, ok: `"a"`, bad: `"b"`},
	{keyword: "multipleOf", schema: `{"type":"integer","multipleOf":3}`, ok: `6`, bad: `7`},
	{keyword: "maximum", schema: `{"type":"number","maximum":3}`, ok: `3`, bad: `4`},
	{keyword: "minimum", schema: `{"type":"number","minimum":3}`, ok: `3`, bad: `2`},
	{keyword: "exclusiveMaximum", drafts: []int{draft4, draftNone}, schema: `{"type":"number","maximum":3,"exclusiveMaximum":true}`, ok: `2`, bad: `3`},
	{keyword: "exclusiveMinimum", drafts: []int{draft4, draftNone}, schema: `{"type":"number","minimum":3,"exclusiveMinimum":true}`, ok: `4`, bad: `3`},
	{keyword: "exclusiveMaximum", drafts: []int{draft6, draft7, draft2019, draft2020, draftNone}, schema: `{"type":"number","exclusiveMaximum":3}`, ok: `2`, bad: `3`},
	{keyword: "exclusiveMinimum", drafts: []int{draft6, draft7, draft2019, draft2020, draftNone}, schema: `{"type":"number","exclusiveMinimum":3}`, ok: `4`, bad: `3`},
	{keyword: "maxLength", schema: `{"maxLength":2}`, ok: `"ab"`, bad: `"abc"`},
	{keyword: "minLength", schema: `{"minLength":2}`, ok: `"ab"`, bad: `"a"`},
	{keyword: "pattern", schema: `{"pattern":"^a"}`, ok: `"ab"`, bad: `"ba"`},
	{keyword: "format", schema: `{"format":"ipv4"}`, ok: `"1.2.3.4"`, bad: `"1.2.3"`},
	{keyword: "format", schema: `{"format":"date"}`, ok: `"2024-02-29"`, bad: `"2023-02-29"`},
	{keyword: "format", schema: `{"format":"uri"}`, ok: `"https://a.example/b"`, bad: `"b c"`},
	{keyword: "format", schema: `{"format":"hostname"}`, ok: `"a.example"`, bad: `"-a"`},
	{keyword: "format", schema: `{"format":"regex"}`, ok: `"^a+$"`, bad: `"(a"`},
	{keyword: "items", schema: `{"items":{"type":"integer"}}`, ok: `[1]`, bad: `["a"]`},
	{keyword: "items", drafts: []int{draft4, draft6, draft7, draft2019, draftNone}, schema: `{"items":[{"type":"integer"}]}`, ok: `[1,"a"]`, bad: `["a"]`},
	{keyword: "additionalItems", schema: `{"items":[{}],"additionalItems":false}`, ok: `[1]`, bad: `[1,2]`},
	{keyword: "prefixItems", schema: `{"prefixItems":[{"type":"integer"}]}`, ok: `[1,"a"]`, bad: `["a"]`},
	{keyword: "maxItems", schema: `{"maxItems":1}`, ok: `[1]`, bad: `[1,2]`},
	{keyword: "minItems", schema: `{"minItems":1}`, ok: `[1]`, bad: `[]`},
	{keyword: "uniqueItems", schema: `{"uniqueItems":true}`, ok: `[1,2]`, bad: `[1,1]`},
	{keyword: "contains", schema: `{"contains":{"type":"integer"}}`, ok: `["a",1]`, bad: `["a"]`},
	{keyword: "minContains", schema: `{"contains":{"type":"integer"},"minContains":2}`, ok: `[1,2]`, bad: `[1,"a"]`},
	{keyword: "maxContains", schema: `{"contains":{"type":"integer"},"maxContains":1}`, ok: `[1,"a"]`, bad: `[1,2]`},
	{keyword: "maxProperties", schema: `{"maxProperties":1}`, ok: `{"a":1}`, bad: `{"a":1,"b":2}`},
	{keyword: "minProperties", schema: `{"minProperties":1}`, ok: `{"a":1}`, bad: `{}`},
	{keyword: "required", schema: `{"required":["a"]}`, ok: `{"a":1}`, bad: `{}`},
	{keyword: "properties", schema: `{"properties":{"a":{"type":"integer"}}}`, ok: `{"a":1}`, bad: `{"a":"x"}`},
	{keyword: "patternProperties", schema: `{"patternProperties":{"^x":{"type":"integer"}}}`, ok: `{"x1":1}`, bad: `{"x1":"s"}`},
	{keyword: "additionalProperties", schema: `{"properties":{"a":{}},"additionalProperties":false}`, ok: `{"a":1}`, bad: `{"b":1}`},
	{keyword: "dependencies", schema: `{"dependencies":{"a":["b"]}}`, ok: `{"a":1,"b":2}`, bad: `{"a":1}`},
	{keyword: "dependencies", schema: `{"dependencies":{"a":{"required":["b"]}}}`, ok: `{"a":1,"b":2}`, bad: `{"a":1}`},
	{keyword: "dependentRequired", schema: `{"dependentRequired":{"a":["b"]}}`, ok: `{"a":1,"b":2}`, bad: `{"a":1}`},
	{keyword: "dependentSchemas", schema: `{"dependentSchemas":{"a":{"required":["b"]}}}`, ok: `{"a":1,"b":2}`, bad: `{"a":1}`},
	{keyword: "propertyNames", schema: `{"propertyNames":{"maxLength":1}}`, ok: `{"a":1}`, bad: `{"ab":1}`},
	{keyword: "allOf", schema: `{"allOf":[{"minimum":2},{"maximum":3}]}`, ok: `2`, bad: `4`},
	{keyword: "anyOf", schema: `{"anyOf":[{"type":"integer"},{"type":"string"}]}`, ok: `1`, bad: `null`},
	{keyword: "oneOf", schema: `{"oneOf":[{"type":"integer"},{"type":"string"}]}`, ok: `1`, bad: `null`},
	{keyword: "oneOf", schema: `{"oneOf":[{"minimum":2},{"maximum":3}]}`, ok: `1`, bad: `2.5`},
	{keyword: "not", schema: `{"not":{"type":"integer"}}`, ok: `"a"`, bad: `1`},
	{keyword: "if", schema: `{"if":{"type":"integer"},"then":{"minimum":2},"else":{"type":"string"}}`, ok: `3`, bad: `1`},
	{keyword: "then", schema: `{"if":{"type":"integer"},"then":{"minimum":2}}`, ok: `3`, bad: `1`, alsoNamed: "if"},
	{keyword: "else", schema: `{"if":{"type":"integer"},"else":{"type":"string"}}`, ok: `"a"`, bad: `null`, alsoNamed: "if"},
	{keyword: "unevaluatedItems", schema: `{"allOf":[{"prefixItems":[{}]}],"unevaluatedItems":false}`, ok: `[1]`, bad: `[1,2]`},
	{keyword: "unevaluatedProperties", schema: `{"properties":{"a":{}},"unevaluatedProperties":false}`, ok: `{"a":1}`, bad: `{"b":1}`},
	{keyword: "$ref", schema: `{"definitions":{"i":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/i"}}}`, ok: `{"a":1}`, bad: `{"a":"x"}`},
	{keyword: "$recursiveRef", schema: `{"$recursiveAnchor":true,"type":"object","properties":{"a":{"$recursiveRef":"#"}}}`, ok: `{"a":{}}`, bad: `{"a":1}`},
	{keyword: "$dynamicRef", schema: `{"$dynamicAnchor":"n","type":"object","properties":{"a":{"$dynamicRef":"#n"}}}`, ok: `{"a":{}}`, bad: `{"a":1}`},
}

// withSchema puts $schema uri into the object schema.
func withSchema(schema, uri string) string {
	if uri == "" {
		return schema
	}
	return `{"$schema":` + strconv.Quote(uri) + `,` + schema[1:]
}

// TestEveryAssertingKeyword audits the rule that no keyword that asserts
// is dropped: for each draft, in each mode (JSON Schema's, strict, and
// formats asserting whatever the draft), a small schema using each
// asserting keyword is either refused with an error that names the
// keyword, or compiles to a grammar that refuses an instance the keyword
// forbids (and, JSON Schema's way, takes one it allows). Every keyword of
// every draft must have a case.
func TestEveryAssertingKeyword(t *testing.T) {
	modes := []struct {
		name string
		opts Options
	}{{"", Options{}}, {" strict", Options{Strict: true}}, {" formats asserting", Options{AssertFormats: true}}}
	for _, d := range auditDrafts {
		for _, mode := range modes {
			keywords := assertingKeywords(d.draft)
			if (mode.opts.Strict || mode.opts.AssertFormats) && !slices.Contains(keywords, "format") {
				keywords = append(keywords, "format")
			}
			for _, k := range keywords {
				if !slices.ContainsFunc(auditCases, func(c auditCase) bool { return c.keyword == k && appliesTo(c, d.draft, keywords) }) {
					t.Errorf("draft %d%s: no audit case for %q", d.draft, mode.name, k)
				}
			}
			for _, c := range auditCases {
				if appliesTo(c, d.draft, keywords) {
					auditCase1(t, c, d.draft, withSchema(c.schema, d.uri), mode.opts, mode.name)
				}
			}
		}
	}
}

// auditCase1 checks one case of TestEveryAssertingKeyword: refused by
// name, or bad refused; and, outside strict (whose objects are closed and
// integers whole), ok taken.
func auditCase1(t *testing.T, c auditCase, draft int, schema string, opts Options, mode string) {
	t.Helper()
	name := strconv.Itoa(draft) + mode + " " + c.keyword + " " + c.schema
	g, err := CompileWith([]byte(schema), opts)
	if err != nil {
		if !names(err.Error(), c.keyword) && (c.alsoNamed == "" || !names(err.Error(), c.alsoNamed)) {
			t.Errorf("%s: refused without naming %s: %v", name, c.keyword, err)
		}
		return
	}
	if matches(g, c.bad) {
		t.Errorf("%s: %s, which %s forbids, is accepted", name, c.bad, c.keyword)
	}
	if !opts.Strict && !matches(g, c.ok) {
		t.Errorf("%s: %s, which %s allows, is refused", name, c.ok, c.keyword)
	}
}

// names tells whether an error message names keyword k: quoted, or as a
// word of its own.
func names(msg, k string) bool {
	return strings.Contains(msg, `"`+k+`"`) || strings.Contains(msg, " "+k+" ") || strings.HasPrefix(msg, k+" ")
}

// appliesTo tells whether c's keyword is among keywords, and c is
// written for draft.
func appliesTo(c auditCase, draft int, keywords []string) bool {
	if !slices.Contains(keywords, c.keyword) {
		return false
	}
	return c.drafts == nil || slices.Contains(c.drafts, draft)
}

// TestAnnotationsStayAnnotations: where a draft makes a keyword an
// annotation or does not define it, the schema compiles and the keyword
// constrains nothing.
func TestAnnotationsStayAnnotations(t *testing.T) {
	for _, tc := range []struct {
		draft    int
		schema   string
		anything []string
	}{
		{draft2019, `{"format":"ipv4"}`, []string{`"not an address"`}},
		{draft2020, `{"format":"hostname"}`, []string{`"-not a host-"`}},
		{draft7, `{"format":"int64","contentMediaType":"application/json","contentEncoding":"base64","title":"t","readOnly":true}`, []string{`"x"`, `1`}},
		{draft4, `{"const":"a","minimum":1}`, []string{`"a"`}}, // const is no draft 4 word; enforcing it is narrower, never wider
	} {
		uri := ""
		for _, d := range auditDrafts {
			if d.draft == tc.draft {
				uri = d.uri
			}
		}
		g, err := Compile([]byte(withSchema(tc.schema, uri)))
		if err != nil {
			t.Errorf("%d %s: %v", tc.draft, tc.schema, err)
			continue
		}
		for _, text := range tc.anything {
			if !matches(g, text) {
				t.Errorf("%d %s: %s is refused", tc.draft, tc.schema, text)
			}
		}
	}
}

// TestMisshapenKeywordsRefused: a keyword whose value has not the shape
// JSON Schema gives it, which no draft reads as an assertion genq could
// hold, is refused by name rather than skipped.
func TestMisshapenKeywordsRefused(t *testing.T) {
	for _, tc := range []struct{ schema, keyword string }{
		{`{"properties":{"a":{"type":"string","required":true}}}`, "required"},
		{`{"type":"object","additionalProperties":"no"}`, "additionalProperties"},
		{`{"items":5}`, "items"},
		{`{"not":[]}`, "not"},
		{`{"properties":{"a":1}}`, "properties"},
		{`{"patternProperties":[]}`, "patternProperties"},
		{`{"anyOf":{"type":"string"}}`, "anyOf"},
		{`{"prefixItems":[1]}`, "prefixItems"},
		{`{"$defs":{"a":"b"}}`, "$defs"},
	} {
		_, err := Compile([]byte(tc.schema))
		if err == nil || !names(err.Error(), tc.keyword) {
			t.Errorf("%s: %v, want a refusal naming %q", tc.schema, err, tc.keyword)
		}
	}
}
