package structured

import "slices"

// Contradictions a merge can see without compiling. Lowering an
// overlapping oneOf ands each branch with the others' violations; where
// two branches share a property's schema S (GitHub's rulesets: three
// branches, each an allOf of one common part and a part of its own), a
// violation says "S fails" where the branch says "S holds". Compiled,
// such an alternative is empty, but only after its whole automaton was
// built: dropped at the merge, the lowering makes a few alternatives
// instead of the product of every violation.

// contradicts tells a merged schema no instance satisfies: its own
// keywords imply what its not forbids, or an object must have a property
// whose schema is false.
func contradicts(s *value) bool {
	if s.kind != 'o' {
		return false
	}
	if n := s.get("not"); n != nil && implies(without(s, "not"), n) {
		return true
	}
	props := s.get("properties")
	if props == nil || props.kind != 'o' || !objectsOnly(s) {
		return false
	}
	for _, p := range props.obj {
		if p.val.kind == 'b' && !p.val.b && requires(s, p.key) {
			return true
		}
	}
	return false
}

// keywordGroups are keywords whose meaning rests on others of their
// schema (additionalProperties on properties, items on prefixItems,
// draft 4's boolean exclusiveMinimum on minimum): implies compares such a
// group whole.
var keywordGroups = [][]string{
	{"properties", "patternProperties", "additionalProperties"},
	{"prefixItems", "items", "additionalItems"},
	{"contains", "minContains", "maxContains"},
	{"if", "then", "else"},
	{"minimum", "exclusiveMinimum"},
	{"maximum", "exclusiveMaximum"},
}

// implies tells, conservatively, that every instance valid against m is
// valid against n: each keyword of n that asserts is implied by m's
// keywords (the same value, a subset of types, literals or required
// names, a tighter count, a property's schema implied). false where it
// cannot tell.
func implies(m, n *value) bool {
	switch {
	case m == n:
		return true
	case m.kind == 'b' && !m.b:
		return true
	case n.kind == 'b':
		return n.b
	case m.kind != 'o' || n.kind != 'o':
		return false
	}
	// What these assert rests on more than this schema; draft 3's
	// keywords genq refuses by name where they assert.
	for _, k := range []string{"unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "divisibleBy", "disallow", "extends"} {
		if n.get(k) != nil {
			return false
		}
	}
	for _, mem := range n.obj {
		if !keywordOfJSONSchema(mem.key) {
			continue // an annotation: every instance satisfies it
		}
		if !impliesKeyword(m, n, mem.key, mem.val) {
			return false
		}
	}
	return true
}

// impliesKeyword tells that m's keywords imply n's keyword k of value y.
func impliesKeyword(m, n *value, k string, y *value) bool {
	x := m.get(k)
	if g := groupOf(k); g != nil && !(k == "properties" && openProperties(n)) &&
		!(k == "items" && positionless(m) && positionless(n)) {
		return sameGroup(m, n, g)
	}
	switch k {
	case "type":
		return x != nil && typesWithin(typeSet(m), typeSet(n))
	case "enum", "const":
		lm, ln := literals(m), literals(n)
		return lm != nil && ln != nil && within(lm, ln)
	case "required":
		return x != nil && x.kind == 'a' && y.kind == 'a' && within(y.arr, x.arr)
	case "properties":
		return x != nil && x.kind == 'o' && y.kind == 'o' && !slices.ContainsFunc(y.obj, func(p member) bool {
			mp := x.get(p.key)
			return !(p.val.kind == 'b' && p.val.b) && (mp == nil || !implies(mp, p.val))
		})
	case "items":
		return x != nil && implies(x, y)
	case "allOf":
		return y.kind == 'a' && !slices.ContainsFunc(y.arr, func(b *value) bool { return !implies(m, b) })
	case "anyOf":
		if x != nil && sameJSON(x, y) {
			return true
		}
		return y.kind == 'a' && slices.ContainsFunc(y.arr, func(b *value) bool { return implies(m, b) })
	case "minLength", "minItems", "minProperties":
		c, ok := compareCounts(x, y)
		return ok && c >= 0
	case "maxLength", "maxItems", "maxProperties":
		c, ok := compareCounts(x, y)
		return ok && c <= 0
	}
	return x != nil && sameJSON(x, y)
}

// groupOf is the keyword group k belongs to, or nil.
func groupOf(k string) []string {
	for _, g := range keywordGroups {
		if slices.Contains(g, k) {
			return g
		}
	}
	return nil
}

// openProperties tells a schema whose properties no other keyword of its
// reads: each listed property's schema holds alone.
func openProperties(s *value) bool {
	return s.get("patternProperties") == nil && s.get("additionalProperties") == nil
}

// positionless tells a schema whose items, if any, hold every item.
func positionless(s *value) bool {
	it := s.get("items")
	return s.get("prefixItems") == nil && s.get("additionalItems") == nil && (it == nil || it.kind != 'a')
}

// sameGroup tells m and n hold the keywords of g alike: each present in
// both with the same value, or in neither.
func sameGroup(m, n *value, g []string) bool {
	for _, k := range g {
		x, y := m.get(k), n.get(k)
		if (x == nil) != (y == nil) || x != nil && !sameJSON(x, y) {
			return false
		}
	}
	return true
}

// within tells every value of a is one of b's, as JSON.
func within(a, b []*value) bool {
	return !slices.ContainsFunc(a, func(v *value) bool {
		return !slices.ContainsFunc(b, func(w *value) bool { return sameJSON(v, w) })
	})
}

// typesWithin tells every type of a is one of b's (an integer is a
// number).
func typesWithin(a, b map[string]bool) bool {
	if a == nil || b == nil {
		return false
	}
	for t := range a {
		if !b[t] && !(t == "integer" && b["number"]) {
			return false
		}
	}
	return true
}

// compareCounts compares two numbers; false where either is none.
func compareCounts(x, y *value) (int, bool) {
	if x == nil || x.kind != 'n' || y.kind != 'n' {
		return 0, false
	}
	a, okA := x.rat()
	b, okB := y.rat()
	if !okA || !okB {
		return 0, false
	}
	return a.Cmp(b), true
}
