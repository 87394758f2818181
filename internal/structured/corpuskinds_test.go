package structured

import "testing"

// TestCorpusKinds compiles schemas of the kinds a JSONSchemaBench-like
// corpus holds (Kubernetes definitions, Snowplow's self-describing
// schemas, function-calling parameters) and checks answers against each:
// none is refused for a keyword that is an annotation or an extension.
func TestCorpusKinds(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
	}{
		{name: "Kubernetes int-or-string and x-kubernetes extensions",
			schema: `{"type":"object","properties":{
				"port":{"format":"int-or-string","x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},
				"labels":{"type":"object","additionalProperties":{"type":"string"},"x-kubernetes-map-type":"atomic"},
				"finalizers":{"type":"array","items":{"type":"string"},"x-kubernetes-list-type":"set"}},
				"x-kubernetes-group-version-kind":[{"group":"","kind":"Service","version":"v1"}]}`,
			ok:      []string{`{"port":8080}`, `{"port":"http"}`, `{"labels":{"a":"b"},"finalizers":["x"]}`},
			refused: []string{`{"port":1.5}`, `{"labels":{"a":1}}`}},
		{name: "Snowplow's self-describing schema, read as draft 4",
			schema: `{"$schema":"http://iglucentral.com/schemas/com.snowplowanalytics.self-desc/schema/jsonschema/1-0-0#",
				"self":{"vendor":"com.acme","name":"click","format":"jsonschema","version":"1-0-0"},
				"type":"object","properties":{
				"name":{"type":"string","maxLength":4096},
				"page":{"type":"string","format":"uri","maxLength":8192},
				"mail":{"type":"string","format":"email","maxLength":255},
				"id":{"type":["string","null"],"format":"uuid"},
				"n":{"type":"integer","minimum":0,"exclusiveMinimum":true},
				"at":{"type":"string","format":"date-time"}},
				"required":["name"],"additionalProperties":false}`,
			ok: []string{`{"name":"a","id":"123e4567-e89b-12d3-a456-426614174000","n":1,"at":"2024-01-01T00:00:00Z"}`, `{"name":"b","id":null}`, `{"name":"c","page":"https://a.example/x?y=1","mail":"a@b.co"}`},
			// Draft 4: 1.0 is no integer, a boolean exclusiveMinimum bars 0.
			refused: []string{`{"name":"a","n":1.0}`, `{"name":"a","n":0}`, `{"name":"a","id":"x"}`, `{"name":"a","at":"yesterday"}`, `{"name":"a","x":1}`, `{"name":"a","page":"not a uri"}`, `{"name":"a","mail":"ab.co"}`}},
		{name: "an array keyword beside an enum of strings, as GitHub's hook events",
			schema:  `{"type":"array","items":{"type":"string","enum":["*","push"],"minItems":1}}`,
			ok:      []string{`[]`, `["push","*"]`},
			refused: []string{`["pull"]`, `[1]`}},
		{name: "function-calling parameters",
			schema: `{"type":"object","properties":{"location":{"type":"string","description":"The city"},
				"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":14}},
				"required":["location"]}`,
			ok:      []string{`{"location":"Paris"}`, `{"location":"Paris","unit":"celsius","days":3}`},
			refused: []string{`{"unit":"celsius"}`, `{"location":"Paris","unit":"kelvin"}`, `{"location":"Paris","days":15}`}},
	} {
		g, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkTexts(t, g, tc.ok, tc.refused)
	}
}
