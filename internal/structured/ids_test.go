package structured

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// identifierSchemas are compound documents whose $refs resolve by $id,
// $anchor and $dynamicAnchor, each with instances on both sides of every
// reference; naive resolution (against the document, not the nearest
// $id; by anchor name alone; statically for $dynamicRef) gets some wrong.
var identifierSchemas = []struct {
	name      string
	schema    string
	instances []string
}{
	{"relative $id, and a pointer and an anchor after one",
		`{"$id": "http://example.com/root.json", "type": "object",
		  "properties": {"a": {"$ref": "item.json"}, "b": {"$ref": "item.json#/$defs/n"}, "c": {"$ref": "http://example.com/other/x.json#pos"}},
		  "$defs": {"item": {"$id": "item.json", "type": "string", "$defs": {"n": {"type": "integer"}}},
		            "x": {"$id": "other/x.json", "$defs": {"p": {"$anchor": "pos", "type": "number", "minimum": 0}}}}}`,
		[]string{`{"a":"s"}`, `{"a":1}`, `{"b":1}`, `{"b":"s"}`, `{"c":1}`, `{"c":-1}`, `{}`}},
	{"$id resolved against the nearest parent",
		`{"$id": "http://example.com/a/", "type": "object", "properties": {"x": {"$ref": "b/c.json"}},
		  "$defs": {"b": {"$id": "b/", "$defs": {"c": {"$id": "c.json", "type": "integer"}}},
		            "decoy": {"$id": "http://example.com/a/c.json", "type": "string"}}}`,
		[]string{`{"x":1}`, `{"x":"s"}`}},
	{"a pointer in an embedded resource is the resource's",
		`{"$id": "http://example.com/root", "$ref": "inner",
		  "$defs": {"t": {"type": "string"},
		            "inner": {"$id": "inner", "type": "object", "properties": {"v": {"$ref": "#/$defs/t"}}, "$defs": {"t": {"type": "integer"}}}}}`,
		[]string{`{"v":1}`, `{"v":"s"}`, `{}`}},
	{"one anchor name in two resources",
		`{"$id": "http://example.com/root", "type": "object", "properties": {"a": {"$ref": "#n"}, "b": {"$ref": "child#n"}},
		  "$defs": {"n1": {"$anchor": "n", "type": "integer"},
		            "child": {"$id": "child", "$defs": {"n": {"$anchor": "n", "type": "string"}}}}}`,
		[]string{`{"a":1}`, `{"a":"s"}`, `{"b":"s"}`, `{"b":1}`}},
	{"URNs",
		`{"$id": "urn:example:root", "type": "object",
		  "properties": {"a": {"$ref": "urn:example:root#/$defs/s"}, "b": {"$ref": "#/$defs/s"}, "c": {"$ref": "urn:example:other"}},
		  "$defs": {"s": {"type": "string"}, "o": {"$id": "urn:example:other", "type": "boolean"}}}`,
		[]string{`{"a":"s"}`, `{"a":1}`, `{"b":"s"}`, `{"b":1}`, `{"c":true}`, `{"c":"s"}`}},
	{"a $dynamicRef whose target the scope picks, from two scopes",
		`{"$id": "http://example.com/main", "type": "object",
		  "properties": {"nums": {"$ref": "numberList"}, "strs": {"$ref": "stringList"}, "any": {"$ref": "genericList"}},
		  "$defs": {
		    "genericList": {"$id": "genericList", "type": "array", "items": {"$dynamicRef": "#itemType"}, "$defs": {"default": {"$dynamicAnchor": "itemType"}}},
		    "numberList": {"$id": "numberList", "$defs": {"itemType": {"$dynamicAnchor": "itemType", "type": "number"}}, "$ref": "genericList"},
		    "stringList": {"$id": "stringList", "$defs": {"itemType": {"$dynamicAnchor": "itemType", "type": "string"}}, "$ref": "genericList"}}}`,
		[]string{`{"nums":[1,2],"strs":["a"]}`, `{"nums":["a"]}`, `{"strs":[1]}`, `{"any":[1,"a",null]}`, `{"nums":[],"any":[{}]}`}},
	{"the outermost $dynamicAnchor in scope",
		`{"$id": "http://example.com/root", "$ref": "list",
		  "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"},
		            "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#items"}, "$defs": {"items": {"$dynamicAnchor": "items", "type": "integer"}}}}}`,
		[]string{`["a"]`, `[1]`, `[]`}},
	{"a recursive tree extended by a $dynamicRef",
		`{"$id": "http://example.com/strict-tree", "$dynamicAnchor": "node", "$ref": "tree", "unevaluatedProperties": false,
		  "$defs": {"tree": {"$id": "tree", "$dynamicAnchor": "node", "type": "object",
		    "properties": {"data": true, "children": {"type": "array", "items": {"$dynamicRef": "#node"}}}}}}`,
		[]string{`{"children":[{"data":1}]}`, `{"children":[{"daat":1}]}`, `{"data":1,"children":[{"children":[{"x":1}]}]}`, `{}`}},
	{"a $dynamicRef without its $dynamicAnchor is a $ref",
		`{"$id": "http://example.com/root", "type": "array", "items": {"$dynamicRef": "#/$defs/t"},
		  "$defs": {"t": {"$dynamicAnchor": "t", "type": "boolean"}}}`,
		[]string{`[true]`, `[1]`}},
	{"draft 7: an $id beside $ref sets no base",
		`{"$schema": "http://json-schema.org/draft-07/schema#", "$id": "http://example.com/r", "type": "object",
		  "definitions": {"a": {"$id": "#foo", "type": "integer"}, "s": {"type": "string"}},
		  "properties": {"x": {"$ref": "#foo"}, "y": {"$id": "http://example.com/other/", "$ref": "#/definitions/s"}}}`,
		[]string{`{"x":1}`, `{"x":"s"}`, `{"y":"s"}`, `{"y":1}`}},
	{"draft 4's id",
		`{"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/r", "type": "object",
		  "properties": {"x": {"$ref": "sub#/definitions/i"}},
		  "definitions": {"sub": {"id": "sub", "definitions": {"i": {"type": "integer"}}}}}`,
		[]string{`{"x":1}`, `{"x":"s"}`}},
}

// TestIdentifiersAgainstValidator compiles each of identifierSchemas and
// checks every instance against the validator genq's relaxed tools use
// (written apart from genq's compiler): genq accepts exactly what it
// accepts.
func TestIdentifiersAgainstValidator(t *testing.T) {
	for _, tc := range identifierSchemas {
		agreesWithValidator(t, tc.name, tc.schema, tc.instances)
	}
}

// agreesWithValidator compiles schema and checks that genq accepts each
// of instances exactly where the validator relaxed tools use does.
func agreesWithValidator(t *testing.T, name, schema string, instances []string) {
	t.Helper()
	g, err := Compile([]byte(schema))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	v, err := compileValidator([]byte(schema))
	if err != nil {
		t.Fatalf("%s: the validator: %v", name, err)
	}
	for _, in := range instances {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		want := v.Validate(inst) == nil
		if got := accepts(g, in); got != want {
			t.Errorf("%s: %s accepted %v, the validator says %v", name, in, got, want)
		}
	}
}

// TestIdentifierRefusals: what does not resolve inside the document, or
// resolves only in a scope genq cannot see, is refused by name.
func TestIdentifierRefusals(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"another document", `{"$ref": "http://localhost:1234/x.json"}`, `refers to another document (http://localhost:1234/x.json)`},
		{"a relative one", `{"$id": "http://example.com/a/b", "$ref": "c.json"}`, `another document (http://example.com/a/c.json)`},
		{"a $ref the walk does not reach, against the root's $id",
			`{"$id": "http://example.com/root.json", "properties": {"x": {"$ref": "#/components/c"}}, "components": {"c": {"properties": {"y": {"$ref": "schema.json"}}}}}`,
			`another document (http://example.com/schema.json)`},
		{"the meta-schema", `{"$defs": {"a": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}, "$ref": "#/$defs/a"}`, `the 2020-12 meta-schema`},
		{"an $id twice", `{"$defs": {"a": {"$id": "http://e.com/x", "type": "string"}, "b": {"$id": "http://e.com/x", "type": "integer"}}, "$ref": "http://e.com/x"}`, `two subschemas set the $id http://e.com/x`},
		{"an anchor twice", `{"$defs": {"a": {"$anchor": "x", "type": "string"}, "b": {"$anchor": "x", "type": "integer"}}, "$ref": "#x"}`, `two subschemas set the anchor "x"`},
		{"an anchor in another resource", `{"$id": "http://e.com/r", "$defs": {"c": {"$id": "c", "$defs": {"a": {"$anchor": "x", "type": "string"}}}}, "$ref": "#x"}`, `$ref "#x" points to nothing`},
		{"a $dynamicAnchor twice in the scope's resource",
			`{"$id": "http://e.com/r", "$dynamicAnchor": "t", "$ref": "list",
			  "$defs": {"a": {"$dynamicAnchor": "t", "type": "string"},
			            "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#t"}, "$defs": {"t": {"$dynamicAnchor": "t"}}}}}`,
			`two subschemas set the anchor "t"`},
		{"$dynamicRef beside $ref", `{"$defs": {"a": {"$dynamicAnchor": "a"}}, "$ref": "#/$defs/a", "$dynamicRef": "#a"}`, `$dynamicRef beside $ref`},
		{"$dynamicRef in a scope an if hides",
			`{"$id": "http://e.com/main", "if": {"required": ["n"]}, "then": {"$ref": "nums"}, "else": {"$ref": "strs"},
			  "$defs": {"gen": {"$id": "gen", "properties": {"l": {"items": {"$dynamicRef": "#t"}}}, "$defs": {"d": {"$dynamicAnchor": "t"}}},
			            "nums": {"$id": "nums", "$defs": {"t": {"$dynamicAnchor": "t", "type": "number"}}, "$ref": "gen"},
			            "strs": {"$id": "strs", "$defs": {"t": {"$dynamicAnchor": "t", "type": "string"}}, "$ref": "gen"}}}`,
			`depends on the dynamic scope`},
	} {
		_, err := Compile([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
