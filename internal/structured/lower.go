package structured

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// Lowering: not, if/then/else, dependentSchemas, oneOf whose branches may
// overlap, and unevaluatedProperties/unevaluatedItems, brought to what the
// compiler builds. A schema is rewritten into alternatives (a disjunctive
// normal form) of plain schemas, each one an allOf of plain keywords merged
// into one: an instance is valid exactly when it is valid against one of
// them. not is pushed down keyword by keyword (negate.go); the keywords
// whose negation is no plain schema are refused by name.
//
// Each alternative also carries what its keywords evaluated (2020-12's
// annotations), so that unevaluatedProperties and unevaluatedItems become
// plain keywords where what is evaluated does not depend on the instance
// beyond which alternative it takes.

// maxBranches bounds the alternatives a schema lowers to: every allOf of
// alternatives multiplies them.
const maxBranches = 256

// maxExactWeight bounds the alternatives an overlapping oneOf lowers to
// exactly, by weight (the values under their asserting keywords): past
// it, their automata would pass the compile's state limit (GitHub's
// secret-scanning location, 13 open objects: 190 alternatives of weight
// 4,349, over 100,000 states), and the oneOf is lowered with fewer
// violations instead.
const maxExactWeight = 1024

// maxExactAnyOf bounds an anyOf whose branches' annotations count: it is
// lowered to each non-empty set of its branches, 2^n - 1 of them.
const maxExactAnyOf = 6

// Internal keywords that lowering writes into plain schemas: patterns a
// string must all match, and patterns it must match none of. They are not
// JSON Schema's; the "$genq:" prefix keeps them apart from its keywords.
const (
	keyPatterns    = "$genq:patterns"
	keyNotPatterns = "$genq:notPatterns"
	// keyNotInteger: a number that is not an integer.
	keyNotInteger = "$genq:notInteger"
	// keyShort: a number of at most 15 significant digits.
	keyShort = "$genq:short"
)

// applicators are the keywords lowering takes apart; what is left of a
// schema without them is a plain schema.
func applicators() []string {
	return []string{"allOf", "anyOf", "oneOf", "not", "if", "then", "else",
		"dependentSchemas", "$ref", "unevaluatedProperties", "unevaluatedItems"}
}

// evaluated is what an alternative's keywords evaluated of an instance,
// known statically: property names, patterns of names, all properties; the
// first items, all items; contains, whose items only the instance tells.
type evaluated struct {
	names    []string
	patterns []string
	allProps bool
	prefix   int
	allItems bool
	contains bool
}

func (e evaluated) union(f evaluated) evaluated {
	out := evaluated{
		names:    slices.Clone(e.names),
		patterns: slices.Clone(e.patterns),
		allProps: e.allProps || f.allProps,
		prefix:   max(e.prefix, f.prefix),
		allItems: e.allItems || f.allItems,
		contains: e.contains || f.contains,
	}
	for _, n := range f.names {
		if !slices.Contains(out.names, n) {
			out.names = append(out.names, n)
		}
	}
	for _, p := range f.patterns {
		if !slices.Contains(out.patterns, p) {
			out.patterns = append(out.patterns, p)
		}
	}
	return out
}

func (e evaluated) same(f evaluated) bool {
	return slices.Equal(e.names, f.names) && slices.Equal(e.patterns, f.patterns) && e.allProps == f.allProps &&
		e.prefix == f.prefix && e.allItems == f.allItems && e.contains == f.contains
}

// evaluatedBy is what a plain schema's own keywords evaluate.
func evaluatedBy(s *value) evaluated {
	var e evaluated
	if s.kind != 'o' {
		return e
	}
	if p := s.get("properties"); p != nil && p.kind == 'o' {
		for _, m := range p.obj {
			e.names = append(e.names, m.key)
		}
	}
	if p := s.get("patternProperties"); p != nil && p.kind == 'o' {
		for _, m := range p.obj {
			e.patterns = append(e.patterns, m.key)
		}
	}
	e.allProps = s.get("additionalProperties") != nil
	if p := s.get("prefixItems"); p != nil && p.kind == 'a' {
		e.prefix = len(p.arr)
	}
	if it := s.get("items"); it != nil {
		if it.kind == 'a' { // draft 7's positional items
			e.prefix = max(e.prefix, len(it.arr))
			e.allItems = s.get("additionalItems") != nil
		} else {
			e.allItems = true
		}
	}
	e.contains = s.get("contains") != nil
	return e
}

// branch is one alternative: a plain schema and what it evaluated.
type branch struct {
	s  *value
	ev evaluated
}

// anything is the alternatives of the schema true.
func anything() []branch { return []branch{{s: &value{kind: 'o'}}} }

// needsLowering tells a schema that uses a keyword only lowering
// enforces.
func needsLowering(s *value) bool {
	if s.kind != 'o' {
		return false
	}
	for _, k := range []string{"not", "if", "then", "else", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems"} {
		if s.get(k) != nil {
			return true
		}
	}
	d := s.get("dependencies")
	return d != nil && !namesOnly(d)
}

// compileLowered compiles s as the alternatives it lowers to.
func (c *compiler) compileLowered(s *value, path string) (grammar.Frag, error) {
	brs, err := c.lower(s, path, false, 0)
	if err != nil {
		return grammar.Frag{}, err
	}
	alts := make([]grammar.Frag, 0, len(brs))
	for _, br := range brs {
		f, err := c.compile(br.s, path)
		if unsatisfiable(err) {
			continue // an alternative no instance takes
		}
		if err != nil {
			return grammar.Frag{}, err
		}
		alts = append(alts, f)
	}
	return c.b.Alt(alts...), nil
}

// unsatisfiable tells a compile error that says no instance is valid.
func unsatisfiable(err error) bool {
	return err != nil && (errors.Is(err, errNever) || strings.Contains(err.Error(), "can never be satisfied"))
}

// lower is the alternatives of s. eval says whether what they evaluate
// counts (an unevaluated keyword at this instance location sees it): an
// anyOf is then lowered to each set of its branches (lowerAnyOf).
func (c *compiler) lower(s *value, path string, eval bool, depth int) ([]branch, error) {
	if depth > maxSchemaDepth {
		return nil, genq.WrapError(genq.Invalid, errTooDeep, fmt.Sprintf("at %s: $ref and applicators nest deeper than %d (a $ref that leads back to itself)", path, maxSchemaDepth))
	}
	switch s.kind {
	case 'b':
		if s.b {
			return anything(), nil
		}
		return nil, nil
	case 'o':
	default:
		return nil, genq.Errorf(genq.Invalid, "the schema at %s must be an object or a boolean", path)
	}
	defer c.enterScope(s)() // a $ref is followed here, in s's resource
	eval = eval || s.get("unevaluatedProperties") != nil || s.get("unevaluatedItems") != nil
	base, deps := c.splitDependencies(without(s, applicators()...))
	named, err := dependents(s, path)
	if err != nil {
		return nil, err
	}
	deps = append(named, deps...)
	if p := base.get("pattern"); p != nil { // patterns, so that more can join
		if err := patternSupported(p); err != nil {
			return nil, genq.WrapError(genq.Invalid, err, "at "+path+": "+genq.ErrorMessage(err))
		}
		base = without(base, "pattern")
		base.obj = append(base.obj, member{keyPatterns, &value{kind: 'a', arr: []*value{p}}})
	}
	out := []branch{{s: base, ev: evaluatedBy(base)}}
	at := path // where the schema anded in is, for errors
	and := func(more []branch, e error) {
		if err == nil && e == nil {
			out, e = c.and(out, more, at)
		}
		if err == nil {
			err = e
		}
	}
	sub := func(v *value, at string) ([]branch, error) { return c.lower(v, at, eval, depth+1) }
	if ref := s.get("$ref"); ref != nil {
		target, e := c.refTarget(ref, path)
		if e != nil {
			return nil, e
		}
		and(c.lower(target, ref.str, eval, depth+1))
	}
	if all := s.get("allOf"); all != nil {
		if all.kind != 'a' || len(all.arr) == 0 {
			return nil, genq.Errorf(genq.Invalid, "at %s: allOf must be a non-empty array of schemas", path)
		}
		for i, v := range all.arr {
			at = path + "/allOf/" + strconv.Itoa(i)
			and(sub(v, at))
		}
		at = path
	}
	if anyOf := s.get("anyOf"); anyOf != nil && err == nil {
		and(c.lowerAnyOf(anyOf, path, eval, depth))
	}
	if one := s.get("oneOf"); one != nil && err == nil {
		and(c.lowerOneOf(one, path, eval, depth))
	}
	if not := s.get("not"); not != nil && err == nil {
		// not's subschema leaves no annotations: it holds where it fails.
		neg, e := c.lowerNegated(func() ([]branch, error) { return c.lower(not, path+"/not", false, depth+1) })
		if e == nil {
			neg, e = c.negate(neg, path+"/not")
		}
		and(neg, e)
	}
	if cond := s.get("if"); cond != nil && err == nil {
		and(c.lowerIf(s, cond, path, eval, depth))
	}
	for _, d := range deps {
		if err != nil {
			break
		}
		and(c.lowerDependent(d.name, d.schema, path, eval, depth))
	}
	if err != nil {
		return nil, err
	}
	if u := s.get("unevaluatedProperties"); u != nil {
		for i := range out {
			if out[i], err = c.unevaluatedProps(out[i], u, path); err != nil {
				return nil, err
			}
		}
	}
	if u := s.get("unevaluatedItems"); u != nil {
		for i := range out {
			if out[i], err = unevaluatedItems(out[i], u, path); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// namedSchema is a dependentSchemas' entry: where name is present, schema
// holds.
type namedSchema struct {
	name   string
	schema *value
}

// splitDependencies takes dependentSchemas and draft 7's dependencies
// with schemas out of s: the lists of names stay, as dependentRequired.
func (c *compiler) splitDependencies(s *value) (*value, []namedSchema) {
	var out []namedSchema
	d := s.get("dependencies")
	if d == nil || d.kind != 'o' || namesOnly(d) {
		return s, nil
	}
	names := &value{kind: 'o'}
	for _, m := range d.obj {
		if m.val.kind == 'a' {
			names.obj = append(names.obj, m)
		} else {
			out = append(out, namedSchema{m.key, m.val})
		}
	}
	s = without(s, "dependencies")
	if len(names.obj) > 0 {
		s.obj = append(s.obj, member{"dependencies", names})
	}
	return s, out
}

// dependents are s's dependentSchemas and dependencies with schemas.
func dependents(s *value, path string) ([]namedSchema, error) {
	var out []namedSchema
	if d := s.get("dependentSchemas"); d != nil {
		if d.kind != 'o' {
			return nil, genq.Errorf(genq.Invalid, "at %s: dependentSchemas must be an object of schemas", path)
		}
		for _, m := range d.obj {
			out = append(out, namedSchema{m.key, m.val})
		}
	}
	return out, nil
}

// lowerDependent is "name absent, or present and schema holds".
func (c *compiler) lowerDependent(name string, schema *value, path string, eval bool, depth int) ([]branch, error) {
	at := path + "/dependentSchemas/" + name
	held, err := c.lower(schema, at, eval, depth+1)
	if err != nil {
		return nil, err
	}
	present := []branch{{s: object(member{"required", nameList(name)})}}
	if held, err = c.and(present, held, at); err != nil {
		return nil, err
	}
	absent := branch{s: object(member{"properties", object(member{name, falseSchema()})})}
	return append([]branch{absent}, held...), nil
}

// lowerIf is (if and then) or (not if and else).
func (c *compiler) lowerIf(s, cond *value, path string, eval bool, depth int) ([]branch, error) {
	holds, err := c.lower(cond, path+"/if", eval, depth+1)
	if err != nil {
		return nil, err
	}
	if s.get("then") == nil && s.get("else") == nil {
		if !eval {
			return anything(), nil // it asserts nothing
		}
		// Only what if evaluates counts: where it holds, or, as anyOf's
		// sets, where nothing is assumed of it.
		return c.or(holds, anything(), path)
	}
	fails, err := c.lowerNegated(func() ([]branch, error) { return c.lower(cond, path+"/if", false, depth+1) })
	if err == nil {
		fails, err = c.negate(fails, path+"/if")
	}
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"then", "else"} {
		v := s.get(k)
		if v == nil {
			continue
		}
		more, err := c.lower(v, path+"/"+k, eval, depth+1)
		if err != nil {
			return nil, err
		}
		if k == "then" {
			holds, err = c.and(holds, more, path+"/then")
		} else {
			fails, err = c.and(fails, more, path+"/else")
		}
		if err != nil {
			return nil, err
		}
	}
	return c.or(holds, fails, path)
}

// lowerAnyOf is at least one branch. Where annotations count and the
// branches evaluate differently, each set of branches is an alternative
// of its own, all of the set holding, with what they all evaluate. The
// others need not fail: an unevaluated keyword holds to less where more
// is evaluated, so an instance that one set's alternative takes is valid,
// and a valid instance is taken by the set of every branch it satisfies.
func (c *compiler) lowerAnyOf(anyOf *value, path string, eval bool, depth int) ([]branch, error) {
	if anyOf.kind != 'a' || len(anyOf.arr) == 0 {
		return nil, genq.Errorf(genq.Invalid, "at %s: anyOf must be a non-empty array of schemas", path)
	}
	parts, uniform, err := c.lowerEach(anyOf.arr, path+"/anyOf/", eval, depth)
	if err != nil {
		return nil, err
	}
	if !eval || uniform {
		var out []branch
		for _, p := range parts {
			if out, err = c.or(out, p, path); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if len(parts) > maxExactAnyOf {
		return nil, genq.Errorf(genq.Invalid, "at %s: anyOf of %d branches beside unevaluatedProperties or unevaluatedItems is not supported: genq follows which of at most %d hold", path, len(parts), maxExactAnyOf)
	}
	var out []branch
	for set := 1; set < 1<<len(parts); set++ {
		alt := anything()
		for i := range parts {
			if set&(1<<i) == 0 {
				continue
			}
			if alt, err = c.and(alt, parts[i], path); err != nil {
				return nil, err
			}
		}
		if out, err = c.or(out, alt, path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lowerEach lowers each schema of list; uniform tells that all their
// alternatives evaluate the same.
func (c *compiler) lowerEach(list []*value, at string, eval bool, depth int) ([][]branch, bool, error) {
	parts := make([][]branch, len(list))
	uniform := true
	var first *evaluated
	for i, v := range list {
		p, err := c.lower(v, at+strconv.Itoa(i), eval, depth+1)
		if err != nil {
			return nil, false, err
		}
		parts[i] = p
		for _, br := range p {
			if first == nil {
				first = &br.ev
			} else if !first.same(br.ev) {
				uniform = false
			}
		}
	}
	return parts, uniform, nil
}

// lowerNegated lowers a schema whose branches are to be negated.
func (c *compiler) lowerNegated(lower func() ([]branch, error)) ([]branch, error) {
	c.negating++
	defer func() { c.negating-- }()
	return lower()
}

// lowerOneOf is exactly one branch: each branch with the negation of
// every other that may hold with it.
func (c *compiler) lowerOneOf(one *value, path string, eval bool, depth int) ([]branch, error) {
	if one.kind != 'a' || len(one.arr) == 0 {
		return nil, genq.Errorf(genq.Invalid, "at %s: oneOf must be a non-empty array of schemas", path)
	}
	// Each branch may be negated, for the others.
	c.negating++
	parts, _, err := c.lowerEach(one.arr, path+"/oneOf/", eval, depth)
	c.negating--
	if err != nil {
		return nil, err
	}
	out, err := c.exactlyOne(parts, path, false)
	if c.negating == 0 && (errors.Is(err, errTooMany) || err == nil && weightOf(out) > maxExactWeight) {
		// Exactly, too many alternatives or too large ones: each branch
		// with fewer of the others' violations, which takes fewer
		// instances, never more, where the result is not negated again.
		return c.exactlyOne(parts, path, true)
	}
	return out, err
}

// exactlyOne is each of parts with the negation of every other that may
// hold with it; with fewer, or where a format is left out of the other's
// negation, with fewerViolations.
func (c *compiler) exactlyOne(parts [][]branch, path string, fewer bool) ([]branch, error) {
	negs := make([][]branch, len(parts))
	leftOut := make([]bool, len(parts)) // a format's failures, from negs
	var out []branch
	var err error
	for i, p := range parts {
		alt := p
		for j, q := range parts {
			if i == j || apart(p, q) {
				continue
			}
			at := path + "/oneOf/" + strconv.Itoa(j)
			if negs[j] == nil {
				n := c.leftOut
				if negs[j], err = c.negate(q, at); err != nil {
					return nil, err
				}
				// A format within q's subschemas is left out where
				// their negations are compiled, later.
				leftOut[j] = c.negating == 0 && (fewer || c.leftOut > n || c.holdsFormat(q) || !c.negatable(q, at, 0, map[*value]bool{}))
			}
			neg := negs[j]
			if leftOut[j] {
				if neg, err = c.fewerViolations(p, q, at); err != nil {
					return nil, err
				}
			}
			if alt, err = c.and(alt, neg, path); err != nil {
				return nil, err
			}
		}
		if out, err = c.or(out, alt, path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// apart tells two sets of alternatives no instance satisfies both.
func apart(p, q []branch) bool {
	for _, a := range p {
		for _, b := range q {
			if !distinct(a.s, b.s) {
				return false
			}
		}
	}
	return true
}

// and is the alternatives where one of x and one of y hold: each pair
// merged, those no instance satisfies dropped.
func (c *compiler) and(x, y []branch, path string) ([]branch, error) {
	if len(x)*len(y) > maxBranches*maxBranches {
		return nil, tooManyBranches(path)
	}
	var out []branch
	for _, a := range x {
		for _, b := range y {
			m, err := merge(a.s, b.s, path)
			if never(m, err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if e := m.get("enum"); e != nil && e.kind == 'a' && len(e.arr) == 0 {
				continue
			}
			out = append(out, branch{s: m, ev: a.ev.union(b.ev)})
		}
	}
	if len(out) > maxBranches {
		return nil, tooManyBranches(path)
	}
	return out, nil
}

// or is the alternatives of x and of y.
func (c *compiler) or(x, y []branch, path string) ([]branch, error) {
	if len(x)+len(y) > maxBranches {
		return nil, tooManyBranches(path)
	}
	return append(slices.Clip(x), y...), nil
}

// errTooMany marks a lowering with more than maxBranches alternatives.
var errTooMany = errors.New("too many alternatives")

func tooManyBranches(path string) error {
	return genq.WrapError(genq.Invalid, errTooMany,
		fmt.Sprintf("at %s: not, if, oneOf and unevaluated keywords here make over %d alternatives: the schema is too large", path, maxBranches))
}

// unevaluatedProps makes unevaluatedProperties u a plain keyword of br:
// each property br lists that its evaluating keywords did not, and every
// property it does not list, must satisfy u.
func (c *compiler) unevaluatedProps(br branch, u *value, path string) (branch, error) {
	at := path + "/unevaluatedProperties"
	if br.ev.allProps {
		return br, nil
	}
	s := br.s
	if pp := s.get("patternProperties"); pp != nil {
		for _, m := range pp.obj {
			if !slices.Contains(br.ev.patterns, m.key) {
				return branch{}, genq.Errorf(genq.Invalid, "at %s: unevaluatedProperties beside patternProperties that evaluate nothing is not supported", at)
			}
		}
	}
	out := without(s, "properties", "additionalProperties")
	if props := s.get("properties"); props != nil {
		kept := &value{kind: 'o'}
		for _, m := range props.obj {
			v := m.val
			if !c.evaluates(br.ev, m.key) {
				var err error
				if v, err = merge(v, u, at); err != nil {
					return branch{}, err
				}
			}
			kept.obj = append(kept.obj, member{m.key, v})
		}
		out.obj = append(out.obj, member{"properties", kept})
	}
	addl := u
	if a := s.get("additionalProperties"); a != nil {
		var err error
		if addl, err = merge(a, u, at); err != nil {
			return branch{}, err
		}
	}
	out.obj = append(out.obj, member{"additionalProperties", addl})
	br.s, br.ev.allProps = out, true
	return br, nil
}

// evaluates tells whether ev evaluated the property name.
func (c *compiler) evaluates(ev evaluated, name string) bool {
	if ev.allProps || slices.Contains(ev.names, name) {
		return true
	}
	for _, p := range ev.patterns {
		if re := c.regexp(p); re != nil && re.MatchString(name) {
			return true
		}
	}
	return false
}

// unevaluatedItems makes unevaluatedItems u a plain keyword of br: each
// item past those br's evaluating keywords reached must satisfy u.
func unevaluatedItems(br branch, u *value, path string) (branch, error) {
	at := path + "/unevaluatedItems"
	if br.ev.allItems {
		return br, nil
	}
	if br.ev.contains {
		return branch{}, genq.Errorf(genq.Invalid, "at %s: unevaluatedItems beside contains is not supported: which items contains evaluates only the instance tells", at)
	}
	s := br.s
	if it := s.get("items"); it != nil && it.kind == 'a' {
		return branch{}, genq.Errorf(genq.Invalid, "at %s: unevaluatedItems beside an array of items is not supported", at)
	}
	out := without(s, "prefixItems", "items")
	if p := s.get("prefixItems"); p != nil && p.kind == 'a' {
		kept := &value{kind: 'a'}
		for i, v := range p.arr {
			if i >= br.ev.prefix {
				var err error
				if v, err = merge(v, u, at); err != nil {
					return branch{}, err
				}
			}
			kept.arr = append(kept.arr, v)
		}
		out.obj = append(out.obj, member{"prefixItems", kept})
	}
	rest := u
	if it := s.get("items"); it != nil {
		var err error
		if rest, err = merge(it, u, at); err != nil {
			return branch{}, err
		}
	}
	out.obj = append(out.obj, member{"items", rest})
	br.s, br.ev.allItems = out, true
	return br, nil
}

// Builders of schema values.

func object(ms ...member) *value { return &value{kind: 'o', obj: ms} }

func nameList(names ...string) *value {
	out := &value{kind: 'a'}
	for _, n := range names {
		out.arr = append(out.arr, &value{kind: 's', str: n})
	}
	return out
}

func falseSchema() *value { return &value{kind: 'b'} }

func number(n int) *value { return &value{kind: 'n', num: json.Number(strconv.Itoa(n))} }

// weight is a schema's size as the compiler sees it: the values under
// its asserting keywords (annotations left out, a $ref one value), a
// proxy for the automaton it compiles to.
func weight(s *value) int {
	switch s.kind {
	case 'o':
		n := 1
		for _, m := range s.obj {
			switch {
			case m.key == "properties" || m.key == "patternProperties" || m.key == "dependentSchemas":
				for _, p := range m.val.obj {
					n += weight(p.val)
				}
			case keywordOfJSONSchema(m.key):
				n += weight(m.val)
			}
		}
		return n
	case 'a':
		n := 1
		for _, v := range s.arr {
			n += weight(v)
		}
		return n
	}
	return 1
}

// weightOf is the weight of alternatives together.
func weightOf(brs []branch) int {
	n := 0
	for _, b := range brs {
		n += weight(b.s)
	}
	return n
}
