package structured

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/ajvtest"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/vocabtest"
)

type corpusEntry struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

func loadCorpus(t testing.TB) []corpusEntry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c []corpusEntry
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// walk generates one answer by picking uniformly among the allowed tokens,
// as a random-weight model at temperature 1 would under the constraint. It
// checks at every step that the mask is not empty and that the picked token
// is taken by the matcher.
func walk(t *testing.T, g *grammar.Grammar, v *grammar.Vocab, toks [][]byte, eos int32, rng *rand.Rand, maxSteps int, check func(m *grammar.Matcher, mask []uint64)) ([]byte, bool) {
	t.Helper()
	m := g.NewMatcher()
	mask := make([]uint64, (v.Size()+63)/64)
	var out []byte
	for step := 0; step < maxSteps; step++ {
		m.Mask(v, mask)
		if check != nil {
			check(m, mask)
		}
		ids := vocabtest.Allowed(mask)
		if len(ids) == 0 {
			t.Fatalf("empty mask after %q", out)
		}
		id := ids[rng.IntN(len(ids))]
		if id == eos {
			if !m.Accepting() {
				t.Fatalf("eos allowed where the grammar does not accept, after %q", out)
			}
			return out, true
		}
		if !m.Advance(toks[id]) {
			t.Fatalf("the mask allowed %q after %q but the matcher refuses it", toks[id], out)
		}
		out = append(out, toks[id]...)
	}
	return out, false
}

// bruteForce checks a mask token by token: a token is allowed exactly when
// a clone of the matcher takes its bytes, and eos exactly when it accepts.
func bruteForce(t *testing.T, m *grammar.Matcher, mask []uint64, toks [][]byte, eos int32, ctx string) {
	t.Helper()
	for id, tok := range toks {
		want := false
		if int32(id) == eos {
			want = m.Accepting()
		} else if len(tok) > 0 {
			want = m.Clone().Advance(tok)
		}
		got := mask[id>>6]&(1<<(id&63)) != 0
		if got != want {
			t.Fatalf("%s: token %q: mask says %v, the matcher says %v", ctx, tok, got, want)
		}
	}
}

// TestCorpusRandomWalk drives random walks through every schema of the
// corpus: every answer that ends must be JSON that validates under ajv,
// and the masks along the first walks must equal a token-by-token check.
func TestCorpusRandomWalk(t *testing.T) {
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	corpus := loadCorpus(t)
	const walks, maxSteps = 24, 400
	var lines []ajvtest.Line
	finished, length := 0, 0
	for ci, c := range corpus {
		g, err := Compile(c.Schema)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		line := ajvtest.Line{Schema: c.Schema}
		for w := 0; w < walks; w++ {
			rng := rand.New(rand.NewPCG(uint64(ci), uint64(w)))
			var check func(*grammar.Matcher, []uint64)
			if w < 3 {
				step := 0
				check = func(m *grammar.Matcher, mask []uint64) {
					step++
					bruteForce(t, m, mask, toks, eos, c.Name)
				}
			}
			out, ok := walk(t, g, v, toks, eos, rng, maxSteps, check)
			if !ok {
				length++
				continue
			}
			finished++
			if !json.Valid(out) {
				t.Errorf("%s: walk %d wrote invalid JSON %q", c.Name, w, out)
			}
			line.Answers = append(line.Answers, string(out))
		}
		lines = append(lines, line)
	}
	errs, ran := ajvtest.Check(t, lines)
	valid := 0
	if ran {
		for i, e := range errs {
			for j, msg := range e {
				if msg != "" {
					t.Errorf("%s: ajv refuses %q: %s", corpus[i].Name, lines[i].Answers[j], msg)
				} else {
					valid++
				}
			}
		}
		t.Logf("%d schemas, %d walks: %d finished, %d valid under ajv, %d hit the step cap", len(corpus), len(corpus)*walks, finished, valid, length)
	} else {
		t.Logf("%d schemas, %d walks: %d finished (all JSON), %d hit the step cap; ajv not run: npm ci in test/structured", len(corpus), len(corpus)*walks, finished, length)
	}
	if finished < len(corpus)*walks/2 {
		t.Errorf("only %d of %d walks finished: the walks say too little", finished, len(corpus)*walks)
	}
}

func TestJSONObject(t *testing.T) {
	toks, eos := vocabtest.Small()
	v := grammar.NewVocab(toks, []int32{eos})
	g := CompileJSONObject()
	for w := 0; w < 40; w++ {
		rng := rand.New(rand.NewPCG(7, uint64(w)))
		out, ok := walk(t, g, v, toks, eos, rng, 400, nil)
		if !ok {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(out, &obj); err != nil || obj == nil {
			t.Errorf("%q is not a JSON object: %v", out, err)
		}
	}
}

func TestMatcher(t *testing.T) {
	g, err := Compile([]byte(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":2}},"required":["b"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text   string
		ok     bool // every byte taken
		accept bool // may end after it
	}{
		{`{"b":"xy"}`, true, true},
		{`{"a":1,"b":""}`, true, true},
		{`{ "a" : -12 ,` + "\n  " + `"b":"é"}`, true, true},
		{`{"b":"xyz"}`, false, false},
		{`{"a":1}`, false, false},
		{`{"b":"x","a":1}`, true, true}, // members in any order
		{`{"b":"x","b":"y"}`, false, false},
		{`{"a":1,"b":"","a":2}`, false, false},
		{`{"a":01,"b":""}`, false, false},
		{`{"b":""}  `, false, false},
		{`{"b":""`, true, false},
		{`{   "b":""}`, false, false},
		{"{\n" + strings.Repeat(" ", maxIndent) + `"b":""}`, true, true},
		{"{\n" + strings.Repeat(" ", maxIndent+1) + `"b":""}`, false, false},
		{`{"b":"\u00e9"}`, true, true},
		{`{"b":"\ud800"}`, false, false},
		{"{\"b\":\"\xff\"}", false, false},
		{"{\"b\":\"\x01\"}", false, false},
	}
	for _, tt := range tests {
		m := g.NewMatcher()
		ok := true
		for i := 0; i < len(tt.text) && ok; i++ {
			ok = m.Advance([]byte{tt.text[i]})
		}
		if ok != tt.ok || (ok && m.Accepting() != tt.accept) {
			t.Errorf("%q: took %v accepting %v; want %v %v", tt.text, ok, m.Accepting(), tt.ok, tt.accept)
		}
		// The whole text at once agrees with byte by byte, and a refusal
		// leaves the matcher where it was.
		m2 := g.NewMatcher()
		before := m2.Clone()
		if got := m2.Advance([]byte(tt.text)); got != tt.ok {
			t.Errorf("%q at once: %v", tt.text, got)
		}
		if !tt.ok && (m2.Accepting() != before.Accepting() || !m2.Advance([]byte(`{"b":"x"}`)) || !m2.Accepting()) {
			t.Errorf("%q: a refused Advance changed the matcher", tt.text)
		}
	}
}

func TestBadSchemas(t *testing.T) {
	var props []string
	for c := 'a'; c <= 'z'; c++ {
		// Distinct bounds: equal ones would share one rule.
		props = append(props, `"`+string(c)+`":{"type":"string","maxLength":`+strconv.Itoa(1000-int(c-'a'))+`}`)
	}
	manyStates := `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
	big := `{"type":"object","properties":{` + strings.Repeat(`"p":{"type":"string"},`, 60000) + `"q":{"type":"string"}}}`
	tests := []struct {
		name, schema, want string
	}{
		{"unsupported keyword", `{"type":"array","items":{"$recursiveRef":"#"}}`, `"$recursiveRef"`},
		{"$dynamicRef to nothing", `{"type":"array","items":{"$dynamicRef":"#a"}}`, `$dynamicRef "#a" points to nothing`},
		{"not of what no schema says", `{"type":"array","not":{"uniqueItems":true}}`, `not over "uniqueItems"`},
		{"dependentRequired not names", `{"dependentRequired":{"a":[1]}}`, "arrays of names"},
		{"multipleOf of too many digits", `{"type":"number","multipleOf":1.0001}`, "multipleOf 1.0001 is not supported"},
		{"multipleOf with no decimal form", `{"type":"number","multipleOf":1e-20}`, "multipleOf 1e-20 is not supported"},
		{"unsupported nested", `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`, `"uniqueItems" (at #/properties/a)`},
		{"uniqueItems of strings", `{"type":"array","items":{"type":"string"},"uniqueItems":true}`, `"uniqueItems" (at #)`},
		{"uniqueItems of too many values", `{"type":"array","items":{"enum":[0,1,2,3,4,5,6,7,8,9,10]},"uniqueItems":true}`, `"uniqueItems" (at #)`},
		{"contains a range, at most twice", `{"contains":{"minimum":5},"maxContains":2}`, `"contains" (at #)`},
		{"contains beside prefixItems", `{"prefixItems":[{}],"contains":{"const":1}}`, `"contains" (at #)`},
		{"minContains not a count", `{"contains":{"const":1},"minContains":-1}`, "minContains must be a non-negative integer"},
		{"uniqueItems not a boolean", `{"type":"array","uniqueItems":1}`, "uniqueItems must be a boolean"},
		{"pattern lookahead", `{"type":"string","pattern":"(?=a)"}`, "not a supported regular expression"},
		{"pattern backreference", `{"type":"string","pattern":"(a)\\1"}`, `escape \1`},
		{"pattern word boundary", `{"type":"string","pattern":"\\ba"}`, `escape \b`},
		{"pattern case fold", `{"type":"string","pattern":"(?i)a"}`, "case-insensitive"},
		{"pattern anchor inside", `{"type":"string","pattern":"a^b"}`, "anchor"},
		{"pattern posix", `{"type":"string","pattern":"[[:alpha:]]"}`, "POSIX"},
		{"pattern empty class", `{"type":"string","pattern":"[]a]"}`, "empty class"},
		{"oneOf of branches whose negation no schema says", `{"oneOf":[{"type":"array"},{"uniqueItems":true}]}`, `not over "uniqueItems"`},
		{"allOf of types with nothing in common", `{"allOf":[{"type":"string"},{"type":"integer"}]}`, "nothing in common"},
		{"allOf of two formats", `{"allOf":[{"format":"date"},{"format":"email"}]}`, `allOf with "format" in two schemas`},
		{"allOf of two consts", `{"allOf":[{"const":1},{"const":2}]}`, "never be satisfied"},
		{"allOf of patterns and a closed schema", `{"allOf":[{"patternProperties":{"^x":{}}},{"properties":{"a":{}},"additionalProperties":false}]}`, "patternProperties and another schema's additionalProperties"},
		{"more required than maxProperties", `{"type":"object","properties":{"a":{},"b":{}},"required":["a","b"],"maxProperties":1}`, "never be satisfied"},
		{"empty enum", `{"enum":[]}`, "never be satisfied"},
		{"empty anyOf", `{"anyOf":[]}`, "anyOf"},
		{"ref to nowhere", `{"$ref":"#/$defs/missing"}`, `points to nothing`},
		{"ref outside", `{"$ref":"other.json#/a"}`, `not supported`},
		{"oversized", big, "limit"},
		{"not json", `{"type":`, "not valid JSON"},
		{"trailing", `{} {}`, "one JSON value"},
		{"false", `false`, "never be satisfied"},
		{"unknown type", `{"type":"date"}`, `unknown type "date"`},
		{"empty type list", `{"type":[]}`, "empty type list"},
		{"required, closed out", `{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}`, "never be satisfied"},
		{"required unsatisfiable", `{"type":"object","properties":{"a":false},"required":["a"]}`, "never be satisfied"},
		{"infinite recursion", `{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`, "never be satisfied"},
		{"ref loop", `{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}}}`, "refers back to itself"},
		{"length inverted", `{"type":"string","minLength":3,"maxLength":2}`, "maxLength (2) is below minLength (3)"},
		{"items inverted", `{"type":"array","minItems":3,"maxItems":1}`, "maxItems (1) is below minItems (3)"},
		{"huge maxLength", `{"type":"string","maxLength":2000000}`, "at most"},
		{"negative count", `{"type":"array","minItems":-1}`, "non-negative"},
		{"enum type mismatch", `{"type":"string","enum":[1,2]}`, "never be satisfied"},
		{"enum with sibling", `{"enum":[{"a":1}],"minProperties":1}`, `"minProperties" beside it`},
		{"ref with sibling", `{"$ref":"#","minItems":1}`, `"minItems" beside it`},
		{"schema not object", `{"type":"object","properties":{"a":3}}`, "must be an object or a boolean"},
		{"duplicate key", `{"type":"string","type":"number"}`, `repeats the key "type"`},
		{"deep", strings.Repeat(`{"items":`, 80) + `{}` + strings.Repeat(`}`, 80), "nests deeper"},
		{"too many states", manyStates, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile([]byte(tt.schema))
			if err == nil {
				t.Fatalf("compiled")
			}
			if genq.ErrorCode(err) != genq.Invalid {
				t.Errorf("code %q, want invalid: %v", genq.ErrorCode(err), err)
			}
			if msg := genq.ErrorMessage(err); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not say %q", msg, tt.want)
			}
		})
	}
}

// TestKeywordRules: JSON Schema's rules for keywords. An annotation, or a
// word JSON Schema does not know, changes nothing; a keyword constrains
// only values of the type it applies to.
func TestKeywordRules(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
	}{
		{"annotations and unknown words", `{"type":"object","$id":"https://x/y","x-vendor":{"a":1},"readonly":true,"example":{"a":"b"},` +
			`"properties":{"a":{"type":"string","format":"int64","contentMediaType":"text/plain","name":"A"}},"required":["a"]}`,
			[]string{`{"a":"anything"}`}, []string{`{}`, `{"a":1}`}},
		{"object keywords without type", `{"required":[],"properties":{"a":{"type":"integer"}}}`,
			[]string{`"a string"`, `12`, `[1,"x"]`, `null`, `true`, `{"a":3}`}, []string{`{"a":"x"}`}},
		{"string keywords without type", `{"maxLength":2}`, []string{`"ab"`, `123456`, `{"long":"value"}`}, []string{`"abc"`}},
		{"propertyNames listed", `{"propertyNames":{"enum":["a","b.c",1]},"maxProperties":2}`,
			[]string{`{"a":1}`, `{"b.c":[],"a":0}`, `{}`}, []string{`{"b":1}`, `{"bxc":1}`, `{"1":1}`, `{"ab":1}`}},
		{"propertyNames of no string", `{"propertyNames":{"enum":[1]}}`, []string{`{}`}, []string{`{"a":1}`, `{"":1}`}},
		{"propertyNames const and pattern", `{"propertyNames":{"const":"ab","pattern":"^a"}}`,
			[]string{`{"ab":1}`, `{}`}, []string{`{"a":1}`, `{"b":1}`}},
		{"$ref as a JSON pointer", `{"properties":{"a":{"type":"integer"},"b":{"$ref":"#/properties/a"},"c":{"$ref":"#/$defs/x%25y"}},"$defs":{"x%y":{"const":"z"}}}`,
			[]string{`{"a":1,"b":2,"c":"z"}`}, []string{`{"b":"x"}`, `{"c":"y"}`}},
		{"$ref to an $anchor", `{"items":{"$ref":"#item"},"$defs":{"i":{"$anchor":"item","type":"boolean"}}}`,
			[]string{`[true,false]`}, []string{`[1]`}},
		{"$ref beside other keywords", `{"$defs":{"s":{"type":"string","maxLength":3}},"$ref":"#/$defs/s","minLength":2}`,
			[]string{`"ab"`, `"abc"`}, []string{`"a"`, `"abcd"`, `12`}},
		{"a surrogate pair is one character", `{"type":"string","maxLength":2}`,
			[]string{`"\ud83d\udca9\uD83D\uDCA9"`, `"a\ud83d\ude00"`}, []string{`"\ud83d\udca9ab"`, `"\ud83d"`, `"\udca9\ud83d"`, `"\ud83da"`}},
		{"number keywords without type", `{"minimum":3}`, []string{`3`, `"1"`, `[1]`}, []string{`2`}},
		{"allOf with a $ref", `{"$defs":{"base":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}},` +
			`"allOf":[{"$ref":"#/$defs/base"},{"properties":{"b":{"type":"string"}},"required":["b"]}]}`,
			[]string{`{"a":1,"b":"x"}`}, []string{`{"a":1}`, `{"b":"x"}`, `{"a":"1","b":"x"}`}},
		{"allOf of bounds", `{"allOf":[{"type":"integer","minimum":2},{"type":"number","maximum":5}]}`, []string{`2`, `5`}, []string{`1`, `6`, `2.5`}},
		{"allOf with one closed branch", `{"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]}`,
			[]string{`{"a":1}`, `{}`}, []string{`{"b":1}`, `{"a":1,"b":1}`}},
		{"anyOf beside type", `{"type":"string","anyOf":[{"maxLength":2},{"pattern":"^x"}]}`, []string{`"ab"`, `"xyz"`}, []string{`"abc"`, `5`}},
		{"oneOf of a discriminator", `{"oneOf":[{"properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},` +
			`{"properties":{"kind":{"const":"b"}},"required":["kind"]}],"type":"object"}`,
			[]string{`{"kind":"a","x":1}`, `{"kind":"b"}`}, []string{`{"kind":"c"}`, `{"kind":"a","x":"1"}`}},
		{"oneOf of types", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, []string{`"s"`, `3`}, []string{`3.5`, `null`}},
		{"required, not listed", `{"type":"object","properties":{"a":{"type":"integer"}},"required":["b"],"additionalProperties":{"type":"string"}}`,
			[]string{`{"b":"x"}`, `{"a":1,"b":"x"}`, `{"a":1,"b":"x","c":"y"}`}, []string{`{"a":1}`, `{"b":1}`}},
		{"minProperties, maxProperties", `{"type":"object","properties":{"a":{},"b":{}},"minProperties":2,"maxProperties":3}`,
			[]string{`{"a":1,"b":2}`, `{"a":1,"c":3}`, `{"a":1,"b":2,"c":3}`, `{"x":1,"y":2}`}, []string{`{}`, `{"a":1}`, `{"a":1,"b":2,"c":3,"d":4}`}},
		{"minProperties of a map", `{"minProperties":1}`, []string{`{"k":1}`, `[]`}, []string{`{}`}},
		{"maxProperties 0", `{"type":"object","maxProperties":0}`, []string{`{}`}, []string{`{"a":1}`}},
		{"propertyNames", `{"type":"object","properties":{"id":{},"toolong":{}},"propertyNames":{"maxLength":4,"pattern":"^[a-z]+$"}}`,
			[]string{`{"id":1}`, `{"id":1,"ab":2}`, `{"abcd":1}`}, []string{`{"toolong":1}`, `{"abcde":1}`, `{"Ab":1}`}},
		{"propertyNames false", `{"propertyNames":false}`, []string{`{}`, `3`}, []string{`{"a":1}`}},
		{"multipleOf", `{"type":"integer","multipleOf":7}`, []string{`0`, `7`, `-14`, `700`, `70.0`}, []string{`1`, `-15`, `70.5`, `-0`}},
		{"multipleOf within bounds", `{"type":"integer","multipleOf":5,"minimum":-10,"exclusiveMaximum":20}`, []string{`-10`, `0`, `15`}, []string{`-15`, `20`, `12`}},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"minItems":1,"maxItems":3}`,
			[]string{`[1]`, `[1,"a"]`, `[1,"a",true]`}, []string{`[]`, `["a"]`, `[1,2]`, `[1,"a",3]`, `[1,"a",true,false]`}},
		{"prefixItems, no more", `{"prefixItems":[{"const":"x"}],"items":false}`, []string{`[]`, `["x"]`, `"not an array"`}, []string{`["x",1]`, `["y"]`}},
		{"draft 7's tuple", `{"type":"array","items":[{"type":"null"}],"additionalItems":{"type":"integer"}}`, []string{`[null]`, `[null,1,2]`}, []string{`[1]`, `[null,"a"]`}},
		{"items beside an allOf's prefix", `{"allOf":[{"prefixItems":[{"minimum":3}]}],"items":{"minimum":5}}`, []string{`[5,5]`}, []string{`[3,5]`, `[5,4]`}},
		{"patternProperties", `{"type":"object","properties":{"name":{"type":"string"},"x-id":{"type":"string"}},"patternProperties":{"^x-":{"maxLength":3}}}`,
			[]string{`{"name":"n","x-a":"abc"}`, `{"x-b":"ab"}`, `{"name":"long name","x-id":"abc"}`, `{"other":1}`, `{"X-a":"abcd"}`},
			[]string{`{"x-a":"abcd"}`, `{"x-id":"abcd"}`, `{"name":"n","x-id":"a","x-id":"b"}`}},
		{"patternProperties told apart", `{"patternProperties":{"^a":{"type":"integer"},"b$":{"maximum":20}},"additionalProperties":{"type":"string"}}`,
			[]string{`{"a":21}`, `{"b":"x"}`, `{"ab":20}`, `{"b":20}`, `{"c":"x"}`},
			[]string{`{"a":"x"}`, `{"ab":21}`, `{"ab":"x"}`, `{"b":21}`, `{"c":1}`}},
		{"patternProperties of a closed object", `{"patternProperties":{"^a":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{"a":1}`, `{}`}, []string{`{"b":1}`, `{"a":"x"}`}},
		{"dependentRequired of a map", `{"dependentRequired":{"bar":["foo"]}}`,
			[]string{`{}`, `{"foo":1}`, `{"foo":1,"bar":2}`, `{"x":1}`, `{"foo":1,"bar":2,"x":3}`, `[]`, `"bar"`},
			[]string{`{"bar":2}`, `{"bar":2,"x":1}`, `{"x":1,"bar":2}`}},
		{"dependentRequired on an earlier property", `{"properties":{"a":{},"b":{}},"dependentRequired":{"b":["a"]}}`,
			[]string{`{}`, `{"a":1}`, `{"a":1,"b":2}`}, []string{`{"b":2}`}},
		{"dependentRequired on a later property", `{"properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}}`,
			[]string{`{}`, `{"b":2}`, `{"a":1,"b":2}`}, []string{`{"a":1}`, `{"a":1,"c":3}`}},
		{"dependentRequired of a required property", `{"properties":{"a":{},"b":{},"c":{}},"required":["a"],"dependentRequired":{"a":["c"],"b":["a"]}}`,
			[]string{`{"a":1,"c":3}`, `{"a":1,"b":2,"c":3}`}, []string{`{"a":1}`, `{"a":1,"b":2}`, `{"c":3}`}},
		{"dependentRequired, several", `{"type":"object","properties":{"x":{},"y":{},"z":{}},"additionalProperties":false,"dependentRequired":{"y":["x","z"],"z":["x"]}}`,
			[]string{`{}`, `{"x":1}`, `{"x":1,"z":1}`, `{"x":1,"y":1,"z":1}`}, []string{`{"y":1,"z":1}`, `{"x":1,"y":1}`, `{"z":1}`, `{"y":1}`}},
		{"dependentRequired on a closed-out name", `{"properties":{"a":{}},"additionalProperties":false,"dependentRequired":{"a":["q"]}}`,
			[]string{`{}`}, []string{`{"a":1}`, `{"a":1,"q":1}`, `{"q":1}`}},
		{"dependentRequired within maxProperties", `{"properties":{"a":{},"b":{},"c":{}},"maxProperties":2,"dependentRequired":{"a":["c"]}}`,
			[]string{`{"a":1,"c":1}`, `{"b":1,"c":1}`, `{"b":1}`}, []string{`{"a":1,"b":1}`, `{"a":1,"b":1,"c":1}`, `{"a":1}`}},
		{"draft 7's dependencies of names", `{"properties":{"a":{},"b":{}},"dependencies":{"b":["a"]}}`,
			[]string{`{"a":1,"b":2}`, `{"a":1}`}, []string{`{"b":2}`}},
		{"allOf of dependentRequired", `{"allOf":[{"dependentRequired":{"a":["b"]}},{"dependentRequired":{"a":["c"]}}]}`,
			[]string{`{"b":2,"c":3,"a":1}`, `{"b":2}`}, []string{`{"b":2,"a":1}`, `{"c":3,"a":1}`}},
		{"dependentRequired with escapes", `{"dependentRequired":{"foo\nbar":["foo\rbar"]}}`,
			[]string{`{"foo\rbar":2,"foo\nbar":1}`, `{"foo\rbar":2}`}, []string{`{"foo\nbar":1}`}},
		{"uniqueItems of an enum", `{"type":"array","items":{"enum":["a","b","c"]},"uniqueItems":true}`,
			[]string{`[]`, `["a"]`, `["c","a"]`, `["a","b","c"]`, `[ "b" , "a" ]`}, []string{`["a","a"]`, `["a","b","a"]`, `["d"]`, `["a","b","c","a"]`}},
		{"uniqueItems within minItems, maxItems", `{"type":"array","items":{"enum":["a","b","c"]},"uniqueItems":true,"minItems":2,"maxItems":2}`,
			[]string{`["a","b"]`, `["c","b"]`}, []string{`["a"]`, `["a","b","c"]`, `["b","b"]`, `[]`}},
		{"uniqueItems of booleans", `{"items":{"type":"boolean"},"uniqueItems":true}`,
			[]string{`[true,false]`, `[false]`, `"x"`, `{}`}, []string{`[true,true]`, `[false,true,false]`, `[1]`}},
		{"uniqueItems of equal values", `{"items":{"enum":[{"a":1,"b":2},{"b":2,"a":1},[1],1,1.0]},"uniqueItems":true}`,
			[]string{`[{"a":1,"b":2},[1]]`, `[{"b":2,"a":1},1]`, `[1,[1]]`}, []string{`[{"a":1,"b":2},{"b":2,"a":1}]`, `[1,1]`, `[[1],[1]]`}},
		{"uniqueItems of an anyOf of consts", `{"$defs":{"c":{"anyOf":[{"const":"x"},{"const":"y"},{"type":"null"}]}},"type":"array","items":{"$ref":"#/$defs/c"},"uniqueItems":true}`,
			[]string{`["x",null,"y"]`, `[null]`}, []string{`["x","x"]`, `[null,null]`, `["z"]`}},
		{"uniqueItems of a tuple", `{"prefixItems":[{"type":"boolean"},{"const":"x"}],"items":{"enum":["x","y"]},"uniqueItems":true}`,
			[]string{`[true]`, `[false,"x"]`, `[true,"x","y"]`}, []string{`[true,"x","x"]`, `[true,"y"]`, `["x"]`, `[true,"x","y","y"]`}},
		{"uniqueItems false", `{"type":"array","items":{"type":"string"},"uniqueItems":false}`, []string{`["a","a"]`}, []string{`[1]`}},
		{"uniqueItems of at most one item", `{"items":{"type":"string"},"uniqueItems":true,"maxItems":1}`, []string{`["a"]`, `[]`}, []string{`["a","b"]`}},
		{"uniqueItems in allOf", `{"allOf":[{"items":{"enum":[1,2]}},{"uniqueItems":true}]}`, []string{`[1,2]`, `[2]`}, []string{`[2,2]`, `[3]`}},
		{"contains a const", `{"contains":{"const":1},"minContains":2,"maxContains":3}`,
			[]string{`[1,1]`, `[1,2,1]`, `[1,"1",1,1]`, `[1.5,1,1]`, `[true,[1],1,{"a":1},1]`, `{}`},
			[]string{`[1]`, `[1,1,1,1]`, `[]`, `[2,3]`}},
		{"contains among strings", `{"type":"array","items":{"type":"string"},"contains":{"const":"x"},"maxContains":1}`,
			[]string{`["a","x","b"]`, `["x"]`, `["xx","x"]`}, []string{`[]`, `["a"]`, `["x","x"]`, `["x",1]`, `["\u0078"]`}},
		{"contains a type", `{"contains":{"type":"integer"}}`,
			[]string{`[1.5,2]`, `["a",null,3]`, `[-0.25,0]`}, []string{`[1.5]`, `["a"]`, `[]`}},
		{"contains among listed items", `{"items":{"enum":["a","b",1,2]},"contains":{"type":"string"},"minContains":2}`,
			[]string{`["a","b"]`, `[1,"a",2,"a"]`}, []string{`["a",1]`, `[1,2]`, `["c","a","b"]`}},
		{"contains true", `{"contains":true,"maxContains":2}`, []string{`[1]`, `[1,2]`, `3`}, []string{`[]`, `[1,2,3]`}},
		{"contains false, none due", `{"type":"array","contains":false,"minContains":0}`, []string{`[]`, `[1]`}, nil},
		{"contains within minItems, maxItems", `{"contains":{"enum":[true,null]},"minItems":2,"maxItems":3}`,
			[]string{`[true,1]`, `[null,null,null]`, `[false,null]`}, []string{`[true]`, `[1,2]`, `[true,1,2,3]`, `[false,false]`}},
		{"contains no number listed", `{"contains":{"enum":[1,2.5,"s"]},"minContains":0,"maxContains":0}`,
			[]string{`[3,0.5,-1,10,25,0,-2.5,"t",2.25]`, `[]`}, []string{`[1]`, `[2.5]`, `[2.50]`, `[1.0]`, `[1e0]`, `[10e-1]`, `["s"]`, `[-0]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			checkTexts(t, g, tc.ok, tc.refused)
		})
	}
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	a, b, d := []byte(`{"type":"string"}`), []byte(`{"type":"integer"}`), []byte(`{"type":"null"}`)
	g1, err := c.Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	if g2, _ := c.Compile(a); g2 != g1 {
		t.Error("the same schema compiled twice")
	}
	c.Compile(b)
	c.Compile(d) // drops a, the least recently used
	if c.Len() != 2 {
		t.Errorf("len %d, want 2", c.Len())
	}
	if g3, _ := c.Compile(a); g3 == g1 {
		t.Error("a was kept beyond the cache's size")
	}
	if _, err := c.Compile([]byte(`{"enum":[]}`)); err == nil {
		t.Error("a bad schema compiled through the cache")
	}
}

// TestConcurrentMasks has several sequences of one grammar fill its shared
// mask tables at once (run under -race); each must get the masks a lone
// matcher gets.
func TestConcurrentMasks(t *testing.T) {
	toks, eos := vocabtest.Small()
	corpus := loadCorpus(t)
	g, err := Compile(corpus[len(corpus)-1].Schema)
	if err != nil {
		t.Fatal(err)
	}
	script := func(seed uint64) ([][]byte, [][]uint64) {
		v := grammar.NewVocab(toks, []int32{eos})
		rng := rand.New(rand.NewPCG(seed, 1))
		m := g.NewMatcher()
		var picks [][]byte
		var masks [][]uint64
		for step := 0; step < 60; step++ {
			mask := make([]uint64, (v.Size()+63)/64)
			m.Mask(v, mask)
			masks = append(masks, mask)
			ids := vocabtest.Allowed(mask)
			id := ids[rng.IntN(len(ids))]
			if id == eos {
				break
			}
			m.Advance(toks[id])
			picks = append(picks, toks[id])
		}
		return picks, masks
	}
	v := grammar.NewVocab(toks, []int32{eos})
	done := make(chan error)
	for s := uint64(0); s < 4; s++ {
		go func() {
			picks, want := script(s) // a fresh vocabulary: nothing shared
			m := g.NewMatcher()
			mask := make([]uint64, (v.Size()+63)/64)
			for i, p := range picks {
				m.Mask(v, mask)
				if !slices.Equal(mask, want[i]) {
					done <- fmt.Errorf("seed %d step %d: the shared tables gave another mask", s, i)
					return
				}
				m.Advance(p)
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestLlama3Masks checks masks against token-by-token advances on Llama 3's
// own vocabulary, whose tokens cross JSON's boundaries in every way, when
// scripts/fetch-vocab.sh has fetched it.
func TestLlama3Masks(t *testing.T) {
	v, toks, eos := llama3(t)
	corpus := loadCorpus(t)
	for ci, c := range corpus {
		if ci%4 != 0 { // a quarter of the corpus: each check advances 128k tokens
			continue
		}
		g, err := Compile(c.Schema)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(ci), 5))
		step := 0
		walk(t, g, v, toks, eos, rng, 12, func(m *grammar.Matcher, mask []uint64) {
			if step%3 == 0 {
				bruteForce(t, m, mask, toks, eos, c.Name)
			}
			step++
		})
	}
}

// TestPrepareAgrees checks that masks worked out ahead (Warm, Prepare)
// are the masks worked out on first use.
func TestPrepareAgrees(t *testing.T) {
	toks, eos := vocabtest.Small()
	ahead := grammar.NewVocab(toks, []int32{eos})
	ahead.Warm(CompileJSONObject())
	for ci, c := range loadCorpus(t) {
		g1, err := Compile(c.Schema)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g1.Prepare(context.Background(), ahead, 0); err != nil {
			t.Fatal(err)
		}
		g2, _ := Compile(c.Schema)
		lazy := grammar.NewVocab(toks, []int32{eos})
		m1, m2 := g1.NewMatcher(), g2.NewMatcher()
		mask1 := make([]uint64, (ahead.Size()+63)/64)
		mask2 := make([]uint64, (lazy.Size()+63)/64)
		rng := rand.New(rand.NewPCG(uint64(ci), 3))
		for step := 0; step < 100; step++ {
			m1.Mask(ahead, mask1)
			m2.Mask(lazy, mask2)
			if !slices.Equal(mask1, mask2) {
				t.Fatalf("%s: step %d: a mask worked out ahead differs from one worked out on use", c.Name, step)
			}
			ids := vocabtest.Allowed(mask1)
			id := ids[rng.IntN(len(ids))]
			if id == eos {
				break
			}
			m1.Advance(toks[id])
			m2.Advance(toks[id])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g, _ := Compile(loadCorpus(t)[0].Schema)
	if _, err := g.Prepare(ctx, ahead, 0); err == nil {
		t.Error("Prepare went on after its context ended")
	}
}

// TestAmbiguousSchema: two branches that both recurse through the same
// definition read "[[[[..." in twice as many ways at each level. The
// matcher must give up with an error once the threads pass their bound,
// not slow down without end.
func TestAmbiguousSchema(t *testing.T) {
	g, err := Compile([]byte(`{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/a"}},{"type":"array","items":{"$ref":"#/$defs/a"},"maxItems":5}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	for depth := 0; depth < 64; depth++ {
		if !m.Advance([]byte("[")) {
			if m.Err() == nil || genq.ErrorCode(m.Err()) != genq.Invalid {
				t.Fatalf("refused at depth %d without an error: %v", depth, m.Err())
			}
			if depth < 3 {
				t.Fatalf("gave up already at depth %d", depth)
			}
			return
		}
	}
	t.Fatalf("64 levels followed")
}

// TestOtherProperties: an object with properties takes others after the
// listed ones, by JSON Schema's default, never a listed name again, at most
// MaxOtherProperties, and none with an escape in its name (an escape
// could spell a listed one); closed (strict), it takes none.
func TestOtherProperties(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"string"}},"required":["a"]}`)
	many := `{"a":1`
	for i := range MaxOtherProperties + 1 {
		many += fmt.Sprintf(`,"x%d":%d`, i, i)
	}
	many += "}"
	check := func(g *grammar.Grammar, text string, want bool) {
		t.Helper()
		if got := matches(g, text); got != want {
			t.Errorf("%s: accepted %v, want %v", text, got, want)
		}
	}
	open, err := Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		`{"a":1}`: true, `{"a":1,"ab":"x"}`: true, `{"a":1,"b":[true]}`: true, `{"a":1,"ab":"x","abc":null,"":2}`: true,
		`{"a":1,"a":2}`: false, `{"a":1,"ab":"x","ab":"y"}`: false, `{"a":1,"ab":3}`: false, `{"b":1}`: false,
		`{"a":1,"é":{"k":"v"},"\n":1}`: false, // an escape could spell a listed name
		`{"a":1,"é":{"k":"v"},"ĉ":[]}`: true, many: false,
	} {
		check(open, text, want)
	}
	closed, err := CompileWith(schema, Options{ClosedObjects: true})
	if err != nil {
		t.Fatal(err)
	}
	check(closed, `{"a":1,"ab":"x"}`, true)
	check(closed, `{"a":1,"b":true}`, false)
	typed, err := Compile([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}}`))
	if err != nil {
		t.Fatal(err)
	}
	check(typed, `{"a":1,"b":true,"c":false}`, true)
	check(typed, `{"a":1,"b":1}`, false)
}

// TestFormats: each format genq asserts takes examples of it and refuses
// what is not.
func TestFormats(t *testing.T) {
	const annotating = `"$schema":"https://json-schema.org/draft/2020-12/schema",`
	for _, tc := range []struct {
		format, meta string
		ok, refused  []string
	}{
		{format: "time", ok: []string{`"08:30:06Z"`, `"23:59:59.5+01:00"`, `"23:59:60z"`, `"05:29:60+05:30"`},
			refused: []string{`"24:00:00Z"`, `"08:30:06"`, `"23:59:60+01:00"`}},
		{format: "date", ok: []string{`"2024-02-29"`, `"2000-02-29"`}, refused: []string{`"1900-02-29"`, `"2023-02-29"`, `"2024-04-31"`}},
		{format: "duration", ok: []string{`"P1D"`, `"PT1H30M"`, `"P1Y2M3DT4H5M6S"`, `"P3W"`}, refused: []string{`"P"`, `"PT"`, `"1D"`, `"P1H"`, `"P1Y2D"`}},
		{format: "ipv4", ok: []string{`"192.168.0.1"`, `"0.0.0.0"`}, refused: []string{`"256.1.1.1"`, `"1.2.3"`, `"01.2.3.4"`}},
		{format: "ipv6", ok: []string{`"2001:db8:0:0:0:0:2:1"`, `"2001:db8::1"`, `"::ffff:10.0.0.1"`, `"::"`},
			refused: []string{`"1.2.3.4"`, `"1::2::3"`, `"1:2:3:4:5:6:7:8:9"`}},
		{format: "email", ok: []string{`"a.b+c@example.com"`, `"\"a b\"@[127.0.0.1]"`}, refused: []string{`"a..b@example.com"`, `"a@-x.com"`, `"a@b@c"`}},
		{format: "uri", ok: []string{`"https://example.com/a?b=c#d"`, `"urn:isbn:0451450523"`}, refused: []string{`"/relative"`, `"http://a b"`, `"http://x/%zz"`}},
		{format: "uri-reference", ok: []string{`"/relative?x"`, `""`, `"#top"`}, refused: []string{`"1:b"`, `"a\\b"`}},
		{format: "iri", ok: []string{`"http://ƒøø.example/π"`}, refused: []string{`"π"`}},
		{format: "json-pointer", ok: []string{`""`, `"/a~1b/~0"`}, refused: []string{`"a"`, `"/~2"`}},
		{format: "relative-json-pointer", ok: []string{`"0#"`, `"2/a"`}, refused: []string{`"01"`, `"/a"`}},
		{format: "uri-template", ok: []string{`"/users/{id}{?q,page:3}"`}, refused: []string{`"{a,}"`, `"{v:0}"`}},
		// Tested as a whole value where the string ends (formatCheck).
		{format: "hostname", ok: []string{`"www.example.com"`, `"xn--9n2bp8q.xn--9t4b11yi5a"`, `"a--b.com"`},
			refused: []string{`"-a.com"`, `"ab--c.com"`, `"xn--X"`, `"xn---9uc"`, `"a..b"`, `"a_b"`}},
		{format: "idn-hostname", ok: []string{`"실례.테스트"`, `"a。b"`, `"l·l"`, `"Example.com"`},
			refused: []string{`"〮실례.테스트"`, `"a·l"`, `"0a.א"`, `"a b"`, `"xn--7a"`}},
		{format: "regex", ok: []string{`"([abc])+\\s+$"`, `"(?<y>\\d{4})-\\k<y>"`, `"[\\u{1F600}-\\u{1F64F}]"`, `""`},
			refused: []string{`"^(abc]"`, `"a{2,1}"`, `"\\k<x>"`, `"(a)\\2"`, `"[z-a]"`, `"*"`, `"\\Z"`, `"(?i)a"`, `"(?P<n>a)"`, `"\\A"`, `"a**"`, `"a)"`, `"(a"`, `"((((((((((a))))))))))"`}},
		{format: "idn-email", ok: []string{`"실례@실례.테스트"`, `"δοκιμή@example.com"`}, refused: []string{`"user＠example.com"`, `"2962"`}},
		// Where the meta-schema makes format an annotation, every format
		// is one, those genq refuses where they assert included.
		{format: "hostname", meta: annotating, ok: []string{`"any string: an annotation"`}},
		{format: "ipv4", meta: annotating, ok: []string{`"not an address"`}},
		{format: "x-custom", ok: []string{`"an unknown format is an annotation"`}},
	} {
		g, err := Compile([]byte(`{` + tc.meta + `"type":"string","format":"` + tc.format + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		checkTexts(t, g, tc.ok, tc.refused)
	}
}

// TestStrictHostname: a strict schema holds hostname to letter-digit-
// hyphen labels without A-labels (OpenAI's strict schemas assert it),
// where JSON Schema's mode tests A-labels as well.
func TestStrictHostname(t *testing.T) {
	g, err := CompileWith([]byte(`{"type":"string","format":"hostname"}`), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, g, []string{`"www.example.com"`, `"a--b.example"`, `"h0st"`},
		[]string{`"-a.example"`, `"a-.example"`, `"a..b"`, `"xn--9n2bp8q.example"`, `"host_name"`, `"example.com."`, `""`})
}

// checkTexts checks that g takes every text of ok whole and none of
// refused.
func checkTexts(t *testing.T, g *grammar.Grammar, ok, refused []string) {
	t.Helper()
	for _, want := range []struct {
		texts []string
		ok    bool
	}{{ok, true}, {refused, false}} {
		for _, text := range want.texts {
			if got := matches(g, text); got != want.ok {
				t.Errorf("%s: accepted %v, want %v", text, got, want.ok)
			}
		}
	}
}

// TestDependentRequired compiles random dependentRequired over five
// properties, some required, and checks every set of them written in
// order against the rule: the object is taken exactly when every required
// property is there and every present property's dependents are too.
func TestDependentRequired(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 5
	for round := 0; round < 150; round++ {
		required := map[int]bool{}
		var req []string
		for i := range n {
			if rng.IntN(6) == 0 {
				required[i] = true
				req = append(req, fmt.Sprintf(`"p%d"`, i))
			}
		}
		deps := map[int][]int{}
		var parts []string
		for a := range n {
			if rng.IntN(2) == 0 {
				continue
			}
			var bs []string
			for b := range n {
				if rng.IntN(3) == 0 {
					deps[a] = append(deps[a], b)
					bs = append(bs, fmt.Sprintf(`"p%d"`, b))
				}
			}
			parts = append(parts, fmt.Sprintf(`"p%d":[%s]`, a, strings.Join(bs, ",")))
		}
		var props []string
		for i := range n {
			props = append(props, fmt.Sprintf(`"p%d":{}`, i))
		}
		schema := fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s],"dependentRequired":{%s},"additionalProperties":false}`,
			strings.Join(props, ","), strings.Join(req, ","), strings.Join(parts, ","))
		g, err := Compile([]byte(schema))
		satisfiable := false
		for set := 0; set < 1<<n; set++ {
			want := true
			var members []string
			for i := range n {
				if set&(1<<i) == 0 {
					want = want && !required[i]
					continue
				}
				members = append(members, fmt.Sprintf(`"p%d":%d`, i, i))
				for _, b := range deps[i] {
					want = want && set&(1<<b) != 0
				}
			}
			satisfiable = satisfiable || want
			if err != nil {
				continue
			}
			if got := matches(g, "{"+strings.Join(members, ",")+"}"); got != want {
				t.Errorf("%s: %v accepted %v, want %v", schema, members, got, want)
			}
		}
		if err != nil && (satisfiable || !strings.Contains(err.Error(), "never be satisfied")) {
			t.Errorf("%s: %v", schema, err)
		}
	}
}

// TestUniqueItems checks every array of up to four items over an enum's
// values against uniqueItems and random minItems, maxItems.
func TestUniqueItems(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	vals := []string{`"a"`, `1`, `null`, `[2]`, `{"k":true}`}
	for round := 0; round < 30; round++ {
		n := 1 + rng.IntN(len(vals))
		lo, hi := rng.IntN(3), 1+rng.IntN(5)
		schema := fmt.Sprintf(`{"type":"array","items":{"enum":[%s]},"uniqueItems":true,"minItems":%d,"maxItems":%d}`, strings.Join(vals[:n], ","), lo, max(lo, hi))
		hi = max(lo, hi)
		g, err := Compile([]byte(schema))
		if err != nil {
			if lo > n && strings.Contains(err.Error(), "never be satisfied") {
				continue // fewer values than minItems
			}
			t.Fatalf("%s: %v", schema, err)
		}
		var arrays func(prefix []int)
		arrays = func(prefix []int) {
			items := make([]string, len(prefix))
			seen := map[int]bool{}
			want := len(prefix) >= lo && len(prefix) <= hi
			for i, v := range prefix {
				items[i] = vals[v]
				want = want && !seen[v]
				seen[v] = true
			}
			text := "[" + strings.Join(items, ",") + "]"
			if got := matches(g, text); got != want {
				t.Errorf("%s: %s accepted %v, want %v", schema, text, got, want)
			}
			if len(prefix) < 4 {
				for v := range n {
					arrays(append(slices.Clone(prefix), v))
				}
			}
		}
		arrays(nil)
	}
}

// TestStrictWritesAsOpenAI checks what Options.Strict changes: JSON
// Schema's own meaning without it (1.0 an integer, format an annotation
// under 2020-12's meta-schema), OpenAI's strict answers with it.
func TestStrictWritesAsOpenAI(t *testing.T) {
	const (
		draft2020 = `"$schema":"https://json-schema.org/draft/2020-12/schema",`
		draft7    = `"$schema":"http://json-schema.org/draft-07/schema#",`
	)
	for _, tc := range []struct {
		name, schema string
		strict       bool
		ok, refused  []string
	}{
		{"an integer", `{"type":"integer"}`, false, []string{`1`, `1.0`, `-2.000`}, []string{`1.5`, `1.`, `1e0`}},
		{"an integer, strict", `{"type":"integer"}`, true, []string{`1`, `-2`}, []string{`1.0`, `-2.000`}},
		{"a const", `{"const":2}`, false, []string{`2`, `2.0`}, []string{`2.5`, `20`}},
		{"a const, strict", `{"const":2.0}`, true, []string{`2`}, []string{`2.0`}},
		{"members in any order", `{"properties":{"a":{},"b":{},"c":{}},"required":["a","c"]}`, false,
			[]string{`{"a":1,"c":2}`, `{"c":2,"b":0,"a":1}`, `{"b":0,"a":1,"c":2,"d":3}`}, []string{`{"a":1}`, `{"c":1,"a":1,"c":2}`, `{"a":1,"d":3,"c":2}`}},
		{"members in the schema's order, strict", `{"properties":{"a":{},"b":{},"c":{}},"required":["a","b","c"],"additionalProperties":false}`, true,
			[]string{`{"a":1,"b":0,"c":2}`}, []string{`{"c":2,"b":0,"a":1}`, `{"a":1,"c":2,"b":0}`}},
		{"a const object in any order", `{"const":{"a":1,"b":[{"c":1,"d":2}]}}`, false,
			[]string{`{"a":1,"b":[{"c":1,"d":2}]}`, `{"b":[{"d":2,"c":1}],"a":1.0}`}, []string{`{"a":1}`, `{"a":1,"b":[{"c":1,"d":2}],"a":1}`, `{"b":[{"d":2,"c":1}]}`}},
		{"a const object, strict", `{"const":{"a":1,"b":2}}`, true, []string{`{"a":1,"b":2}`}, []string{`{"b":2,"a":1}`}},
		{"dependentRequired in any order", `{"properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}}`, false,
			[]string{`{"a":1,"b":2}`, `{"b":2,"a":1}`, `{"b":2}`, `{}`}, []string{`{"a":1}`, `{"x":0,"a":1}`}},
		{"a fractional enum", `{"enum":[1.5]}`, false, []string{`1.5`, `1.50`}, []string{`1.05`, `15`}},
		{"format asserted without $schema", `{"type":"string","format":"date"}`, false, []string{`"2024-01-31"`}, []string{`"tomorrow"`}},
		{"format asserted under draft 7", `{` + draft7 + `"type":"string","format":"date"}`, false, []string{`"2024-01-31"`}, []string{`"tomorrow"`}},
		{"format an annotation under 2020-12", `{` + draft2020 + `"type":"string","format":"date"}`, false, []string{`"2024-01-31"`, `"tomorrow"`}, []string{`3`}},
		{"format asserted under 2020-12, strict", `{` + draft2020 + `"type":"string","format":"date"}`, true, []string{`"2024-01-31"`}, []string{`"tomorrow"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := CompileWith([]byte(tc.schema), Options{Strict: tc.strict})
			if err != nil {
				t.Fatal(err)
			}
			checkTexts(t, g, tc.ok, tc.refused)
		})
	}
	_, err := Compile([]byte(`{"$schema":"http://localhost:1234/my-metaschema.json","type":"integer"}`))
	if err == nil || !strings.Contains(err.Error(), "$schema") || !strings.Contains(err.Error(), "my-metaschema") {
		t.Errorf("an unknown meta-schema: %v, want a 400 naming it", err)
	}
}
