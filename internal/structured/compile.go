// Package structured compiles JSON schemas, response formats and tool
// calls to grammars that constrain decoding (internal/structured/grammar
// runs them): each schema becomes rules of byte NFAs, with calls between
// rules for nesting and recursion, and what genq cannot enforce exactly is
// refused by name.
//
// The package is pure Go and knows nothing of models, HTTP or queues.
package structured

import (
	"cmp"
	"errors"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// Bounds that keep an answer from running on without end where the schema
// sets none: whitespace, and the digits of a number.
const (
	maxIndent      = 16 // spaces after a newline between two tokens
	maxIntDigits   = 16
	maxFracDigits  = 16
	maxExpDigits   = 3
	anyObjectRule  = "any object"
	anyValueRule   = "any value"
	anyArrayRule   = "any array"
	stringRuleName = "string"
)

// builtins are the rules every grammar starts with, built in the same order
// so that their node numbers, and so their cached token masks, agree in all
// grammars.
type builtins struct {
	str, num, integer, value, object, array int32
}

// memoKey names a compiled rule: a $ref's target, or an object or array
// rule (a schema listing both types compiles to two rules), in a dynamic
// scope (scopeKey).
type memoKey struct {
	s     *value
	t     string
	scope string
}

// Limits on a schema's own text, checked before it compiles (MaxNodes
// bounds what it compiles to).
const (
	MaxSchemaBytes = 256 << 10 // the schema's JSON text
	maxSchemaDepth = 64        // nesting of the schema's own JSON
)

type compiler struct {
	b        *grammar.Builder
	bi       builtins
	root     *value
	rootRule int32
	defRules map[memoKey]int32
	memo     map[memoKey]int32
	shared   map[string]int32
	// closed: an object with properties takes no other property unless
	// additionalProperties is a schema (Options.ClosedObjects).
	closed bool
	// strict: Options.Strict.
	strict bool
	// formats: the formats genq knows are asserted, not annotations.
	formats bool
	// draft is the root's $schema's draft (drafts.go).
	draft int
	// ids are the document's identifiers (ids.go), and scope the dynamic
	// scope: the resources the schema being compiled was reached through,
	// outermost first, kept where a $dynamicRef's target depends on it.
	ids   *ids
	scope []string
	// rest is the rule of a JSON string's rest after its opening quote,
	// made on first use.
	rest int32
	// commaRule is comma's rule, made on first use.
	commaRule int32
	// fold: the pattern being compiled is a format's, whose parse writes
	// classes such as [Tt] as case-folded letters (formatRegex).
	fold bool
	// regexps are the patterns names are checked against, compiled once.
	regexps map[string]*regexp.Regexp
	// negating counts the lowerings under way whose result is to be
	// negated (negate.go): a negation may leave out what it cannot write
	// only where its own result is not negated again. leftOut counts
	// the formats left out so.
	negating int
	leftOut  int
	// wsRule is whitespace's builtin rule, called by ws where the builder
	// is wsIn, the grammar's own (not a scratch automaton's).
	wsRule int32
	wsIn   *grammar.Builder
	// formatPats are the formats' patterns written so far, by mode.
	formatPats map[formatKey]formatPat
}

// Options change how a schema is compiled.
type Options struct {
	// ClosedObjects: an object with properties takes no property it does
	// not list where additionalProperties is left out or true, as OpenAI's
	// strict schemas have it. By JSON Schema's rule, and by default, it
	// may take other properties after the listed ones (at most
	// MaxOtherProperties).
	ClosedObjects bool
	// Strict is OpenAI's strict: true, whose answers are written as
	// OpenAI writes them and typed clients read them: objects closed
	// (ClosedObjects), members in the schema's order, integers without a
	// fraction, and the formats genq knows asserted whatever $schema
	// says. Without it a schema means what JSON Schema says: an object's
	// members in any order (where it lists at most maxAnyOrder
	// properties), 1.0 an integer, and format an annotation under the
	// 2019-09 and 2020-12 meta-schemas, whose default vocabulary makes it
	// one.
	Strict bool
	// AssertFormats asserts format whatever $schema says, as 2020-12's
	// format-assertion vocabulary would.
	AssertFormats bool
}

// MaxOtherProperties bounds the properties an object takes beyond those its
// schema lists, so that a model cannot add them without end.
const MaxOtherProperties = 8

func newCompiler() *compiler {
	c := &compiler{
		b:         &grammar.Builder{Grammar: &grammar.Grammar{}},
		defRules:  map[memoKey]int32{},
		memo:      map[memoKey]int32{},
		shared:    map[string]int32{},
		rest:      -1,
		commaRule: -1,
		formats:   true,
	}
	c.buildBuiltins()
	c.b.Grammar.BuiltinNodes = int32(len(c.b.Grammar.Nodes))
	return c
}

// Compile compiles a JSON schema into a grammar of the JSON texts it
// accepts. Every keyword it cannot enforce is refused by name.
func Compile(schema []byte) (*grammar.Grammar, error) { return CompileWith(schema, Options{}) }

// CompileWith is Compile as opts say.
func CompileWith(schema []byte, opts Options) (*grammar.Grammar, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, genq.Errorf(genq.Invalid, "the schema is %d bytes; the limit is %d", len(schema), MaxSchemaBytes)
	}
	root, err := parseJSON(schema)
	if err != nil {
		return nil, err
	}
	c := newCompiler()
	c.closed = opts.ClosedObjects || opts.Strict
	c.strict = opts.Strict
	c.root = root
	if err := c.readDraft(root, opts.AssertFormats); err != nil {
		return nil, err
	}
	c.rootRule = c.b.NewRule("#")
	f, err := c.compile(root, "#")
	if err == nil {
		c.b.Define(c.rootRule, f)
		c.b.Grammar.Top = c.rootRule
		err = c.b.Finish()
	}
	if err != nil {
		return nil, c.explain(err)
	}
	return c.b.Grammar, nil
}

// explain adds to a refusal of a schema nothing satisfies what genq left
// out of a negation, which may be why.
func (c *compiler) explain(err error) error {
	if c.leftOut == 0 || !unsatisfiable(err) {
		return err
	}
	return genq.WrapError(genq.ErrorCode(err), err, genq.ErrorMessage(err)+
		" (under not, if or oneOf genq leaves out the strings that fail a format, which no schema of its can say)")
}

// CompileJSONObject returns the grammar of any JSON object, for
// response_format {"type":"json_object"}.
func CompileJSONObject() *grammar.Grammar {
	c := newCompiler()
	top := c.b.NewRule("json object")
	c.b.Define(top, c.b.Call(c.bi.object))
	c.b.Grammar.Top = top
	if err := c.b.Finish(); err != nil {
		panic("structured: the JSON object grammar does not build: " + err.Error())
	}
	return c.b.Grammar
}

// unenforced tells the keywords JSON Schema defines as assertions or
// applicators that genq does not enforce: a schema with one is refused by
// name, since answering with a rule dropped would answer another question.
// Every other keyword genq does not enforce is an annotation (2020-12's
// meta-data and content vocabularies, $id, $anchor, $comment, a vendor's
// x-…) or a word JSON Schema does not know, and is ignored, as validators
// ignore them.
func unenforced(k string) bool {
	switch k {
	case "not", "if", "then", "else", "dependentSchemas",
		"unevaluatedItems", "unevaluatedProperties",
		"$dynamicRef", "$recursiveRef",
		"dependencies": // draft 7's, but where its values are all lists of names
		return true
	}
	return false
}

// enforced tells whether a keyword is enforced and the type it applies to
// ("" for any type).
func enforced(k string) (typ string, ok bool) {
	switch k {
	case "type", "enum", "const", "anyOf", "$ref":
		return "", true
	case "properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties", "propertyNames",
		"dependentRequired", "dependencies":
		return "object", true
	case "items", "minItems", "maxItems", "prefixItems", "additionalItems", "uniqueItems",
		"contains", "minContains", "maxContains":
		return "array", true
	case "minLength", "maxLength", "pattern", "format", keyPatterns, keyNotPatterns:
		return "string", true
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", keyNotInteger, keyShort:
		return "number", true
	}
	return "", false
}

func (c *compiler) compile(s *value, path string) (grammar.Frag, error) {
	b := c.b
	if b.Failed() {
		return grammar.Frag{}, b.Err
	}
	switch s.kind {
	case 'b':
		if s.b {
			return b.Call(c.bi.value), nil
		}
		return b.Alt(), nil // false: nothing matches
	case 'o':
	default:
		return grammar.Frag{}, genq.Errorf(genq.Invalid, "the schema at %s must be an object or a boolean", path)
	}
	defer c.enterScope(s)()
	if err := checkDraft3(s, c.draft, path); err != nil {
		return grammar.Frag{}, err
	}
	if err := checkShape(s, path); err != nil {
		return grammar.Frag{}, err
	}
	if needsLowering(s) {
		return c.compileLowered(s, path)
	}
	for _, m := range s.obj {
		if unenforced(m.key) && !(m.key == "dependencies" && namesOnly(m.val)) {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "the schema keyword %q (at %s) is not supported: genq cannot enforce it", m.key, path)
		}
	}
	constraints := func(except ...string) string {
		for _, m := range s.obj {
			if _, ok := enforced(m.key); !ok || m.key == "type" || contains(except, m.key) {
				continue
			}
			return m.key
		}
		return ""
	}
	if all := s.get("allOf"); all != nil {
		merged, err := c.resolved(s, path, 0)
		if err != nil && !errors.Is(err, errTooDeep) && !errors.Is(err, errNever) {
			return c.compileLowered(s, path) // parts that do not merge as they are
		}
		if err != nil {
			return grammar.Frag{}, err
		}
		return c.compile(merged, path)
	}
	if one := s.get("oneOf"); one != nil {
		return c.oneOf(s, one, path)
	}
	if ref := s.get("$ref"); ref != nil {
		if k := constraints("$ref"); k != "" || s.get("type") != nil {
			// Keywords beside $ref hold with it (2019-09 on): the schema
			// it points to, merged with them.
			merged, err := c.resolved(s, path, 0)
			if errors.Is(err, errTooDeep) {
				return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: $ref with %q beside it is not supported where what it points to leads back to it", path, cmp.Or(k, "type"))
			}
			if errors.Is(err, errScoped) {
				return c.compileLowered(s, path)
			}
			if err != nil {
				return grammar.Frag{}, err
			}
			return c.compile(merged, path)
		}
		return c.ref(ref, path)
	}
	types, err := typeList(s, path)
	if err != nil {
		return grammar.Frag{}, err
	}
	if anyOf := s.get("anyOf"); anyOf != nil {
		if anyOf.kind != 'a' || len(anyOf.arr) == 0 {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: anyOf must be a non-empty array of schemas", path)
		}
		// Keywords beside anyOf hold for every branch: each branch is
		// merged with them. Alone, a branch compiles as it is (a $ref in
		// it stays a rule, recursion included).
		siblings, err := c.resolved(without(s, "anyOf"), path, 0) // a $ref beside anyOf, merged in
		if errors.Is(err, errScoped) {
			return c.compileLowered(s, path)
		}
		if err != nil {
			return grammar.Frag{}, err
		}
		besides := constraints("anyOf") != "" || s.get("type") != nil
		alts := make([]grammar.Frag, 0, len(anyOf.arr))
		for i, sub := range anyOf.arr {
			at := path + "/anyOf/" + strconv.Itoa(i)
			if besides {
				r, err := c.resolved(sub, at, 0)
				if errors.Is(err, errScoped) {
					r = sub // merged below as an allOf, lowered where it is compiled
				} else if err != nil {
					return grammar.Frag{}, err
				}
				m, err := merge(siblings, r, at)
				if errors.Is(err, errNever) {
					continue // no instance: the branch holds for none
				}
				if err != nil {
					return grammar.Frag{}, err
				}
				sub = m
			}
			f, err := c.compile(sub, at)
			if err != nil {
				return grammar.Frag{}, err
			}
			alts = append(alts, f)
		}
		return b.Alt(alts...), nil
	}
	if e, cst := s.get("enum"), s.get("const"); e != nil || cst != nil {
		var vals []*value
		word := "const"
		if e != nil {
			word = "enum"
			if e.kind != 'a' || len(e.arr) == 0 {
				return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: enum must be a non-empty array: an empty enum can never be satisfied", path)
			}
			vals = e.arr
		}
		if cst != nil {
			if vals == nil {
				vals = []*value{cst}
			}
			vals = slices.DeleteFunc(slices.Clone(vals), func(v *value) bool { return !sameJSON(v, cst) })
		}
		// Beside the values, keywords that a scalar's value can be checked
		// against keep the values they allow.
		if k := uncheckedBeside(s, vals, append([]string{"enum", "const"}, scalarKeywords...)); k != "" {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: %s with %q beside it is not supported", path, word, k)
		}
		var alts []grammar.Frag
		for _, v := range vals {
			if types != nil && !anyType(v, types) {
				continue
			}
			ok, err := c.scalarHolds(s, v, path)
			if err != nil {
				return grammar.Frag{}, err
			}
			if ok {
				alts = append(alts, c.literal(v))
			}
		}
		if len(alts) == 0 {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: no value of enum or const has the schema's type: it can never be satisfied", path)
		}
		return b.Alt(alts...), nil
	}
	if types == nil {
		// Without "type" a value of any type is allowed, and each keyword
		// constrains only the values of the type it applies to.
		types = anyTypes(s)
	}
	if types == nil {
		return b.Call(c.bi.value), nil
	}
	alts := make([]grammar.Frag, 0, len(types))
	for _, t := range types {
		f, err := c.typed(s, t, path)
		if err != nil {
			return grammar.Frag{}, err
		}
		alts = append(alts, f)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return b.Alt(alts...), nil
}

// scalarKeywords are the keywords scalarHolds checks a listed value
// against.
var scalarKeywords = []string{"format", "pattern", keyPatterns, keyNotPatterns, "minLength", "maxLength",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", keyNotInteger, keyShort}

// scalarHolds tells whether v, a value enum or const lists, holds to s's
// scalarKeywords: each checks only the type it applies to.
func (c *compiler) scalarHolds(s, v *value, path string) (bool, error) {
	switch v.kind {
	case 's':
		n := utf8.RuneCountInString(v.str)
		min, max, err := boundsUpTo(s, "minLength", "maxLength", path, maxCount)
		if err != nil {
			return false, err
		}
		if n < min || max >= 0 && n > max {
			return false, nil
		}
		if p := s.get("pattern"); p != nil {
			re := c.regexp(p.str)
			if p.kind != 's' || re == nil {
				return false, genq.Errorf(genq.Invalid, "at %s: pattern %q is not a supported regular expression", path, p.str)
			}
			if !re.MatchString(v.str) {
				return false, nil
			}
		}
		if ok, err := c.patternsHold(s, v.str, path); !ok || err != nil {
			return false, err
		}
		if err := c.checkFormat(s.get("format"), path, true); err != nil {
			return false, err
		}
		if f := s.get("format"); f != nil && c.formats {
			if p, ok := c.formatPattern(f.str); ok && !regexp.MustCompile(p).MatchString(v.str) {
				return false, nil
			}
			if ok := c.formatCheck(f.str); ok != nil && !ok(v.str) {
				return false, nil
			}
		}
	case 'n':
		x, ok := v.rat()
		if !ok || s.get(keyNotInteger) != nil && x.IsInt() || s.get(keyShort) != nil && !shortDigits(v.num.String()) {
			return false, nil
		}
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} {
			b := s.get(k)
			if b == nil {
				continue
			}
			y, ok := b.rat()
			if b.kind != 'n' || !ok {
				return false, genq.Errorf(genq.Invalid, "at %s: %s must be a number", path, k)
			}
			d := x.Cmp(y)
			switch {
			case k == "minimum" && d < 0, k == "maximum" && d > 0,
				k == "exclusiveMinimum" && d <= 0, k == "exclusiveMaximum" && d >= 0:
				return false, nil
			case k == "multipleOf" && (y.Sign() <= 0 || !new(big.Rat).Quo(x, y).IsInt()):
				return false, nil
			}
		}
	}
	return true, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// uncheckedBeside is a keyword of s, other than checked ones and type,
// that genq cannot check enum's or const's values against, where it
// applies to one of them: a keyword of a type no value has (minItems
// beside an enum of strings) asserts nothing on them.
func uncheckedBeside(s *value, vals []*value, checked []string) string {
	for _, m := range s.obj {
		t, ok := enforced(m.key)
		if !ok || m.key == "type" || slices.Contains(checked, m.key) {
			continue
		}
		if t == "" || slices.ContainsFunc(vals, func(v *value) bool { return v.isType(t) }) {
			return m.key
		}
	}
	return ""
}

func anyType(v *value, types []string) bool {
	for _, t := range types {
		if v.isType(t) {
			return true
		}
	}
	return false
}

// typeList reads "type": nil when absent.
func typeList(s *value, path string) ([]string, error) {
	t := s.get("type")
	if t == nil {
		return nil, nil
	}
	var names []string
	switch t.kind {
	case 's':
		names = []string{t.str}
	case 'a':
		for _, e := range t.arr {
			if e.kind != 's' {
				return nil, genq.Errorf(genq.Invalid, "at %s: type must be a string or an array of strings", path)
			}
			names = append(names, e.str)
		}
	default:
		return nil, genq.Errorf(genq.Invalid, "at %s: type must be a string or an array of strings", path)
	}
	if len(names) == 0 {
		return nil, genq.Errorf(genq.Invalid, "at %s: an empty type list can never be satisfied", path)
	}
	for _, n := range names {
		if !contains([]string{"object", "array", "string", "number", "integer", "boolean", "null"}, n) {
			return nil, genq.Errorf(genq.Invalid, "at %s: unknown type %q", path, n)
		}
	}
	return names, nil
}

// anyTypes is every JSON type, for a schema without "type" whose keywords
// constrain some type; nil when none does (any value).
func anyTypes(s *value) []string {
	for _, m := range s.obj {
		if t, _ := enforced(m.key); t != "" {
			return []string{"null", "boolean", "object", "array", "string", "number"}
		}
	}
	return nil
}

func (c *compiler) typed(s *value, t, path string) (grammar.Frag, error) {
	b := c.b
	switch t {
	case "null":
		return b.Lit("null"), nil
	case "boolean":
		return b.Alt(b.Lit("true"), b.Lit("false")), nil
	case "integer", "number":
		if s.get(keyNotInteger) != nil || s.get(keyShort) != nil {
			return c.restrictedNumber(s, t, path)
		}
		if s.get("multipleOf") != nil {
			f, fraction, err := c.multiple(s, path, t == "integer")
			if fraction {
				return f, err
			}
			return c.wholeFraction(f), err
		}
	}
	switch t {
	case "integer":
		if hasBounds(s) {
			f, err := c.bounded(s, path, true)
			return c.wholeFraction(f), err
		}
		return c.wholeFraction(b.Call(c.bi.integer)), nil
	case "number":
		if hasBounds(s) {
			return c.bounded(s, path, false)
		}
		return b.Call(c.bi.num), nil
	case "string":
		return c.str(s, path)
	case "array":
		r, err := c.memoRule(memoKey{s, t, c.scopeKey("")}, path, c.array)
		return b.Call(r), err
	case "object":
		r, err := c.memoRule(memoKey{s, t, c.scopeKey("")}, path, c.object)
		return b.Call(r), err
	}
	return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: unknown type %q", path, t)
}

// memoRule compiles an object or array schema into a rule once, so that a
// schema used in several places (or twice by the object construction)
// costs its states once.
func (c *compiler) memoRule(k memoKey, path string, body func(*value, string) (grammar.Frag, error)) (int32, error) {
	if r, ok := c.memo[k]; ok {
		return r, nil
	}
	r := c.b.NewRule(path)
	c.memo[k] = r
	f, err := body(k.s, path)
	if err != nil {
		return 0, err
	}
	c.b.Define(r, f)
	return r, c.b.Err
}

// oneOf compiles as anyOf where its branches, each with the keywords
// beside it, exclude each other, as most real oneOfs' do (other types, or a
// required property's different const or enum values): there "exactly
// one" is "at least one". Branches that may overlap are refused: the
// grammar cannot count how many of them an answer satisfies.
func (c *compiler) oneOf(s, one *value, path string) (grammar.Frag, error) {
	if one.kind != 'a' || len(one.arr) == 0 {
		return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: oneOf must be a non-empty array of schemas", path)
	}
	siblings, err := c.resolved(without(s, "oneOf"), path, 0) // a $ref beside oneOf, merged in
	if errors.Is(err, errScoped) {
		return c.compileLowered(s, path)
	}
	if err != nil {
		return grammar.Frag{}, err
	}
	branches := make([]*value, len(one.arr))
	var firstErr error
	for i, sub := range one.arr {
		at := path + "/oneOf/" + strconv.Itoa(i)
		r, err := c.resolved(sub, at, 0)
		if errors.Is(err, errScoped) {
			return c.compileLowered(s, path)
		}
		if err != nil {
			return grammar.Frag{}, err
		}
		m, err := merge(siblings, r, at)
		if never(m, err) { // no instance: the branch holds for none
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		if err != nil {
			return grammar.Frag{}, err
		}
		branches[i] = m
	}
	if !slices.ContainsFunc(branches, func(b *value) bool { return b != nil }) {
		if firstErr == nil {
			firstErr = genq.Errorf(genq.Invalid, "at %s: no branch of oneOf can be satisfied beside the keywords with it", path)
		}
		return grammar.Frag{}, firstErr
	}
	for i := range branches {
		for j := i + 1; j < len(branches); j++ {
			if branches[i] == nil || branches[j] == nil {
				continue
			}
			if !distinct(branches[i], branches[j]) {
				return c.compileLowered(s, path) // exactly one, by negating the others
			}
		}
	}
	// With nothing but annotations beside oneOf, a branch compiles as it
	// is: a $ref in it stays a call of its rule, not a copy.
	besides := false
	for _, m := range siblings.obj {
		if _, ok := enforced(m.key); ok {
			besides = true
		}
	}
	alts := make([]grammar.Frag, 0, len(branches))
	for i, br := range branches {
		if br == nil {
			continue
		}
		if !besides {
			br = one.arr[i]
		}
		f, err := c.compile(br, path+"/oneOf/"+strconv.Itoa(i))
		if err != nil {
			return grammar.Frag{}, err
		}
		alts = append(alts, f)
	}
	return c.b.Alt(alts...), nil
}

func (c *compiler) ref(ref *value, path string) (grammar.Frag, error) {
	if ref.kind != 's' {
		return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: $ref must be a string", path)
	}
	target, err := c.refTarget(ref, path)
	if err != nil {
		return grammar.Frag{}, err
	}
	k := memoKey{s: target, scope: c.scopeKey(c.resourceOf(target))}
	if target == c.root && k.scope == c.rootScope() {
		return c.b.Call(c.rootRule), nil
	}
	if r, ok := c.defRules[k]; ok {
		return c.b.Call(r), nil
	}
	r := c.b.NewRule(ref.str)
	c.defRules[k] = r
	f, err := c.compile(target, ref.str)
	if err != nil {
		return grammar.Frag{}, err
	}
	c.b.Define(r, f)
	return c.b.Call(r), nil
}

// ruleOf compiles s into a rule of its own, named path.
func (c *compiler) ruleOf(s *value, path string) (int32, error) {
	r := c.b.NewRule(path)
	f, err := c.compile(s, path)
	if err != nil {
		return 0, err
	}
	c.b.Define(r, f)
	return r, nil
}
