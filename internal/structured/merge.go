package structured

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// allOf, anyOf beside other keywords, and oneOf, brought to what the
// compiler builds: one schema, or alternatives of them. An instance valid
// against every schema of an allOf is valid against their merge, keyword
// by keyword; where two keywords of the same name cannot be merged into
// one that says exactly both, the schema is refused, naming them.

// mergeAll merges the schemas of an allOf into base (its siblings), each
// branch's top-level $ref resolved first.
func (c *compiler) mergeAll(base *value, branches []*value, path string) (*value, error) {
	out := base
	if scoped(base) {
		return nil, scopedError(path)
	}
	for i, br := range branches {
		at := path + "/allOf/" + strconv.Itoa(i)
		r, err := c.resolved(br, at, 0)
		if err != nil {
			return nil, err
		}
		if scoped(r) {
			return nil, scopedError(at)
		}
		if out, err = merge(out, r, at); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// resolved is s with a top-level $ref replaced by its target (merged with
// s's other keywords) and a top-level allOf merged in, so that a branch's
// keywords can be merged with others.
func (c *compiler) resolved(s *value, path string, depth int) (*value, error) {
	if depth > maxSchemaDepth {
		return nil, genq.WrapError(genq.Invalid, errTooDeep, fmt.Sprintf("at %s: $ref and allOf nest deeper than %d", path, maxSchemaDepth))
	}
	if s.kind != 'o' {
		return s, nil
	}
	defer c.enterScope(s)() // a $ref is followed here, in s's resource
	if all := s.get("allOf"); all != nil {
		if all.kind != 'a' || len(all.arr) == 0 {
			return nil, genq.Errorf(genq.Invalid, "at %s: allOf must be a non-empty array of schemas", path)
		}
		merged, err := c.mergeAll(without(s, "allOf"), all.arr, path)
		if err != nil {
			return nil, err
		}
		return c.resolved(merged, path, depth+1)
	}
	ref := s.get("$ref")
	if ref == nil {
		return s, nil
	}
	target, err := c.refTarget(ref, path)
	if err != nil {
		return nil, err
	}
	t, err := c.resolved(target, ref.str, depth+1)
	if err != nil {
		return nil, err
	}
	if scoped(t) || scoped(s) {
		return nil, scopedError(path)
	}
	return merge(without(s, "$ref"), t, path)
}

// errNever is merge's error where two schemas have no instance in common:
// an anyOf's or oneOf's branch that, merged with the keywords beside it,
// is dropped.
var errNever = errors.New("never satisfied")

// never tells a merge that no instance satisfies: false, or errNever.
func never(v *value, err error) bool {
	return errors.Is(err, errNever) || err == nil && v.kind == 'b' && !v.b
}

// errScoped is resolved's error where a schema to merge has keywords
// that see only their own schema's keywords (if, then and else; the
// unevaluated ones): merged into one schema they would see the others'.
// Such a schema is lowered instead (lower.go).
var errScoped = errors.New("scoped keywords")

func scopedError(path string) error {
	return genq.WrapError(genq.Invalid, errScoped, fmt.Sprintf("at %s: if, then, else or an unevaluated keyword in a schema merged with others", path))
}

// scoped tells a schema with if, then, else or an unevaluated keyword.
func scoped(s *value) bool {
	if s.kind != 'o' {
		return false
	}
	for _, k := range []string{"if", "then", "else", "unevaluatedProperties", "unevaluatedItems"} {
		if s.get(k) != nil {
			return true
		}
	}
	return false
}

// errTooDeep is resolved's error where $refs and allOfs nest past
// maxSchemaDepth, as a $ref that leads back to itself does.
var errTooDeep = errors.New("too deep")

// without is s less the keywords keys.
func without(s *value, keys ...string) *value {
	out := &value{kind: 'o'}
	for _, m := range s.obj {
		if !slices.Contains(keys, m.key) {
			out.obj = append(out.obj, m)
		}
	}
	return out
}

// merge is the schema of the instances valid against both a and b.
func merge(a, b *value, path string) (*value, error) {
	switch {
	case a.kind == 'b' && a.b:
		return b, nil
	case b.kind == 'b' && b.b:
		return a, nil
	case a.kind == 'b' || b.kind == 'b':
		return &value{kind: 'b'}, nil // false: nothing is valid
	case a.kind != 'o' || b.kind != 'o':
		return nil, genq.Errorf(genq.Invalid, "the schema at %s must be an object or a boolean", path)
	case scoped(a) || scoped(b):
		// Kept apart, so that each one's scoped keywords see its own.
		return &value{kind: 'o', obj: []member{{"allOf", &value{kind: 'a', arr: []*value{a, b}}}}}, nil
	}
	// minContains, maxContains and additionalItems say something only
	// beside their own schema's contains or items.
	for _, pair := range [][2]*value{{a, b}, {b, a}} {
		x, y := pair[0], pair[1]
		if (x.get("minContains") != nil || x.get("maxContains") != nil) && x.get("contains") == nil && y.get("contains") != nil ||
			x.get("additionalItems") != nil && x.get("items") == nil && y.get("items") != nil {
			return nil, genq.Errorf(genq.Invalid, "at %s: allOf of minContains, maxContains or additionalItems and another schema's contains or items is not supported", path)
		}
	}
	out := &value{kind: 'o', obj: slices.Clone(a.obj)}
	set := func(k string, v *value) {
		for i := range out.obj {
			if out.obj[i].key == k {
				out.obj[i].val = v
				return
			}
		}
		out.obj = append(out.obj, member{k, v})
	}
	for _, m := range b.obj {
		mine := a.get(m.key)
		if mine == nil {
			set(m.key, m.val)
			continue
		}
		if m.key == "const" && !sameJSON(mine, m.val) {
			return &value{kind: 'b'}, nil // two different consts: nothing is valid
		}
		if m.key == "pattern" && !sameJSON(mine, m.val) {
			// Both patterns hold: the second joins the list a string's
			// automaton intersects. One genq cannot follow is refused
			// here, where its schema is known.
			for _, p := range []*value{mine, m.val} {
				if err := patternSupported(p); err != nil {
					return nil, genq.WrapError(genq.Invalid, err, fmt.Sprintf("at %s: allOf with \"pattern\" in two schemas: %s", path, genq.ErrorMessage(err)))
				}
			}
			more := &value{kind: 'a', arr: []*value{m.val}}
			if p := out.get(keyPatterns); p != nil {
				more = union(p, more)
			}
			set(keyPatterns, more)
			continue
		}
		v, err := mergeKeyword(m.key, mine, m.val, a, b, path)
		if err != nil {
			return nil, err
		}
		set(m.key, v)
	}
	// items in a schema without prefixItems holds every item, the other
	// schema's prefix included.
	if out.get("prefixItems") != nil {
		for _, pair := range [][2]*value{{a, b}, {b, a}} {
			all, positional := pair[0], pair[1]
			items := all.get("items")
			if all.get("prefixItems") != nil || items == nil || positional.get("prefixItems") == nil {
				continue
			}
			prefix := out.get("prefixItems")
			merged := &value{kind: 'a'}
			for i, p := range prefix.arr {
				v, err := merge(p, items, path+"/prefixItems/"+strconv.Itoa(i))
				if err != nil {
					return nil, err
				}
				merged.arr = append(merged.arr, v)
			}
			set("prefixItems", merged)
		}
	}
	// A closed schema's properties are its own: another's patterns would
	// let through names it refuses.
	for _, pair := range [][2]*value{{a, b}, {b, a}} {
		if addl := pair[0].get("additionalProperties"); addl != nil && !(addl.kind == 'b' && addl.b) &&
			pair[0].get("patternProperties") == nil && pair[1].get("patternProperties") != nil {
			return nil, genq.Errorf(genq.Invalid, "at %s: allOf of patternProperties and another schema's additionalProperties is not supported", path)
		}
	}
	// additionalProperties false (or a schema) in one schema holds every
	// property the other lists but it does not: such a property is
	// dropped from the merge (an instance with it is invalid), or its
	// schema meets the additionalProperties schema.
	for _, pair := range [][2]*value{{a, b}, {b, a}} {
		closedSide, other := pair[0], pair[1]
		addl := closedSide.get("additionalProperties")
		if addl == nil || addl.kind == 'b' && addl.b {
			continue
		}
		props := out.get("properties")
		if props == nil {
			continue
		}
		listed := closedSide.get("properties")
		kept := &value{kind: 'o'}
		for _, p := range props.obj {
			if listed != nil && listed.get(p.key) != nil || other.get("properties") == nil || other.get("properties").get(p.key) == nil {
				kept.obj = append(kept.obj, p)
				continue
			}
			if addl.kind == 'o' {
				v, err := merge(p.val, addl, path+"/properties/"+p.key)
				if err != nil {
					return nil, err
				}
				kept.obj = append(kept.obj, member{p.key, v})
			}
		}
		set("properties", kept)
	}
	if contradicts(out) {
		return &value{kind: 'b'}, nil
	}
	return out, nil
}

// mergeKeyword merges the values x (of a) and y (of b) of keyword k.
func mergeKeyword(k string, x, y, a, b *value, path string) (*value, error) {
	refuse := func() (*value, error) {
		return nil, genq.Errorf(genq.Invalid, "at %s: allOf with %q in two schemas that do not merge is not supported", path, k)
	}
	if sameJSON(x, y) {
		return x, nil
	}
	if !keywordOfJSONSchema(k) {
		return x, nil // an annotation or unknown word: either
	}
	switch k {
	case "type":
		return mergeTypes(x, y, path)
	case "required":
		if x.kind != 'a' || y.kind != 'a' {
			return refuse()
		}
		return union(x, y), nil
	case "properties", "$defs", "definitions":
		if x.kind != 'o' || y.kind != 'o' {
			return refuse()
		}
		return mergeMembers(x, y, func(key string, a, b *value) (*value, error) {
			if k != "properties" {
				return refuse()
			}
			return merge(a, b, path+"/properties/"+key)
		})
	case keyPatterns, keyNotPatterns:
		return union(x, y), nil
	case "prefixItems":
		return mergePrefixes(x, y, a, b, path)
	case "not":
		// Neither holds: not of either.
		return &value{kind: 'o', obj: []member{{"anyOf", &value{kind: 'a', arr: []*value{x, y}}}}}, nil
	case "uniqueItems":
		if x.kind != 'b' || y.kind != 'b' {
			return refuse()
		}
		return &value{kind: 'b', b: x.b || y.b}, nil
	case "dependentRequired", "dependencies":
		// Both schemas' dependencies hold: the lists of each name joined.
		if !namesOnly(x) || !namesOnly(y) {
			return refuse()
		}
		return mergeMembers(x, y, func(_ string, a, b *value) (*value, error) { return union(a, b), nil })
	case "items", "additionalProperties":
		if x.kind == 'a' || y.kind == 'a' { // draft 7's positional items
			return refuse()
		}
		return merge(x, y, path+"/"+k)
	case "multipleOf":
		return leastMultiple(x, y, refuse)
	case "minimum", "exclusiveMinimum", "minLength", "minItems":
		return extreme(x, y, true, refuse)
	case "maximum", "exclusiveMaximum", "maxLength", "maxItems":
		return extreme(x, y, false, refuse)
	case "enum":
		if x.kind != 'a' || y.kind != 'a' {
			return refuse()
		}
		out := &value{kind: 'a'}
		for _, v := range x.arr {
			if slices.ContainsFunc(y.arr, func(w *value) bool { return sameJSON(v, w) }) {
				out.arr = append(out.arr, v)
			}
		}
		return out, nil // empty: refused as unsatisfiable when compiled
	}
	return refuse()
}

// mergeTypes intersects two type keywords; an integer is a number.
func mergeTypes(x, y *value, path string) (*value, error) {
	list := func(v *value) []string {
		if v.kind == 's' {
			return []string{v.str}
		}
		var out []string
		for _, e := range v.arr {
			out = append(out, e.str)
		}
		return out
	}
	var out []*value
	for _, t := range list(x) {
		for _, u := range list(y) {
			var both string
			switch {
			case t == u:
				both = t
			case t == "integer" && u == "number", t == "number" && u == "integer":
				both = "integer"
			default:
				continue
			}
			if !slices.ContainsFunc(out, func(v *value) bool { return v.str == both }) {
				out = append(out, &value{kind: 's', str: both})
			}
		}
	}
	if len(out) == 0 {
		return nil, genq.WrapError(genq.Invalid, errNever, fmt.Sprintf("at %s: allOf's types have nothing in common: it can never be satisfied", path))
	}
	return &value{kind: 'a', arr: out}, nil
}

// leastMultiple is the multipleOf that two hold together: the least
// common multiple of two positive rationals p/q and r/s, lcm(p, r) over
// gcd(q, s), written as a decimal (refused where it has none).
func leastMultiple(x, y *value, refuse func() (*value, error)) (*value, error) {
	a, okA := x.rat()
	b, okB := y.rat()
	if x.kind != 'n' || y.kind != 'n' || !okA || !okB || a.Sign() <= 0 || b.Sign() <= 0 {
		return refuse()
	}
	gcd := new(big.Int).GCD(nil, nil, a.Num(), b.Num())
	num := new(big.Int).Mul(a.Num(), new(big.Int).Quo(b.Num(), gcd))
	den := new(big.Int).GCD(nil, nil, a.Denom(), b.Denom())
	lcm := new(big.Rat).SetFrac(num, den)
	_, k, ok := decimalParts(lcm)
	if !ok {
		return refuse()
	}
	return &value{kind: 'n', num: json.Number(lcm.FloatString(k))}, nil
}

// extreme is the larger (lower bounds) or smaller of two numbers.
func extreme(x, y *value, larger bool, refuse func() (*value, error)) (*value, error) {
	if x.kind != 'n' || y.kind != 'n' {
		return refuse()
	}
	fx, err1 := x.num.Float64()
	fy, err2 := y.num.Float64()
	if err1 != nil || err2 != nil {
		return refuse()
	}
	if (fx > fy) == larger {
		return x, nil
	}
	return y, nil
}

// sameJSON tells two equal JSON values, members in order.
func sameJSON(a, b *value) bool {
	var x, y bytes.Buffer
	a.encode(&x)
	b.encode(&y)
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// keywordOfJSONSchema tells a keyword JSON Schema defines as an assertion
// or applicator (enforced by genq or not).
func keywordOfJSONSchema(k string) bool {
	_, ok := enforced(k)
	// allOf and oneOf are compiled apart from the keywords enforced()
	// lists; merged as annotations, an allOf of two oneOfs kept one.
	return ok || unenforced(k) || k == "allOf" || k == "oneOf"
}

// distinct tells two schemas no instance satisfies both: their types
// differ, or, both objects, a property both require has values that
// differ (a const or enum discriminator). It is what oneOf needs to be
// compiled as anyOf: where the branches exclude each other, "exactly one"
// is "at least one".
func distinct(a, b *value) bool {
	if a.kind != 'o' || b.kind != 'o' {
		return a.kind == 'b' && !a.b || b.kind == 'b' && !b.b
	}
	ta, tb := typeSet(a), typeSet(b)
	if ta != nil && tb != nil {
		overlap := false
		for t := range ta {
			if tb[t] || t == "integer" && tb["number"] || t == "number" && tb["integer"] {
				overlap = true
			}
		}
		if !overlap {
			return true
		}
	}
	if (objectsOnly(a) || objectsOnly(b)) && (forbidsRequired(a, b) || forbidsRequired(b, a)) {
		return true
	}
	if va, vb := literals(a), literals(b); va != nil && vb != nil {
		return !slices.ContainsFunc(va, func(v *value) bool { return slices.ContainsFunc(vb, func(w *value) bool { return sameJSON(v, w) }) })
	}
	pa, pb := a.get("properties"), b.get("properties")
	if pa == nil || pb == nil {
		return false
	}
	for _, m := range pa.obj {
		other := pb.get(m.key)
		if other == nil || !requires(a, m.key) || !requires(b, m.key) {
			continue
		}
		if va, vb := literals(m.val), literals(other); va != nil && vb != nil &&
			!slices.ContainsFunc(va, func(v *value) bool { return slices.ContainsFunc(vb, func(w *value) bool { return sameJSON(v, w) }) }) {
			return true
		}
	}
	return false
}

func typeSet(s *value) map[string]bool {
	t := s.get("type")
	if t == nil {
		return nil
	}
	out := map[string]bool{}
	if t.kind == 's' {
		out[t.str] = true
	}
	for _, e := range t.arr {
		out[e.str] = true
	}
	return out
}

// literals are the values a schema's const or enum allows; nil when it
// has neither.
func literals(s *value) []*value {
	if s.kind != 'o' {
		return nil
	}
	if c := s.get("const"); c != nil {
		return []*value{c}
	}
	if e := s.get("enum"); e != nil && e.kind == 'a' {
		return e.arr
	}
	return nil
}

func requires(s *value, name string) bool {
	r := s.get("required")
	return r != nil && r.kind == 'a' && slices.ContainsFunc(r.arr, func(v *value) bool { return v.kind == 's' && v.str == name })
}

// union is arrays x and y joined, each value of y not in x after x's.
func union(x, y *value) *value {
	out := &value{kind: 'a', arr: slices.Clone(x.arr)}
	for _, n := range y.arr {
		if !slices.ContainsFunc(out.arr, func(m *value) bool { return sameJSON(m, n) }) {
			out.arr = append(out.arr, n)
		}
	}
	return out
}

// mergeMembers is objects x and y joined: y's members not in x after x's,
// and a member in both combined by both.
func mergeMembers(x, y *value, both func(key string, a, b *value) (*value, error)) (*value, error) {
	out := &value{kind: 'o', obj: slices.Clone(x.obj)}
	for _, m := range y.obj {
		i := slices.IndexFunc(out.obj, func(o member) bool { return o.key == m.key })
		if i < 0 {
			out.obj = append(out.obj, m)
			continue
		}
		v, err := both(m.key, out.obj[i].val, m.val)
		if err != nil {
			return nil, err
		}
		out.obj[i].val = v
	}
	return out, nil
}

// mergePrefixes merges prefixItems x (of a) and y (of b): item by item,
// and past the shorter one, the longer one's items with the other
// schema's items (which hold there).
func mergePrefixes(x, y, a, b *value, path string) (*value, error) {
	if x.kind != 'a' || y.kind != 'a' {
		return nil, genq.Errorf(genq.Invalid, "at %s: prefixItems must be an array of schemas", path)
	}
	if len(x.arr) < len(y.arr) {
		x, y, a, b = y, x, b, a
	}
	rest := b.get("items")
	if rest == nil {
		rest = &value{kind: 'b', b: true}
	}
	if rest.kind == 'a' {
		return nil, genq.Errorf(genq.Invalid, "at %s: allOf of prefixItems and an array of items is not supported", path)
	}
	out := &value{kind: 'a'}
	for i, v := range x.arr {
		other := rest
		if i < len(y.arr) {
			other = y.arr[i]
		}
		m, err := merge(v, other, path+"/prefixItems/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out.arr = append(out.arr, m)
	}
	return out, nil
}

// patternSupported tells whether genq follows pattern p: its automaton
// builds, alone.
func patternSupported(p *value) error {
	if p.kind != 's' {
		return genq.Errorf(genq.Invalid, "pattern must be a string")
	}
	c := &compiler{b: &grammar.Builder{Grammar: &grammar.Grammar{}}}
	_, err := c.pattern(p.str)
	return err
}

// objectsOnly tells a schema whose type is object alone.
func objectsOnly(s *value) bool {
	t := typeSet(s)
	return len(t) == 1 && t["object"]
}

// forbidsRequired tells that an object valid against a lacks a property b
// requires, or has fewer properties than b's minProperties: a does not
// allow the name (false, or closed by additionalProperties false with no
// patterns), or a is closed and lists fewer names.
func forbidsRequired(a, b *value) bool {
	props := a.get("properties")
	if props != nil && props.kind != 'o' {
		return false
	}
	addl := a.get("additionalProperties")
	closed := addl != nil && addl.kind == 'b' && !addl.b && a.get("patternProperties") == nil
	allows := func(name string) bool {
		var p *value
		if props != nil {
			p = props.get(name)
		}
		if p != nil {
			return !(p.kind == 'b' && !p.b)
		}
		return !closed
	}
	if r := b.get("required"); r != nil && r.kind == 'a' {
		for _, n := range r.arr {
			if n.kind == 's' && !allows(n.str) {
				return true
			}
		}
	}
	listed := 0
	if props != nil {
		listed = len(props.obj)
	}
	n, ok, err := count(b, "minProperties", "", maxCount)
	return closed && err == nil && ok && n > listed
}
