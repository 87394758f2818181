package structured

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestImplies checks implies on pairs of schemas, and, where it says m
// implies n, that the validator finds no instance of a pool valid against
// m and not against n: implies may miss an implication, never invent one.
func TestImplies(t *testing.T) {
	pool := []string{`null`, `true`, `0`, `1`, `1.5`, `3`, `""`, `"a"`, `"abc"`, `[]`, `[1]`, `["a"]`, `[1,2,3]`,
		`{}`, `{"a":1}`, `{"a":"x"}`, `{"a":{}}`, `{"a":{"b":1}}`, `{"a":{"b":"x"}}`, `{"b":1}`, `{"a":1,"b":2}`, `{"c":1}`}
	for _, tc := range []struct {
		m, n string
		want bool
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"}}}`, `{"type":"object","properties":{"a":{"type":"integer"}}}`, true},
		{`{"type":"integer"}`, `{"type":["number","null"]}`, true},
		{`{"type":"number"}`, `{"type":"integer"}`, false},
		{`{"enum":[1,"a"]}`, `{"enum":["a",1,null]}`, true},
		{`{"const":1}`, `{"enum":[2,3]}`, false},
		{`{"required":["a","b"]}`, `{"required":["a"]}`, true},
		{`{"required":["a"]}`, `{"required":["a","b"]}`, false},
		{`{"minLength":3,"maxItems":1}`, `{"minLength":2,"maxItems":2}`, true},
		{`{"minLength":1}`, `{"minLength":2}`, false},
		{`{"properties":{"a":{"type":"object","properties":{"b":{"type":"integer"}}},"c":true}}`, `{"properties":{"a":{"type":"object"}}}`, true},
		{`{"properties":{"c":true}}`, `{"properties":{"a":{"type":"object"}}}`, false},
		// additionalProperties reads properties: compared whole.
		{`{"properties":{"a":true,"b":true},"additionalProperties":false}`, `{"properties":{"a":true},"additionalProperties":false}`, false},
		{`{"items":{"type":"integer","minimum":1}}`, `{"items":{"type":"integer"}}`, true},
		{`{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}`, `{"items":{"type":"integer"}}`, false},
		{`{"type":"string","description":"x"}`, `{"type":"string","title":"y"}`, true},
		{`{"type":"integer"}`, `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, true},
		{`{"type":"integer","minimum":1}`, `{"allOf":[{"type":"number"},{"minimum":1}]}`, true},
		{`{"type":"integer"}`, `{"allOf":[{"type":"number"},{"minimum":1}]}`, false},
		{`{"type":"integer"}`, `{"oneOf":[{"type":"integer"},{"minimum":1}]}`, false},
		{`false`, `{"type":"string"}`, true},
		{`{"type":"string"}`, `true`, true},
		{`true`, `false`, false},
		// Draft 3's disallow asserts there: nothing implies it.
		{`{"type":"string"}`, `{"disallow":"string"}`, false},
	} {
		m, err := parseJSON([]byte(tc.m))
		if err != nil {
			t.Fatal(err)
		}
		n, err := parseJSON([]byte(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		got := implies(m, n)
		if got != tc.want {
			t.Errorf("implies(%s, %s) = %v, want %v", tc.m, tc.n, got, tc.want)
		}
		if got {
			checkImplication(t, tc.m, tc.n, pool)
		}
	}
}

// checkImplication checks with the validator that no instance of pool is
// valid against schema m and not against n.
func checkImplication(t *testing.T, m, n string, pool []string) {
	t.Helper()
	vm, err := compileValidator([]byte(m))
	if err != nil {
		t.Fatal(err)
	}
	vn, err := compileValidator([]byte(n))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range pool {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if vm.Validate(inst) == nil && vn.Validate(inst) != nil {
			t.Errorf("%s is valid against %s but not %s, which implies says it implies", in, m, n)
		}
	}
}

// TestMergeContradictions: a merge whose keywords imply what its not
// forbids, or that requires a property it makes false, is false, so that
// lowering drops the alternative before compiling it.
func TestMergeContradictions(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		never bool
	}{
		{`{"properties":{"a":{"type":"string"}}}`, `{"not":{"properties":{"a":{"type":"string"}}}}`, true},
		{`{"type":"integer","minimum":2}`, `{"not":{"type":"number"}}`, true},
		{`{"type":"number"}`, `{"not":{"type":"integer"}}`, false},
		{`{"type":"object","required":["a"]}`, `{"properties":{"a":false}}`, true},
		// Not objects only: a string has no property to require.
		{`{"type":["object","string"],"required":["a"]}`, `{"properties":{"a":false}}`, false},
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","required":["a"],"properties":{"a":{"not":{"type":"string"}}}}`, true},
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","required":["b"],"properties":{"b":{"not":{"type":"string"}}}}`, false},
	} {
		a, _ := parseJSON([]byte(tc.a))
		b, _ := parseJSON([]byte(tc.b))
		m, err := merge(a, b, "#")
		if got := never(m, err); got != tc.never {
			t.Errorf("merge(%s, %s): never %v, want %v (%v)", tc.a, tc.b, got, tc.never, err)
		}
	}
}

// TestOverlappingOneOfOfSharedParts: GitHub's organization ruleset
// conditions, each branch an allOf of one common part and one of its own,
// open objects that may overlap. Exactly one branch holds, with the
// alternatives where a branch's common part fails dropped at the merge.
func TestOverlappingOneOfOfSharedParts(t *testing.T) {
	schema := `{"$defs":{
		"ref":{"type":"object","properties":{"ref_name":{"type":"object","properties":{"include":{"type":"array","items":{"type":"string"}}}}}},
		"name":{"type":"object","properties":{"repository_name":{"type":"object","properties":{"protected":{"type":"boolean"}}}},"required":["repository_name"]},
		"id":{"type":"object","properties":{"repository_id":{"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"}}}}},"required":["repository_id"]}},
		"oneOf":[{"allOf":[{"$ref":"#/$defs/ref"},{"$ref":"#/$defs/name"}]},{"allOf":[{"$ref":"#/$defs/ref"},{"$ref":"#/$defs/id"}]}]}`
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, g,
		[]string{`{"ref_name":{"include":["main"]},"repository_name":{}}`, `{"repository_id":{"ids":[1]}}`,
			// Exactly one: the other branch fails on its own part.
			`{"repository_name":{"protected":true},"repository_id":1}`, `{"repository_id":{},"repository_name":{"protected":0}}`},
		[]string{`{"repository_name":{},"repository_id":{}}`, `{"ref_name":{"include":[1]},"repository_name":{}}`, `{}`, `[]`})
	takesOnlyValid(t, "ruleset conditions", schema, g, nil)
}
