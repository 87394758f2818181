package structured

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/genq/genq/internal/structured/ajvtest"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// accepts tells whether g takes text whole.
func accepts(g *grammar.Grammar, text string) bool {
	m := g.NewMatcher()
	return m.Advance([]byte(text)) && m.Accepting()
}

// escaped is text with every character of its strings written as a \u
// escape: the same JSON value, spelled as the pattern automata do not.
func escaped(text string) string {
	var out strings.Builder
	in := false
	for i := 0; i < len(text); {
		ch := text[i]
		switch {
		case !in:
			in = ch == '"'
			out.WriteByte(ch)
			i++
		case ch == '"':
			in = false
			out.WriteByte(ch)
			i++
		case ch == '\\': // an escape already: kept
			n := 2
			if i+1 < len(text) && text[i+1] == 'u' {
				n = 6
			}
			out.WriteString(text[i:min(len(text), i+n)])
			i += n
		default:
			r, size := utf8.DecodeRuneInString(text[i:])
			if r > 0xFFFF {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
			} else {
				fmt.Fprintf(&out, `\u%04x`, r)
			}
			i += size
		}
	}
	return out.String()
}

// loweredSchemas use the keywords lowering enforces, each with instances
// on both sides of it.
var loweredSchemas = []struct {
	name      string
	schema    string
	instances []string
}{
	{"not type", `{"not": {"type": ["string", "null"]}}`,
		[]string{`1`, `"a"`, `null`, `{}`, `[]`, `true`}},
	{"not const string", `{"not": {"const": "ab"}}`,
		[]string{`"ab"`, `"a"`, `"abc"`, `""`, `1`, `null`}},
	{"not enum of values", `{"type": ["string", "number", "object", "array"], "not": {"enum": ["x", 2, 2.5, {"a": 1}, [1, "b"]]}}`,
		[]string{`"x"`, `"y"`, `2`, `2.0`, `3`, `2.25`, `2.5`, `-2`, `{"a":1}`, `{"a":2}`, `{"a":1,"b":1}`, `{}`, `[1,"b"]`, `[1]`, `[1,"c"]`, `[1,"b",3]`}},
	{"not required", `{"type": "object", "not": {"required": ["a", "b"]}}`,
		[]string{`{}`, `{"a":1}`, `{"b":1}`, `{"a":1,"b":2}`, `{"a":1,"c":2}`}},
	{"not pattern", `{"type": "string", "not": {"pattern": "^a[0-9]+$"}}`,
		[]string{`"a1"`, `"a12"`, `"a"`, `"b1"`, `"a1x"`, `""`}},
	{"not bounds", `{"not": {"minimum": 3, "maxLength": 2}}`,
		[]string{`1`, `3`, `2.999`, `"ab"`, `"abc"`, `null`}},
	{"not of anyOf", `{"not": {"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string", "minLength": 2}]}}`,
		[]string{`5`, `10`, `"a"`, `"ab"`, `1.5`, `{}`}},
	{"not of allOf", `{"type": "object", "not": {"allOf": [{"required": ["a"]}, {"properties": {"a": {"type": "string"}}}]}}`,
		[]string{`{}`, `{"a":"x"}`, `{"a":1}`, `{"b":"x"}`}},
	{"not properties", `{"type": "object", "not": {"properties": {"a": {"const": 1}}}}`,
		[]string{`{}`, `{"a":1}`, `{"a":2}`, `{"a":"1"}`, `{"b":1}`}},
	{"not contains", `{"type": "array", "not": {"contains": {"const": 0}, "minContains": 2}}`,
		[]string{`[]`, `[0]`, `[0,0]`, `[0,1,0]`, `[1,2]`}},
	{"if then else", `{"if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]}, "then": {"required": ["x"]}, "else": {"required": ["y"]}}`,
		[]string{`{"kind":"a","x":1}`, `{"kind":"a","y":1}`, `{"kind":"b","y":1}`, `{"kind":"b","x":1}`, `{"y":1}`, `{}`, `3`}},
	{"dependentSchemas", `{"type": "object", "dependentSchemas": {"card": {"required": ["billing"], "properties": {"billing": {"type": "string"}}}}}`,
		[]string{`{}`, `{"card":1}`, `{"card":1,"billing":"x"}`, `{"card":1,"billing":2}`, `{"billing":2}`}},
	{"overlapping oneOf", `{"oneOf": [{"type": "integer"}, {"minimum": 2}, {"type": "string", "maxLength": 1}]}`,
		[]string{`1`, `3`, `2.5`, `0.5`, `"a"`, `"ab"`, `null`}},
	{"unevaluatedProperties with allOf and anyOf", `{"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}}], "anyOf": [{"properties": {"b": true}, "required": ["b"]}, {"properties": {"c": true}, "required": ["c"]}], "unevaluatedProperties": false}`,
		[]string{`{"b":1}`, `{"a":1,"c":2}`, `{"a":1,"b":2,"c":3}`, `{"a":1,"b":2,"d":3}`, `{"a":"x","b":1}`, `{"a":1}`}},
	{"unevaluatedProperties with if", `{"type": "object", "if": {"properties": {"t": {"const": 1}}, "required": ["t"]}, "then": {"properties": {"u": true}}, "unevaluatedProperties": false}`,
		[]string{`{"t":1}`, `{"t":1,"u":2}`, `{"t":2}`, `{"t":2,"u":2}`, `{}`, `{"u":1}`}},
	{"unevaluatedItems with prefixItems", `{"type": "array", "prefixItems": [{"type": "string"}], "anyOf": [{"prefixItems": [true, {"type": "number"}]}], "unevaluatedItems": false}`,
		[]string{`["a"]`, `["a",1]`, `["a",1,2]`, `[1]`, `["a","b"]`, `[]`}},
	{"oneOf of a user and an empty object", `{"oneOf": [{"type": "object", "properties": {"login": {"type": "string"}}, "required": ["login"]}, {"type": "object", "properties": {}, "additionalProperties": false}]}`,
		[]string{`{}`, `{"login":"a"}`, `{"login":1}`, `{"x":1}`, `null`}},
	{"oneOf of closed objects apart by a required name", `{"oneOf": [{"type": "object", "properties": {"login": {"type": "string"}, "id": {"type": "integer"}}, "required": ["login", "id"], "additionalProperties": false}, {"type": "object", "properties": {"name": {"type": "string"}, "id": {"type": "integer"}}, "required": ["name"], "additionalProperties": false}]}`,
		[]string{`{"login":"a","id":1}`, `{"name":"t"}`, `{"name":"t","id":2}`, `{"login":"a","name":"t","id":1}`, `{"id":1}`, `{}`}},
	{"not an empty object", `{"type": "object", "not": {"additionalProperties": false}}`,
		[]string{`{}`, `{"a":1}`}},
	{"not integer", `{"not": {"type": "integer"}}`,
		[]string{`1`, `1.0`, `1.5`, `-0.25`, `"1"`, `null`}},
	{"not enum beside bounds", `{"type": "integer", "minimum": 0, "maximum": 5, "not": {"enum": [2, 3]}}`,
		[]string{`0`, `1`, `2`, `3`, `4`, `5`, `6`}},
}

// TestLoweredRefusals: what lowering cannot say exactly is refused, and
// the error names the keyword.
func TestLoweredRefusals(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"not over additionalProperties", `{"not": {"properties": {"a": true}, "additionalProperties": false}}`, `not over "additionalProperties"`},
		{"not over uniqueItems", `{"not": {"uniqueItems": true}}`, `not over "uniqueItems"`},
		{"not over an asserted format", `{"not": {"format": "date"}}`, `not over "format"`},
		{"not over patternProperties", `{"not": {"patternProperties": {"^a": {"type": "string"}}}}`, `not over "patternProperties"`},
		{"not over items after prefixItems", `{"not": {"prefixItems": [true], "items": {"type": "string"}}}`, `not over "items"`},
		{"unevaluatedItems beside contains", `{"contains": {"type": "string"}, "unevaluatedItems": false}`, `unevaluatedItems beside contains`},
		{"anyOf of many beside unevaluatedProperties", `{"anyOf": [{"properties": {"a": true}}, {"properties": {"b": true}}, {"properties": {"c": true}}, {"properties": {"d": true}}, {"properties": {"e": true}}, {"properties": {"f": true}}, {"properties": {"g": true}}], "unevaluatedProperties": false}`, `anyOf of 7 branches`},
		{"not that leads back to itself", `{"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"}`, `leads back to itself`},
	} {
		_, err := Compile([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestLoweredAgainstAjv checks lowered schemas against ajv, a validator
// written apart from genq: on each listed instance genq and ajv agree,
// each instance spelled with escapes is accepted only where ajv accepts
// it, and random walks through each grammar write only what ajv accepts.
func TestLoweredAgainstAjv(t *testing.T) {
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	var lines []ajvtest.Line
	var got [][]bool
	var exact []int // how many of each line's answers genq must agree on
	for i, tc := range loweredSchemas {
		schema := `{"$schema": "https://json-schema.org/draft/2020-12/schema", ` + tc.schema[1:]
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		line := ajvtest.Line{Schema: json.RawMessage(schema)}
		var accepted []bool
		for _, in := range tc.instances {
			line.Answers = append(line.Answers, in)
			accepted = append(accepted, accepts(g, in))
		}
		for _, in := range tc.instances {
			line.Answers = append(line.Answers, escaped(in))
			accepted = append(accepted, accepts(g, escaped(in)))
		}
		for w := range 16 {
			out, ok := walk(t, g, v, toks, eos, rand.New(rand.NewPCG(uint64(i), uint64(w))), 300, nil)
			if ok {
				line.Answers = append(line.Answers, string(out))
				accepted = append(accepted, true)
			}
		}
		lines, got, exact = append(lines, line), append(got, accepted), append(exact, len(tc.instances))
	}
	checkAgainstAjv(t, lines, got, exact, func(i int) string { return loweredSchemas[i].name }, nil)
}

// checkAgainstAjv validates lines' answers with ajv: an answer genq
// accepted (got) must be valid, and the first exact of each line's
// answers valid exactly where genq accepted them.
func checkAgainstAjv(t *testing.T, lines []ajvtest.Line, got [][]bool, exact []int, name func(int) string, fallback func(i int)) {
	t.Helper()
	errs, ran := ajvtest.Check(t, lines)
	if !ran {
		t.Skip("ajv cannot run: npm ci in test/structured")
	}
	for i, line := range lines {
		if !ajvRead(errs[i]) && fallback != nil {
			fallback(i)
			continue
		}
		if !ajvRead(errs[i]) {
			t.Errorf("%s: %s", name(i), errs[i][0])
			continue
		}
		for j, answer := range line.Answers {
			valid := errs[i][j] == ""
			switch {
			case got[i][j] && !valid:
				t.Errorf("%s: genq accepts %s, which ajv refuses: %s", name(i), answer, errs[i][j])
			case j < exact[i] && valid && !got[i][j]:
				t.Errorf("%s: genq refuses %s, which ajv accepts", name(i), answer)
			}
		}
	}
}

// TestSuiteAgainstAjv takes every schema of the JSON Schema Test Suite
// that genq compiles and checks what genq accepts beyond the suite's own
// instances: the instances spelled with escapes (against the suite's
// verdict), and random walks through the grammar (against ajv's).
func TestSuiteAgainstAjv(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(suiteDir(), "*.json"))
	if len(files) == 0 {
		t.Skipf("no JSON Schema Test Suite at %s (JSONSCHEMA_SUITE)", suiteDir())
	}
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	var lines []ajvtest.Line
	var got [][]bool
	var names []string
	for fi, file := range files {
		groups := readSuiteFile(t, file)
		for gi, grp := range groups {
			g, err := Compile(grp.Schema)
			if err != nil {
				continue
			}
			line := ajvtest.Line{Schema: grp.Schema}
			var accepted []bool
			for _, tc := range grp.Tests {
				var text bytes.Buffer
				if err := json.Compact(&text, tc.Data); err != nil {
					t.Fatal(err)
				}
				// The same value spelled otherwise: the suite says whether
				// it is valid.
				if in := escaped(text.String()); accepts(g, in) && !tc.Valid {
					t.Errorf("%s / %s / %s: genq accepts %s", filepath.Base(file), grp.Description, tc.Description, in)
				}
			}
			for w := range 8 {
				out, ok := walk(t, g, v, toks, eos, rand.New(rand.NewPCG(uint64(fi<<16|gi), uint64(w))), 300, nil)
				if ok {
					line.Answers = append(line.Answers, string(out))
					accepted = append(accepted, true)
				}
			}
			if bytes.Contains(grp.Schema, []byte(`"$dynamicRef"`)) || fractionalMultipleIn(grp.Schema) {
				// ajv 8 recurses without end on some $dynamicRefs, and
				// divides in doubles where the suite's multipleOf cases
				// are exact (0.0075 is a multiple of 0.0001; to ajv
				// 3453457034512671 is none of 1e-8): the Go validator,
				// exact on both, checks these.
				checkWithValidator(t, grp.Schema, line.Answers, filepath.Base(file)+" / "+grp.Description)
				continue
			}
			lines, got = append(lines, line), append(got, accepted)
			names = append(names, filepath.Base(file)+" / "+grp.Description)
		}
	}
	// Where ajv cannot compile a schema (some of ref.json's, whose $ids
	// it recurses through without end), the Go validator checks it.
	checkAgainstAjv(t, lines, got, make([]int, len(lines)), func(i int) string { return names[i] }, func(i int) {
		checkWithValidator(t, lines[i].Schema, lines[i].Answers, names[i])
	})
}

// checkWithValidator checks that the validator relaxed tools use takes
// every one of answers, which genq accepted, against schema.
func checkWithValidator(t *testing.T, schema json.RawMessage, answers []string, name string) {
	t.Helper()
	v, err := compileValidator(schema)
	if err != nil {
		t.Errorf("%s: the validator: %v", name, err)
		return
	}
	for _, answer := range answers {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(answer))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Validate(inst); err != nil {
			t.Errorf("%s: genq accepts %s, which the validator refuses: %v", name, answer, err)
		}
	}
}

// fractionalMultipleIn tells whether schema has a multipleOf that is not
// whole.
func fractionalMultipleIn(schema []byte) bool {
	root, err := parseJSON(schema)
	if err != nil {
		return false
	}
	var walk func(v *value) bool
	walk = func(v *value) bool {
		for _, m := range v.obj {
			if r, ok := new(big.Rat).SetString(m.val.num.String()); m.key == "multipleOf" && m.val.kind == 'n' && ok && !r.IsInt() {
				return true
			}
			if walk(m.val) {
				return true
			}
		}
		return slices.ContainsFunc(v.arr, walk)
	}
	return walk(root)
}

// ajvRead tells a line's results from ajv's refusal to compile its schema.
func ajvRead(results []string) bool {
	return len(results) == 0 || !strings.HasPrefix(results[0], "ajv cannot compile the schema")
}

// randomSchema builds a schema of the keywords lowering takes apart over
// small plain ones, depth levels deep, for TestLoweredRandomAgainstAjv.
func randomSchema(rng *rand.Rand, depth int) string {
	atoms := []string{
		`{"type": "string"}`, `{"type": ["integer", "null"]}`, `{"type": "object"}`, `{"type": "array"}`,
		`{"minimum": 1}`, `{"exclusiveMaximum": 2}`, `{"const": 1}`, `{"enum": ["a", 2, null]}`,
		`{"const": {"a": 1}}`, `{"const": [1, "a"]}`, `{"minLength": 2}`, `{"maxLength": 1}`,
		`{"pattern": "^a"}`, `{"required": ["a"]}`, `{"minProperties": 2}`, `{"maxItems": 1}`,
		`{"minItems": 2}`, `{"properties": {"a": {"type": "integer"}}}`, `{"items": {"type": "integer"}}`,
		`{"prefixItems": [{"const": 1}]}`, `{"contains": {"type": "string"}}`, `{"dependentRequired": {"a": ["b"]}}`,
		`{"type": "object", "properties": {"a": true}, "additionalProperties": false}`, `true`, `false`,
		`{"const": "a\"b"}`, `{"enum": [1.5, "é"]}`, `{"minimum": 1.5}`, `{"contains": {"const": 1}, "maxContains": 1}`,
		`{"patternProperties": {"^b": {"type": "integer"}}}`, `{"propertyNames": {"maxLength": 1}}`,
		`{"multipleOf": 2}`, `{"$ref": "#/$defs/x"}`, `{"type": "object", "additionalProperties": false}`,
	}
	if depth == 0 || rng.IntN(3) == 0 {
		return atoms[rng.IntN(len(atoms))]
	}
	sub := func() string { return randomSchema(rng, depth-1) }
	switch rng.IntN(9) {
	case 0, 1:
		return `{"not": ` + sub() + `}`
	case 2:
		return `{"anyOf": [` + sub() + `, ` + sub() + `]}`
	case 3:
		return `{"allOf": [` + sub() + `, ` + sub() + `]}`
	case 4:
		return `{"oneOf": [` + sub() + `, ` + sub() + `]}`
	case 5:
		return `{"if": ` + sub() + `, "then": ` + sub() + `, "else": ` + sub() + `}`
	case 6:
		return `{"dependentSchemas": {"a": ` + sub() + `}}`
	case 7:
		return `{"properties": {"a": ` + sub() + `}, "anyOf": [` + sub() + `, {"properties": {"b": true}}], "unevaluatedProperties": false}`
	}
	return `{"prefixItems": [true], "allOf": [` + sub() + `], "unevaluatedItems": {"type": "integer"}}`
}

// TestLoweredRandomAgainstValidator compiles random schemas of not, if,
// oneOf, anyOf, allOf, dependentSchemas and unevaluated keywords and
// checks every one genq compiles on a pool of instances, each also
// spelled with escapes, against the JSON Schema validator relaxed tools
// are checked with (written apart from genq's compiler, exact on the
// suite): genq must accept none that it refuses. What genq refuses that
// it accepts (objects' other properties before listed ones, escapes
// beside a refused pattern) is counted.
func TestLoweredRandomAgainstValidator(t *testing.T) {
	pool := []string{`null`, `true`, `false`, `0`, `1`, `1.0`, `2`, `2.5`, `-1`, `3`, `""`, `"a"`, `"ab"`, `"b"`, `"abc"`,
		`[]`, `[1]`, `[1,"a"]`, `[1,2]`, `["a"]`, `[null,1]`, `[1,1,1]`, `{}`, `{"a":1}`, `{"a":"x"}`, `{"b":1}`,
		`{"a":1,"b":2}`, `{"b":2,"a":1}`, `{"a":null}`, `{"c":[1]}`, `{"a":1,"c":1}`, `{"a":[1,"a"]}`,
		`1.5`, `1.50`, `4`, `"a\"b"`, `"é"`, `[1,1]`, `{"b":"x"}`, `{"bb":1}`, `{"a":{"a":1}}`}
	for _, in := range slices.Clone(pool) {
		pool = append(pool, escaped(in))
	}
	rng := rand.New(rand.NewPCG(52, 4))
	const n = 1500
	compiled, missed := 0, 0
	for range n {
		schema := `{"$defs": {"x": {"type": "integer", "minimum": 0}}, "allOf": [` + randomSchema(rng, 4) + `]}`
		g, err := Compile([]byte(schema))
		if err != nil {
			continue
		}
		compiled++
		v, err := compileValidator([]byte(schema))
		if err != nil {
			t.Fatalf("%s: the validator: %v", schema, err)
		}
		for _, in := range pool {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			valid := v.Validate(inst) == nil
			switch got := accepts(g, in); {
			case got && !valid:
				t.Errorf("%s: genq accepts %s, which the validator refuses", schema, in)
			case !got && valid:
				missed++
			}
		}
	}
	t.Logf("%d of %d random schemas compiled; %d instances valid but refused by genq, of %d", compiled, n, missed, compiled*len(pool))
	if compiled < n/2 {
		t.Errorf("only %d of %d random schemas compiled: the test says too little", compiled, n)
	}
}
