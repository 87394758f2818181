package structured

import "testing"

// TestContainsAtLeast: where contains asks only a least count, its schema
// may be any schema genq compiles (no complement needed), beside any
// items; each instance is checked against the validator.
func TestContainsAtLeast(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		instances    []string
	}{
		{"a range", `{"contains": {"minimum": 5}}`,
			[]string{`[]`, `[1]`, `[5]`, `[1,6]`, `[{"a":1},7.5]`, `["x"]`, `[4.99]`, `{}`}},
		{"beside items, twice", `{"items": {"type": "integer"}, "contains": {"multipleOf": 3}, "minContains": 2}`,
			[]string{`[3,6]`, `[3,4]`, `[3,6,1.5]`, `[0,0]`, `[9]`, `[1,2,3,4,5,6]`}},
		{"an object's property", `{"type": "array", "contains": {"type": "object", "required": ["id"]}, "maxItems": 3}`,
			[]string{`[{"id":1}]`, `[{},{"id":"x"}]`, `[{}]`, `[1,2,{"id":1},4]`, `[[{"id":1}]]`}},
		{"an if without then", `{"contains": {"if": false, "else": {"type": "string"}}}`,
			[]string{`["a"]`, `[1]`, `[1,"b"]`, `[]`}},
	} {
		agreesWithValidator(t, tc.name, tc.schema, tc.instances)
	}
}
