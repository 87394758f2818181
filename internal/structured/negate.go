package structured

import (
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// not, pushed down: an instance fails a plain schema exactly when it
// violates one of its keywords, and each keyword's violation is a plain
// schema of its own (below minimum is a number under exclusiveMaximum,
// a required name missing is an object whose property is false, a
// property's schema failing is that property present and its schema's
// not, nested, lowered where it is compiled). The negation of
// alternatives is the allOf of each one's negation. A keyword whose
// violation no plain schema says (uniqueItems, multipleOf, patternProperties,
// additionalProperties, propertyNames, integer as a type) is refused.

// negate is the alternatives of the instances that fail every one of brs.
// They evaluate nothing: not leaves no annotations.
func (c *compiler) negate(brs []branch, path string) ([]branch, error) {
	return c.negateEach(brs, path, func(vs []*value) []*value { return vs })
}

// negateEach is the allOf, over brs, of the alternatives keep leaves of
// each one's violations: all of them for an exact negation, fewer for
// fewerViolations.
func (c *compiler) negateEach(brs []branch, path string, keep func([]*value) []*value) ([]branch, error) {
	out := anything()
	for _, br := range brs {
		vs, err := c.violations(br.s, path)
		if err != nil {
			return nil, err
		}
		vs = keep(vs)
		alts := make([]branch, 0, len(vs))
		for _, v := range vs {
			alts = append(alts, branch{s: v})
		}
		if out, err = c.and(out, alts, path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// violations are plain schemas of the instances that fail s, which
// together take every one.
func (c *compiler) violations(s *value, path string) ([]*value, error) {
	switch s.kind {
	case 'b':
		if s.b {
			return nil, nil
		}
		return []*value{object()}, nil
	case 'o':
	default:
		return nil, genq.Errorf(genq.Invalid, "the schema at %s must be an object or a boolean", path)
	}
	refuse := func(k string) ([]*value, error) {
		return nil, genq.Errorf(genq.Invalid, "at %s: not over %q is not supported: genq cannot write the values that fail it as a schema", path, k)
	}
	var out []*value
	typed := func(t string, ms ...member) *value {
		return object(append([]member{{"type", &value{kind: 's', str: t}}}, ms...)...)
	}
	if t := s.get("type"); t != nil {
		types, err := typeList(s, path)
		if err != nil {
			return nil, err
		}
		integers := slices.Contains(types, "integer") && !slices.Contains(types, "number")
		if integers { // the numbers that are not integers
			out = append(out, typed("number", member{keyNotInteger, trueValue()}, member{keyShort, trueValue()}))
		}
		var others []*value
		for _, o := range []string{"null", "boolean", "object", "array", "string", "number"} {
			if !slices.Contains(types, o) && !(o == "number" && integers) {
				others = append(others, &value{kind: 's', str: o})
			}
		}
		if len(others) > 0 {
			out = append(out, object(member{"type", &value{kind: 'a', arr: others}}))
		}
	}
	hasPrefix := s.get("prefixItems") != nil
	leftOut := false // a format's failures
	for _, m := range s.obj {
		k, v := m.key, m.val
		if _, ok := enforced(k); !ok && !unenforced(k) {
			continue // an annotation: nothing fails it
		}
		switch k {
		case "type", "minContains", "maxContains":
			// type above; the bounds of contains with it.
		case "const":
			vs, err := c.otherValues([]*value{v}, path)
			if err != nil {
				return nil, err
			}
			out = append(out, vs...)
		case "enum":
			if v.kind != 'a' {
				return nil, genq.Errorf(genq.Invalid, "at %s: enum must be an array", path)
			}
			vs, err := c.otherValues(v.arr, path)
			if err != nil {
				return nil, err
			}
			out = append(out, vs...)
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			if v.kind != 'n' {
				return nil, genq.Errorf(genq.Invalid, "at %s: %s must be a number", path, k)
			}
			opposite := map[string]string{"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum",
				"exclusiveMinimum": "maximum", "exclusiveMaximum": "minimum"}[k]
			out = append(out, typed("number", member{opposite, v}, member{keyShort, trueValue()}))
		case "minLength", "minItems", "minProperties":
			n, _, err := count(s, k, path, maxCount)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				out = append(out, typed(typeOf(k), member{"max" + k[3:], number(n - 1)}))
			}
		case "maxLength", "maxItems", "maxProperties":
			n, _, err := count(s, k, path, maxCount)
			if err != nil {
				return nil, err
			}
			out = append(out, typed(typeOf(k), member{"min" + k[3:], number(n + 1)}))
		case "pattern":
			if v.kind != 's' {
				return nil, genq.Errorf(genq.Invalid, "at %s: pattern must be a string", path)
			}
			out = append(out, typed("string", member{keyNotPatterns, &value{kind: 'a', arr: []*value{v}}}))
		case keyNotInteger:
			out = append(out, typed("integer"))
		case keyShort: // what it leaves out is no schema's
			return nil, genq.Errorf(genq.Invalid, "at %s: not over the negation of a number's type, bounds or values is not supported", path)
		case keyPatterns, keyNotPatterns:
			flip := map[string]string{keyPatterns: keyNotPatterns, keyNotPatterns: keyPatterns}[k]
			for _, p := range v.arr {
				out = append(out, typed("string", member{flip, &value{kind: 'a', arr: []*value{p}}}))
			}
		case "format":
			// Validators read formats apart (ajv's date-time takes an
			// offset without minutes): the complement of genq's reading
			// would take values another validator's format allows. The
			// strings that fail it are left out instead, taking fewer
			// instances than the negation does, never more, where the
			// negation is not negated again and other violations remain.
			if err := c.checkFormat(v, path, false); err != nil {
				return nil, err
			}
			if _, ok := c.formatPattern(v.str); ok && c.formats {
				if c.negating > 0 {
					return refuse(k)
				}
				leftOut = true
				c.leftOut++
			}
		case "required":
			if v.kind != 'a' {
				return nil, genq.Errorf(genq.Invalid, "at %s: required must be an array of names", path)
			}
			for _, n := range v.arr {
				if n.kind != 's' {
					return nil, genq.Errorf(genq.Invalid, "at %s: required must be an array of names", path)
				}
				out = append(out, typed("object", member{"properties", object(member{n.str, falseSchema()})}))
			}
		case "dependentRequired", "dependencies":
			deps, err := dependentRequired(object(m), path)
			if err != nil {
				return nil, err
			}
			for _, d := range deps {
				out = append(out, typed("object", member{"required", nameList(d.a)},
					member{"properties", object(member{d.b, falseSchema()})}))
			}
		case "properties":
			if v.kind != 'o' {
				return nil, genq.Errorf(genq.Invalid, "at %s: properties must be an object of schemas", path)
			}
			for _, p := range v.obj {
				if p.val.kind == 'b' && p.val.b {
					continue
				}
				out = append(out, typed("object", member{"required", nameList(p.key)},
					member{"properties", object(member{p.key, notSchema(p.val)})}))
			}
		case "items":
			if v.kind == 'a' || hasPrefix {
				return refuse("items")
			}
			if v.kind == 'b' && v.b {
				continue
			}
			out = append(out, typed("array", member{"contains", notSchema(v)}))
		case "prefixItems":
			if v.kind != 'a' {
				return nil, genq.Errorf(genq.Invalid, "at %s: prefixItems must be an array of schemas", path)
			}
			for i, p := range v.arr {
				if p.kind == 'b' && p.b {
					continue
				}
				prefix := &value{kind: 'a'}
				for range i {
					prefix.arr = append(prefix.arr, &value{kind: 'b', b: true})
				}
				prefix.arr = append(prefix.arr, notSchema(p))
				out = append(out, typed("array", member{"minItems", number(i + 1)}, member{"prefixItems", prefix}))
			}
		case "contains":
			vs, err := containsViolations(s, v, path)
			if err != nil {
				return nil, err
			}
			for _, x := range vs {
				out = append(out, typed("array", x...))
			}
		case "uniqueItems":
			if v.kind == 'b' && v.b {
				return refuse(k)
			}
		case "additionalProperties":
			switch props := s.get("properties"); {
			case v.kind == 'b' && v.b:
			case v.kind == 'b' && (props == nil || len(props.obj) == 0) && s.get("patternProperties") == nil:
				// No property allowed: failing it is having one.
				out = append(out, typed("object", member{"minProperties", number(1)}))
			default:
				return refuse(k)
			}
		case "additionalItems", "propertyNames":
			if !(v.kind == 'b' && v.b) {
				return refuse(k)
			}
		default:
			return refuse(k)
		}
	}
	if leftOut && len(out) == 0 {
		return refuse("format") // nothing would be left
	}
	return out, nil
}

// typeOf is the type a length or count keyword applies to.
func typeOf(k string) string {
	t, _ := enforced(k)
	return t
}

// notSchema is the schema {"not": s}, lowered where it is compiled.
func notSchema(s *value) *value {
	switch {
	case s.kind == 'b':
		return &value{kind: 'b', b: !s.b}
	case len(s.obj) == 1 && s.obj[0].key == "not":
		return s.obj[0].val
	}
	return object(member{"not", s})
}

// containsViolations are the arrays that fail contains c with its bounds:
// too few items match it, or too many.
func containsViolations(s, cs *value, path string) ([][]member, error) {
	min, hasMin, err := containsBound(s, "minContains", path)
	if err != nil {
		return nil, err
	}
	if !hasMin {
		min = 1
	}
	max, hasMax, err := containsBound(s, "maxContains", path)
	if err != nil {
		return nil, err
	}
	var out [][]member
	if min >= 1 {
		out = append(out, []member{{"items", notSchema(cs)}})
	}
	if min >= 2 {
		out = append(out, []member{{"contains", cs}, {"maxContains", number(min - 1)}})
	}
	if hasMax {
		out = append(out, []member{{"contains", cs}, {"minContains", number(max + 1)}})
	}
	return out, nil
}

// otherValues are schemas of the values other than vals.
func (c *compiler) otherValues(vals []*value, path string) ([]*value, error) {
	typed := func(t string, ms ...member) *value {
		return object(append([]member{{"type", &value{kind: 's', str: t}}}, ms...)...)
	}
	byKind := map[byte][]*value{}
	for _, v := range vals {
		byKind[v.kind] = append(byKind[v.kind], v)
	}
	var out []*value
	if len(byKind['z']) == 0 {
		out = append(out, typed("null"))
	}
	for _, b := range []bool{true, false} {
		if !slices.ContainsFunc(byKind['b'], func(v *value) bool { return v.b == b }) {
			out = append(out, object(member{"const", &value{kind: 'b', b: b}}))
		}
	}
	out = append(out, otherNumbers(byKind['n'])...)
	if ss := byKind['s']; len(ss) > 0 {
		pats := &value{kind: 'a'}
		for _, v := range ss {
			pats.arr = append(pats.arr, &value{kind: 's', str: "^" + regexp.QuoteMeta(v.str) + "$"})
		}
		out = append(out, typed("string", member{keyNotPatterns, pats}))
	} else {
		out = append(out, typed("string"))
	}
	for _, kind := range []byte{'o', 'a'} {
		t := map[byte]string{'o': "object", 'a': "array"}[kind]
		if len(byKind[kind]) == 0 {
			out = append(out, typed(t))
			continue
		}
		// A value of the type other than each listed one: the allOf of
		// "other than this one", as alternatives.
		alts := anything()
		for _, v := range byKind[kind] {
			var others []*value
			if kind == 'o' {
				others = otherObjects(v)
			} else {
				others = otherArrays(v)
			}
			brs := make([]branch, 0, len(others))
			for _, o := range others {
				brs = append(brs, branch{s: o})
			}
			var err error
			if alts, err = c.and(alts, brs, path); err != nil {
				return nil, err
			}
		}
		for _, br := range alts {
			out = append(out, br.s)
		}
	}
	return out, nil
}

// otherNumbers are the numbers other than ns: the open intervals between
// them.
func otherNumbers(ns []*value) []*value {
	typed := func(ms ...member) *value {
		return object(append([]member{{"type", &value{kind: 's', str: "number"}}, {keyShort, trueValue()}}, ms...)...)
	}
	if len(ns) == 0 {
		return []*value{typed()}
	}
	type num struct {
		r *big.Rat
		v *value
	}
	var sorted []num
	for _, n := range ns {
		r, ok := n.rat()
		if !ok {
			continue
		}
		if !slices.ContainsFunc(sorted, func(m num) bool { return m.r.Cmp(r) == 0 }) {
			sorted = append(sorted, num{r, n})
		}
	}
	slices.SortFunc(sorted, func(a, b num) int { return a.r.Cmp(b.r) })
	out := []*value{typed(member{"exclusiveMaximum", sorted[0].v})}
	for i := 1; i < len(sorted); i++ {
		out = append(out, typed(member{"exclusiveMinimum", sorted[i-1].v}, member{"exclusiveMaximum", sorted[i].v}))
	}
	return append(out, typed(member{"exclusiveMinimum", sorted[len(sorted)-1].v}))
}

// otherObjects are the objects other than o: one of its names missing,
// one of its values different, or a name more.
func otherObjects(o *value) []*value {
	typed := func(ms ...member) *value {
		return object(append([]member{{"type", &value{kind: 's', str: "object"}}}, ms...)...)
	}
	var out []*value
	for _, m := range o.obj {
		out = append(out,
			typed(member{"properties", object(member{m.key, falseSchema()})}),
			typed(member{"required", nameList(m.key)}, member{"properties", object(member{m.key, notSchema(object(member{"const", m.val}))})}))
	}
	return append(out, typed(member{"minProperties", number(len(o.obj) + 1)}))
}

// otherArrays are the arrays other than a: another length, or an item
// different.
func otherArrays(a *value) []*value {
	typed := func(ms ...member) *value {
		return object(append([]member{{"type", &value{kind: 's', str: "array"}}}, ms...)...)
	}
	n := len(a.arr)
	out := []*value{typed(member{"minItems", number(n + 1)})}
	if n > 0 {
		out = append(out, typed(member{"maxItems", number(n - 1)}))
	}
	for i, v := range a.arr {
		prefix := &value{kind: 'a'}
		for range i {
			prefix.arr = append(prefix.arr, &value{kind: 'b', b: true})
		}
		prefix.arr = append(prefix.arr, notSchema(object(member{"const", v})))
		out = append(out, typed(member{"minItems", number(i + 1)}, member{"prefixItems", prefix}))
	}
	return out
}

// restrictedNumber matches the numbers s allows, of type t, held to
// keyNotInteger (not an integer: written as canonicalNumber writes one)
// and keyShort (at most 15 significant digits, no exponent), within s's
// bounds. keyShort keeps what genq writes apart from a bound or a listed
// value as validators that read numbers as doubles see them too: two
// decimals of 15 digits are two doubles.
func (c *compiler) restrictedNumber(s *value, t, path string) (grammar.Frag, error) {
	whole := t == "integer"
	if whole && s.get(keyNotInteger) != nil {
		return c.b.Alt(), nil
	}
	multiple := s.get("multipleOf") != nil
	if multiple && s.get(keyNotInteger) != nil && !fractionalMultiple(s, whole) {
		return c.b.Alt(), nil // a whole multipleOf's multiples are integers
	}
	parts := []func() (grammar.Frag, error){func() (grammar.Frag, error) {
		switch {
		case multiple:
			f, _, err := c.multiple(s, path, whole)
			return f, err
		case hasBounds(s):
			return c.bounded(s, path, whole)
		}
		return c.plainNumber(whole), nil
	}}
	if s.get(keyNotInteger) != nil {
		parts = append(parts, func() (grammar.Frag, error) { return c.canonicalNumber(true, false, nil), nil })
	}
	if s.get(keyShort) != nil {
		parts = append(parts, func() (grammar.Frag, error) { return c.shortNumber(whole), nil })
	}
	return c.intersect(parts)
}

// plainNumber is any number (whole: integer) in the builder of the moment,
// calling no rule.
func (c *compiler) plainNumber(whole bool) grammar.Frag {
	b := c.b
	if whole {
		return c.intPart()
	}
	return b.Seq(c.intPart(),
		b.Opt(b.Seq(b.Lit("."), c.digits(1, maxFracDigits))),
		b.Opt(b.Seq(b.Ranges('e', 'e', 'E', 'E'), b.Opt(b.Ranges('+', '+', '-', '-')), c.digits(1, maxExpDigits))))
}

// maxShortDigits is the significant digits a double keeps of every decimal.
const maxShortDigits = 15

// shortNumber matches numbers of at most maxShortDigits digits (a leading
// 0 aside), with no exponent; whole: with no fraction.
func (c *compiler) shortNumber(whole bool) grammar.Frag {
	b := c.b
	start, signed, end := b.Node(), b.Node(), b.Node()
	b.Eps(start, signed)
	b.ByteEdge(start, '-', '-', signed)
	// total[k]: k digits written, the last of a fraction; ints[k]: k digits
	// of the integer part.
	total := make([]int32, maxShortDigits+1)
	for k := 1; k <= maxShortDigits; k++ {
		total[k] = b.Node()
		b.Eps(total[k], end)
		if k > 1 {
			b.ByteEdge(total[k-1], '0', '9', total[k])
		}
	}
	fraction := func(from int32, k int) {
		if whole || k >= maxShortDigits {
			return
		}
		dot := b.Node()
		b.ByteEdge(from, '.', '.', dot)
		b.ByteEdge(dot, '0', '9', total[k+1])
	}
	zero := b.Node()
	b.ByteEdge(signed, '0', '0', zero)
	b.Eps(zero, end)
	fraction(zero, 0)
	prev := signed
	for k := 1; k <= maxShortDigits; k++ {
		n := b.Node()
		lo := byte('0')
		if k == 1 {
			lo = '1'
		}
		b.ByteEdge(prev, lo, '9', n)
		b.Eps(n, end)
		fraction(n, k)
		prev = n
	}
	return grammar.Frag{Start: start, End: end}
}

// shortDigits tells a number written with at most maxShortDigits
// significant digits and no exponent.
func shortDigits(n string) bool {
	if strings.ContainsAny(n, "eE") {
		return false
	}
	digits := strings.TrimLeft(strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, n), "0")
	return len(digits) <= maxShortDigits
}

func trueValue() *value { return &value{kind: 'b', b: true} }

// fewerViolations is negate(q) for oneOf's branch p, where negating q
// leaves out a format's failures (in q, or in its subschemas' negations
// compiled later) or its exact negation makes too many alternatives, and
// the result is not negated again: as the negation may take fewer
// instances than it says there, it keeps of each branch's violations only
// those of its type and of one name it requires that p does not (all of
// them where there is no such name). They take p's
// instances that lack q's own properties with one copy of p, not one per
// keyword of q (GitHub's owner, a user or an enterprise whose properties
// hold uri formats: docs/text.md).
func (c *compiler) fewerViolations(p, q []branch, path string) ([]branch, error) {
	return c.negateEach(q, path, func(vs []*value) []*value { return typeAndOneName(p, vs) })
}

// typeAndOneName keeps of vs those of their type and the first of a name
// required that p does not require in every branch; all of vs where no
// such name is.
func typeAndOneName(p []branch, vs []*value) []*value {
	var kept []*value
	named := false
	for _, v := range vs {
		switch name, ok := absentName(v); {
		case len(v.obj) == 1 && v.obj[0].key == "type":
			kept = append(kept, v)
		case ok && !named && !requiredByAll(p, name):
			kept, named = append(kept, v), true
		}
	}
	if !named {
		return vs
	}
	return kept
}

// absentName is the name of a required property violations says is
// missing, where v says that alone.
func absentName(v *value) (string, bool) {
	props := v.get("properties")
	if v.kind != 'o' || len(v.obj) != 2 || v.get("type") == nil || props == nil || len(props.obj) != 1 {
		return "", false
	}
	if f := props.obj[0].val; f.kind != 'b' || f.b {
		return "", false
	}
	return props.obj[0].key, true
}

// requiredByAll tells whether every branch of p requires name, so that no
// instance of p lacks it.
func requiredByAll(p []branch, name string) bool {
	for _, br := range p {
		req := br.s.get("required")
		if req == nil || req.kind != 'a' || !slices.ContainsFunc(req.arr, func(n *value) bool { return n.kind == 's' && n.str == name }) {
			return false
		}
	}
	return true
}

// holdsFormat tells whether a format genq asserts is in brs' schemas or
// any schema within them, $ref's targets included.
func (c *compiler) holdsFormat(brs []branch) bool {
	seen := map[*value]bool{}
	var holds func(v *value) bool
	holds = func(v *value) bool {
		if seen[v] {
			return false
		}
		seen[v] = true
		for _, m := range v.obj {
			if m.key == "format" && m.val.kind == 's' {
				if _, ok := c.formatPattern(m.val.str); ok && c.formats {
					return true
				}
			}
			if m.key == "$ref" {
				if t, err := c.refTarget(m.val, ""); err == nil && holds(t) {
					return true
				}
			}
			if holds(m.val) {
				return true
			}
		}
		return slices.ContainsFunc(v.arr, holds)
	}
	return slices.ContainsFunc(brs, func(br branch) bool { return holds(br.s) })
}

// maxNegationDepth bounds how deep negatable looks for negations within
// negations before it gives up (and says no).
const maxNegationDepth = 8

// negatable tells whether brs' exact negation lowers: the product of
// their violations stays within maxBranches, and each violation's own
// negated subschemas (a property's not, nested) lower and negate in turn.
// Those are lowered only where an alternative is compiled, past the
// point where a oneOf could still choose fewer violations: a oneOf or a
// format within one would refuse the whole schema. seen holds the
// subschemas already checked, by identity.
func (c *compiler) negatable(brs []branch, path string, depth int, seen map[*value]bool) bool {
	if depth > maxNegationDepth {
		return false
	}
	c.negating++
	defer func() { c.negating-- }()
	neg, err := c.negate(brs, path)
	if err != nil {
		return false
	}
	for _, br := range neg {
		if !c.negatedWithin(br.s, path, depth, seen) {
			return false
		}
	}
	return true
}

// negatedWithin tells whether every not within v (a violation, which
// holds them where a property, an item or contains must fail a schema)
// lowers and negates.
func (c *compiler) negatedWithin(v *value, path string, depth int, seen map[*value]bool) bool {
	if seen[v] {
		return true
	}
	seen[v] = true
	switch v.kind {
	case 'a':
		for _, e := range v.arr {
			if !c.negatedWithin(e, path, depth, seen) {
				return false
			}
		}
	case 'o':
		for _, m := range v.obj {
			if m.key != "not" {
				if !c.negatedWithin(m.val, path, depth, seen) {
					return false
				}
				continue
			}
			brs, err := c.lower(m.val, path+"/not", false, depth+1)
			if err != nil || !c.negatable(brs, path+"/not", depth+1, seen) {
				return false
			}
		}
	}
	return true
}
