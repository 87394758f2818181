package structured

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// A tool's parameters schema that genq cannot enforce exactly is still
// served (a client such as Claude Code sends a score of tools with every
// request, and one it cannot enforce would fail them all): the schema is
// relaxed, each construct the compiler refuses replaced by a sound
// over-approximation, a schema whose language holds the original's, so
// that decoding enforces what it can; and the finished arguments of a call
// to such a tool are checked against the whole schema with a JSON Schema
// validator (RelaxedTool.Check). Relaxing, a construct is:
//
//   - a keyword the compiler names in its refusal dropped, where dropping it
//     only widens the schema: a bound beyond genq's limit (maxLength 4194304
//     becomes unbounded), a pattern genq cannot follow, not, if/then/else,
//     oneOf, dependentSchemas, unevaluated… (a refusal inside a not, an if
//     or a oneOf drops it whole: widening inside one can narrow it);
//   - else the subschema the refusal names replaced by its bare type, or
//     true, and, that failing, its enclosing subschema.
//
// Response formats are never relaxed: there the caller asked for a
// guarantee, and a schema genq cannot enforce is refused. Nor are strict
// tools, for the same reason.

// maxRelaxSteps bounds the compiles one schema's relaxation takes; past it
// the schema is relaxed whole.
const maxRelaxSteps = 32

// ToolSchemaError is the Err of a genq.Error refusing a tool's parameters
// schema: the tool's name and its index in the job's tools, so that each
// API can name the field in its own form (Anthropic's
// tools.N.input_schema).
type ToolSchemaError struct {
	Tool   string
	Index  int
	Detail string // the refusal, without the field's name
}

func (e *ToolSchemaError) Error() string { return e.Detail }

// toolSchemaError names tool i's parameters in err.
func toolSchemaError(i int, name string, err error) error {
	where := "tools[" + strconv.Itoa(i) + "].function.parameters"
	var e *genq.Error
	if errors.As(err, &e) {
		return &genq.Error{Code: e.Code, Message: where + ": " + e.Message, Err: &ToolSchemaError{Tool: name, Index: i, Detail: e.Message}}
	}
	return err
}

// compileDocumentAlone compiles one tool's schema in a grammar of its own,
// to find what in it the compiler refuses.
func compileDocumentAlone(schema []byte, strict, closed bool) error {
	c := newCompiler()
	c.strict, c.closed = strict, closed || strict
	f, err := c.document(schema, "parameters")
	if err != nil {
		return err
	}
	top := c.b.NewRule("top")
	c.b.Define(top, f)
	c.b.Grammar.Top = top
	return c.b.Finish()
}

// relaxSchema relaxes schema until it compiles, returning the relaxed
// schema's JSON and what was relaxed. A schema that compiles as it is comes
// back unchanged, with no paths. A schema that is not JSON, or whose root
// is neither an object nor a boolean, cannot be relaxed: its error comes
// back.
func relaxSchema(schema []byte, closed bool) ([]byte, []string, error) {
	first := compileDocumentAlone(schema, false, closed)
	if first == nil {
		return schema, nil, nil
	}
	if len(schema) > MaxSchemaBytes {
		return nil, nil, first
	}
	root, err := parseJSON(schema)
	if err != nil || root.kind != 'o' && root.kind != 'b' {
		return nil, nil, first
	}
	var paths []string
	tried := map[string]int{}
	err = first
	for step := 0; err != nil; step++ {
		if genq.ErrorCode(err) != genq.Invalid {
			return nil, nil, err
		}
		msg := genq.ErrorMessage(err)
		var note string
		if step >= maxRelaxSteps {
			root, note = bareType(root), "#: relaxed whole"
		} else {
			root, note = relaxAt(root, msg, tried)
		}
		paths = append(paths, note)
		var buf bytes.Buffer
		root.encode(&buf)
		schema = buf.Bytes()
		err = compileDocumentAlone(schema, false, closed)
		if err != nil && note == "#: relaxed whole" {
			return nil, nil, first
		}
	}
	return schema, paths, nil
}

// relaxAt relaxes root where msg, the compiler's refusal, points, and says
// what it did. It returns the new root (the old one, changed, unless the
// root itself was replaced).
func relaxAt(root *value, msg string, tried map[string]int) (*value, string) {
	segs := refusalPath(msg)
	// The deepest schema the pointer reaches.
	schemas := schemaPrefixes(root, segs)
	at := schemas[len(schemas)-1]
	ptr := pointer(segs[:at])
	tried[ptr]++
	n := lookup(root, segs[:at])
	if at < len(segs) && opaque(segs[at]) && n.kind == 'o' && n.get(segs[at]) != nil {
		k := segs[at]
		n.obj = slices.DeleteFunc(n.obj, func(m member) bool { return m.key == k })
		return root, ptr + ": " + k + " dropped"
	}
	if n.kind == 'o' && tried[ptr] <= 8 {
		if k := namedKeyword(n, msg); k != "" {
			n.obj = slices.DeleteFunc(n.obj, func(m member) bool { return m.key == k })
			return root, ptr + ": " + k + " dropped"
		}
	}
	// Replace the schema by its bare type; one already bare, or replaced
	// before, by true; and past that, its enclosing schema.
	for i := len(schemas) - 1; i >= 0; i-- {
		p := segs[:schemas[i]]
		ptr := pointer(p)
		n := lookup(root, p)
		repl := bareType(n)
		if sameJSON(repl, n) {
			if n.kind == 'b' && n.b {
				continue
			}
			repl = &value{kind: 'b', b: true}
		}
		if len(p) == 0 {
			return repl, ptr + ": relaxed to " + describe(repl)
		}
		parent := lookup(root, p[:len(p)-1])
		set(parent, p[len(p)-1], repl)
		return root, ptr + ": relaxed to " + describe(repl)
	}
	return &value{kind: 'b', b: true}, "#: relaxed to true"
}

func describe(v *value) string {
	var buf bytes.Buffer
	v.encode(&buf)
	return buf.String()
}

// bareType is s with only its "type", where that is a name or a list of
// names; else true. Every instance of s has its type: the bare type holds
// every instance s does.
func bareType(s *value) *value {
	if s.kind == 'o' {
		if t := s.get("type"); t != nil && (t.kind == 's' || t.kind == 'a' && !slices.ContainsFunc(t.arr, func(v *value) bool { return v.kind != 's' })) {
			return &value{kind: 'o', obj: []member{{"type", t}}}
		}
	}
	return &value{kind: 'b', b: true}
}

// droppable tells the keywords whose removal from a schema can only widen
// it: every assertion and applicator but those that decide what another
// applies to (properties and patternProperties, beside additionalProperties;
// prefixItems, beside items).
func droppable(s *value, k string) bool {
	switch k {
	case "properties", "patternProperties":
		return s.get("additionalProperties") == nil && s.get("unevaluatedProperties") == nil
	case "prefixItems":
		return s.get("items") == nil && s.get("unevaluatedItems") == nil
	case "items":
		return s.get("additionalItems") == nil || s.get("items").kind != 'a'
	case "allOf", "oneOf", "const", "not", "if", "then", "else", "dependentSchemas", "dependencies",
		"unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$recursiveRef":
		return true
	}
	_, ok := enforced(k)
	return ok
}

// namedKeyword is a keyword of s that msg names and that can be dropped:
// the last one quoted, else the first one msg names as a word.
func namedKeyword(s *value, msg string) string {
	best, bestAt := "", -1
	for _, m := range s.obj {
		if !droppable(s, m.key) {
			continue
		}
		if i := strings.LastIndex(msg, strconv.Quote(m.key)); i > bestAt {
			best, bestAt = m.key, i
		}
	}
	if best != "" {
		return best
	}
	bestAt = len(msg) + 1
	for _, m := range s.obj {
		if !droppable(s, m.key) {
			continue
		}
		if i := wordIndex(msg, m.key); i >= 0 && i < bestAt {
			best, bestAt = m.key, i
		}
	}
	return best
}

// wordIndex is where word stands alone in msg, or -1.
func wordIndex(msg, word string) int {
	isWord := func(c byte) bool {
		return c == '$' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for from := 0; ; {
		i := strings.Index(msg[from:], word)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(word)
		if (i == 0 || !isWord(msg[i-1])) && (end == len(msg) || !isWord(msg[end])) {
			return i
		}
		from = i + 1
	}
}

// refusalPath is the JSON pointer a refusal names ("at #/properties/x"),
// as its segments; none for the root or a refusal that names none.
func refusalPath(msg string) []string {
	i := strings.Index(msg, "at #")
	if i < 0 {
		return nil
	}
	p := msg[i+len("at #"):]
	if j := strings.IndexAny(p, " :)\",;"); j >= 0 {
		p = p[:j]
	}
	if p == "" {
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return segs
}

func pointer(segs []string) string {
	var b strings.Builder
	b.WriteString("#")
	for _, s := range segs {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func lookup(v *value, segs []string) *value {
	for _, s := range segs {
		v = child(v, s)
		if v == nil {
			return nil
		}
	}
	return v
}

func child(v *value, seg string) *value {
	switch v.kind {
	case 'o':
		return v.get(seg)
	case 'a':
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(v.arr) {
			return nil
		}
		return v.arr[i]
	}
	return nil
}

func set(v *value, seg string, to *value) {
	switch v.kind {
	case 'o':
		for i := range v.obj {
			if v.obj[i].key == seg {
				v.obj[i].val = to
			}
		}
	case 'a':
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(v.arr) {
			v.arr[i] = to
		}
	}
}

// opaque tells the applicators whose subschemas relaxing does not enter:
// widening a not's subschema, an if's, or a branch of oneOf (exactly
// one) can narrow the schema. The applicator is dropped whole instead.
func opaque(k string) bool { return k == "not" || k == "if" || k == "oneOf" }

// schemaPrefixes are the lengths of the prefixes of segs that reach a
// schema in root, the root's (0) first: the pointer followed as far as it
// goes, through the keywords whose values are schemas, but not into an
// opaque one.
func schemaPrefixes(root *value, segs []string) []int {
	out := []int{0}
	v, i := root, 0
	for i < len(segs) && v.kind == 'o' {
		k := segs[i]
		kv := v.get(k)
		if kv == nil {
			break
		}
		var next *value
		step := 1
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			if i+1 < len(segs) {
				next, step = child(kv, segs[i+1]), 2
			}
		case "allOf", "anyOf", "prefixItems":
			if i+1 < len(segs) {
				next, step = child(kv, segs[i+1]), 2
			}
		case "items":
			if kv.kind == 'a' {
				if i+1 < len(segs) {
					next, step = child(kv, segs[i+1]), 2
				}
			} else {
				next = kv
			}
		case "additionalProperties", "additionalItems", "then", "else", "contains", "propertyNames",
			"unevaluatedItems", "unevaluatedProperties":
			next = kv
		}
		if next == nil || next.kind != 'o' && next.kind != 'b' {
			break
		}
		v, i = next, i+step
		out = append(out, i)
	}
	return out
}

// relaxTools relaxes, in a copy of tools, the parameters of each tool
// (strict ones aside) that genq cannot enforce exactly. A schema that
// cannot be relaxed is refused, naming its tool's field (index from
// indexOf).
func relaxTools(tools []genq.Tool, closed bool, indexOf func(int) int) ([]genq.Tool, map[string]*grammar.RelaxedTool, error) {
	out := slices.Clone(tools)
	var relaxed map[string]*grammar.RelaxedTool
	for i, t := range tools {
		if noSchema(t.Function.Parameters) {
			continue
		}
		if strictTool(t) {
			if err := compileDocumentAlone(t.Function.Parameters, true, true); err != nil {
				return nil, nil, toolSchemaError(indexOf(i), t.Function.Name, err)
			}
			continue
		}
		schema, paths, err := relaxSchema(t.Function.Parameters, closed)
		if err == nil && len(paths) > 0 {
			// A schema relaxed must be one a validator reads: else it is
			// not JSON Schema, and no call to it could be checked.
			if _, verr := compileValidator(t.Function.Parameters); verr != nil {
				first := compileDocumentAlone(t.Function.Parameters, false, closed)
				err = genq.WrapError(genq.Invalid, verr, fmt.Sprintf("%s; nor is it a JSON Schema a validator reads: %v", genq.ErrorMessage(first), oneLine(verr)))
			}
		}
		if err != nil {
			return nil, nil, toolSchemaError(indexOf(i), t.Function.Name, err)
		}
		if len(paths) == 0 {
			continue
		}
		out[i].Function.Parameters = schema
		if relaxed == nil {
			relaxed = map[string]*grammar.RelaxedTool{}
		}
		relaxed[t.Function.Name] = &grammar.RelaxedTool{Name: t.Function.Name, Paths: paths, Schema: t.Function.Parameters, Validate: validator(t.Function.Parameters)}
	}
	return out, relaxed, nil
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// noLoader refuses every URL: a tool's schema is checked by itself, and
// must not have the worker read files or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: genq loads no schema from outside the tool's own", url)
}

// compileValidator compiles schema for the validator: draft 2020-12
// unless its $schema says another, format asserted where genq asserts it.
func compileValidator(schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Without $schema genq asserts format, as drafts 4 to 7 do (the
	// validator asserts it there itself): so must the check.
	if root, err := parseJSON(schema); err == nil {
		if d, err := schemaDraft(root); err == nil && d == draftNone {
			c.AssertFormat()
		}
	}
	c.UseLoader(noLoader{})
	const url = "urn:genq:tool-parameters"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// validator returns the check of a call's finished arguments against
// schema: its error says where the arguments fail and which keyword, never
// their content; or that they could not be checked. The validator is
// compiled on the first call, as few relaxed tools' calls are checked.
func validator(schema json.RawMessage) func(arguments string) error {
	var (
		once   sync.Once
		sch    *jsonschema.Schema
		schErr error
	)
	return func(arguments string) error {
		once.Do(func() { sch, schErr = compileValidator(schema) })
		if schErr != nil {
			return fmt.Errorf("not checked: the schema does not compile for validation: %s", oneLine(schErr))
		}
		args := strings.TrimSpace(arguments)
		if args == "" {
			args = "{}"
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err != nil {
			return errors.New("the arguments are not JSON")
		}
		err = sch.Validate(inst)
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New(describeInvalid(ve))
		}
		return err
	}
}

// describeInvalid names where the arguments fail, and the keyword each
// failure is of, leaving out the values (the arguments' content).
func describeInvalid(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
			leaves = append(leaves, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), cmpOr(kw, "schema")))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	const most = 4
	if len(leaves) > most {
		leaves = append(leaves[:most], fmt.Sprintf("and %d more", len(leaves)-most))
	}
	return "the arguments fail the schema " + strings.Join(leaves, "; ")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
