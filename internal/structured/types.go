package structured

// The fragments each JSON type compiles to: whitespace, characters and
// numbers, the built-in rules, strings, arrays and objects.

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
)

// ws is whitespace between two tokens: nothing, a space, or a newline and
// up to maxIndent spaces. It is built by hand, a chain of one node per
// space, because it stands between every two tokens of a grammar: the
// general constructions would make it three times the nodes.
func (c *compiler) ws() frag {
	b := c.b
	start, end, indent := b.node(), b.node(), b.node()
	b.eps(start, end)
	b.byteEdge(start, ' ', ' ', end)
	b.byteEdge(start, '\n', '\n', indent)
	b.eps(indent, end)
	for range maxIndent {
		next := b.node()
		b.byteEdge(indent, ' ', ' ', next)
		b.eps(next, end)
		indent = next
	}
	return frag{start, end}
}

// char matches one character of a JSON string's body: a code point in valid
// UTF-8 other than '"', '\' and controls, or an escape. A surrogate's \u
// escape is one only in a pair, high then low, so that one match is always
// one code point.
func (c *compiler) char() frag { return c.b.jsonChar() }

// plainChar is a character of a JSON string written as itself, not
// escaped.
func (c *compiler) plainChar() frag { return c.b.plainChar() }

// digits matches min to max decimal digits (max < 0: any number). The
// optional ones are a chain of one node per digit, as ws's spaces are.
func (c *compiler) digits(min, max int) frag {
	b := c.b
	if max < 0 {
		return b.repeat(min, max, func() frag { return b.ranges('0', '9') })
	}
	start := b.node()
	cur := start
	for range min {
		next := b.node()
		b.byteEdge(cur, '0', '9', next)
		cur = next
	}
	end := b.node()
	b.eps(cur, end)
	for range max - min {
		next := b.node()
		b.byteEdge(cur, '0', '9', next)
		b.eps(next, end)
		cur = next
	}
	return frag{start, end}
}

func (c *compiler) intPart() frag {
	b := c.b
	return b.seq(b.opt(b.lit("-")), b.alt(b.lit("0"), b.seq(b.ranges('1', '9'), c.digits(0, maxIntDigits-1))))
}

func (c *compiler) buildBuiltins() {
	b := c.b
	c.bi.str = b.newRule(stringRuleName)
	c.bi.num = b.newRule("number")
	c.bi.integer = b.newRule("integer")
	c.bi.value = b.newRule(anyValueRule)
	c.bi.object = b.newRule(anyObjectRule)
	c.bi.array = b.newRule(anyArrayRule)
	// Every other key's rest (otherKey): a builtin, so that its masks,
	// and the walks of tokens into it, are the Vocab's, worked out once.
	c.rest = b.newRule("plain string rest")

	b.define(c.bi.str, b.seq(b.lit(`"`), b.star(c.char()), b.lit(`"`)))
	b.define(c.bi.integer, c.intPart())
	b.define(c.bi.num, b.seq(c.intPart(),
		b.opt(b.seq(b.lit("."), c.digits(1, maxFracDigits))),
		b.opt(b.seq(b.ranges('e', 'e', 'E', 'E'), b.opt(b.ranges('+', '+', '-', '-')), c.digits(1, maxExpDigits)))))
	b.define(c.bi.value, b.alt(b.call(c.bi.object), b.call(c.bi.array), b.call(c.bi.str), b.call(c.bi.num),
		b.lit("true"), b.lit("false"), b.lit("null")))
	b.define(c.bi.object, c.mapObject(func() frag { return b.call(c.bi.value) }))
	b.define(c.bi.array, c.list(0, -1, func() frag { return b.call(c.bi.value) }))
	b.define(c.rest, b.seq(b.star(c.plainChar()), b.lit(`"`)))
}

// mapObject matches an object with any keys whose values match val.
func (c *compiler) mapObject(val func() frag) frag {
	b := c.b
	member := func() frag { return b.seq(b.call(c.bi.str), c.ws(), b.lit(":"), c.ws(), val()) }
	return b.seq(b.lit("{"), c.ws(),
		b.opt(b.seq(member(), b.star(b.seq(c.ws(), b.lit(","), c.ws(), member())), c.ws())),
		b.lit("}"))
}

// list matches an array of min to max items (max < 0: no bound).
func (c *compiler) list(min, max int, item func() frag) frag {
	b := c.b
	if max == 0 {
		return b.seq(b.lit("["), c.ws(), b.lit("]"))
	}
	restMax := -1
	if max > 0 {
		restMax = max - 1
	}
	restMin := 0
	if min > 1 {
		restMin = min - 1
	}
	items := b.seq(item(), b.counted(restMin, restMax, func() frag { return b.seq(c.ws(), b.lit(","), c.ws(), item()) }), c.ws())
	if min == 0 {
		items = b.opt(items)
	}
	return b.seq(b.lit("["), c.ws(), items, b.lit("]"))
}

func count(s *value, key, path string, limit int) (int, bool, error) {
	v := s.get(key)
	if v == nil {
		return 0, false, nil
	}
	n, err := strconv.Atoi(numberText(v.num.String())) // 2.0 is 2
	if v.kind != 'n' || err != nil || n < 0 {
		return 0, false, genq.Errorf(genq.Invalid, "at %s: %s must be a non-negative integer", path, key)
	}
	if n > limit {
		return 0, false, genq.Errorf(genq.Invalid, "at %s: %s is %d; genq enforces at most %d", path, key, n, limit)
	}
	return n, true, nil
}

// bounds are minKey and maxKey where they unroll: at most maxRepeat.
func bounds(s *value, minKey, maxKey, path string) (int, int, error) {
	return boundsUpTo(s, minKey, maxKey, path, maxRepeat)
}

// boundsUpTo are minKey and maxKey (max -1 when absent), each at most limit.
func boundsUpTo(s *value, minKey, maxKey, path string, limit int) (int, int, error) {
	min, _, err := count(s, minKey, path, limit)
	if err != nil {
		return 0, 0, err
	}
	max, hasMax, err := count(s, maxKey, path, limit)
	if err != nil {
		return 0, 0, err
	}
	if !hasMax {
		max = -1
	} else if max < min {
		return 0, 0, genq.Errorf(genq.Invalid, "at %s: %s (%d) is below %s (%d): it can never be satisfied", path, maxKey, max, minKey, min)
	}
	return min, max, nil
}

func (c *compiler) str(s *value, path string) (frag, error) {
	b := c.b
	keys, parts, err := c.stringParts(s, path)
	if err != nil {
		return frag{}, err
	}
	if s.get(keyPatterns) != nil || s.get(keyNotPatterns) != nil {
		return c.patternString(s, keys, parts, path)
	}
	switch len(parts) {
	case 0:
		return b.call(c.bi.str), nil
	case 1:
		return c.sharedString(keys[0], parts[0])
	}
	f, err := c.sharedString(strings.Join(keys, " and "), func() (frag, error) { return c.intersect(parts) })
	if err != nil {
		return frag{}, genq.WrapError(genq.ErrorCode(err), err, "at "+path+": "+genq.ErrorMessage(err))
	}
	return f, nil
}

// stringParts are the automata of whole JSON strings a string schema's
// keywords make (pattern, format, lengths), each built in c.b when called,
// and the keys that name them.
func (c *compiler) stringParts(s *value, path string) ([]string, []func() (frag, error), error) {
	min, max, err := boundsUpTo(s, "minLength", "maxLength", path, maxCount)
	if err != nil {
		return nil, nil, err
	}
	// Each constraint is an automaton of whole JSON strings; more than one
	// is their product.
	var keys []string
	var parts []func() (frag, error)
	if pat := s.get("pattern"); pat != nil {
		if pat.kind != 's' {
			return nil, nil, genq.Errorf(genq.Invalid, "at %s: pattern must be a string", path)
		}
		keys = append(keys, "pattern "+pat.str)
		parts = append(parts, func() (frag, error) {
			f, err := c.pattern(pat.str)
			if err != nil {
				return frag{}, genq.WrapError(genq.Invalid, err, "at "+path+": "+genq.ErrorMessage(err))
			}
			return f, nil
		})
	}
	// A format genq knows is enforced, as OpenAI's structured outputs do,
	// unless the schema's meta-schema makes it an annotation (c.formats);
	// one it does not know is an annotation, as the spec says.
	if format := s.get("format"); format != nil {
		if format.kind != 's' {
			return nil, nil, genq.Errorf(genq.Invalid, "at %s: format must be a string", path)
		}
		if err := c.checkFormat(format, path); err != nil {
			return nil, nil, err
		}
		if p, ok := c.formatPattern(format.str); ok && c.formats {
			keys = append(keys, "pattern "+p)
			parts = append(parts, func() (frag, error) { return c.formatRegex(p) })
		}
	}
	if min > 0 || max >= 0 {
		keys = append(keys, fmt.Sprintf("length %d %d", min, max))
		parts = append(parts, func() (frag, error) {
			b := c.b // the builder of the moment: a product builds each part alone
			return b.seq(b.lit(`"`), b.counted(min, max, c.char), b.lit(`"`)), nil
		})
	}
	if err := countsAlone(s, min, max, len(parts), path); err != nil {
		return nil, nil, err
	}
	return keys, parts, nil
}

// sharedString compiles a string with bounds or a pattern into a rule of
// its own, named by key, built once per grammar. Its nodes are numbered
// contiguously and the rule calls nothing, so the same key builds the same
// nodes in every grammar: their masks, which cost a walk of nearly the
// whole vocabulary each, are kept per Vocab under the key and shared by
// every grammar that holds the rule.
func (c *compiler) sharedString(key string, build func() (frag, error)) (frag, error) {
	if r, ok := c.shared[key]; ok {
		return c.b.call(r), nil
	}
	first := int32(len(c.b.g.nodes))
	r := c.b.newRule(key)
	f, err := build()
	if err != nil {
		return frag{}, err
	}
	c.b.define(r, f)
	if c.b.err != nil {
		return frag{}, c.b.err
	}
	c.shared[key] = r
	c.b.g.sharedRules = append(c.b.g.sharedRules, sharedRange{key: key, first: first, end: int32(len(c.b.g.nodes))})
	return c.b.call(r), nil
}

func (c *compiler) array(s *value, path string) (frag, error) {
	min, max, err := boundsUpTo(s, "minItems", "maxItems", path, maxCount)
	if err != nil {
		return frag{}, err
	}
	if err := countedItems(s, min, max, path); err != nil {
		return frag{}, err
	}
	// Positional items: 2020-12's prefixItems, the rest after them
	// items; or draft 7's items as an array, the rest additionalItems.
	prefix, rest, restAt := s.get("prefixItems"), s.get("items"), "/items"
	if rest != nil && rest.kind == 'a' {
		prefix, rest, restAt = rest, s.get("additionalItems"), "/additionalItems"
	}
	if prefix != nil && prefix.kind != 'a' {
		return frag{}, genq.Errorf(genq.Invalid, "at %s: prefixItems must be an array of schemas", path)
	}
	if s.get("contains") != nil {
		f, ok, err := c.containsArray(s, s.get("items"), min, max, path, "/items")
		if err != nil || ok {
			return f, err
		}
	}
	unique, err := uniqueItems(s, path)
	if err != nil {
		return frag{}, err
	}
	if unique {
		var pre []*value
		if prefix != nil {
			pre = prefix.arr
		}
		f, ok, err := c.uniqueArray(pre, rest, min, max, path, restAt)
		if err != nil || ok {
			return f, err
		}
	}
	if prefix != nil {
		return c.tuple(prefix.arr, rest, min, max, path, restAt)
	}
	if rest == nil {
		return c.list(min, max, func() frag { return c.b.call(c.bi.value) }), nil
	}
	r, err := c.ruleOf(rest, path+restAt)
	if err != nil {
		return frag{}, err
	}
	return c.list(min, max, func() frag { return c.b.call(r) }), nil
}

// tuple matches an array whose first items follow prefix, a schema each,
// and whose others follow rest (nil: any value; false: none), from lo to
// hi items (hi < 0: no bound). An array may stop before its prefix ends.
func (c *compiler) tuple(prefix []*value, rest *value, lo, hi int, path, restAt string) (frag, error) {
	b := c.b
	open := b.seq(b.lit("["), c.ws())
	end := b.node()
	closeAt := func(n int32, items int) {
		if items < lo {
			return
		}
		cl := b.lit("]")
		if items > 0 {
			cl = b.seq(c.ws(), b.lit("]"))
		}
		b.eps(n, cl.start)
		b.eps(cl.end, end)
	}
	at := open.end
	closeAt(at, 0)
	k := 0
	for i, p := range prefix {
		if hi >= 0 && i >= hi {
			break
		}
		r, err := c.ruleOf(p, path+"/prefixItems/"+strconv.Itoa(i))
		if err != nil {
			return frag{}, err
		}
		item := b.call(r)
		if i > 0 {
			item = b.seq(c.ws(), b.lit(","), c.ws(), item)
		}
		b.eps(at, item.start)
		at, k = item.end, i+1
		if i+1 < len(prefix) {
			closeAt(at, i+1)
		}
	}
	if k < len(prefix) || rest != nil && rest.kind == 'b' && !rest.b { // no items after the prefix
		closeAt(at, k)
		return frag{open.start, end}, b.err
	}
	item := func() frag { return b.call(c.bi.value) }
	if rest != nil {
		r, err := c.ruleOf(rest, path+restAt)
		if err != nil {
			return frag{}, err
		}
		item = func() frag { return b.call(r) }
	}
	restMax := -1
	if hi >= 0 {
		restMax = hi - k
	}
	more := b.repeat(max(0, lo-k), restMax, func() frag { return b.seq(c.ws(), b.lit(","), c.ws(), item()) })
	b.eps(at, more.start)
	closeAt(more.end, max(k, lo))
	return frag{open.start, end}, b.err
}

func (c *compiler) object(s *value, path string) (frag, error) {
	b := c.b
	props := s.get("properties")
	if props != nil && props.kind != 'o' {
		return frag{}, genq.Errorf(genq.Invalid, "at %s: properties must be an object", path)
	}
	required := map[string]bool{}
	addl := s.get("additionalProperties")
	names, err := c.propertyNames(s, path)
	if err != nil {
		return frag{}, err
	}
	// A name the object must be able to write that properties does not
	// list (a required one, or one dependentRequired names) is listed
	// last, its value what an other property's would be: the patterns'
	// schemas its name matches, or additionalProperties' (none in a closed
	// object).
	addUnlisted := func(name string) error {
		if props != nil && props.get(name) != nil {
			return nil
		}
		schema := &value{kind: 'b', b: true}
		switch ps := c.patternSchemas(s, name); {
		case len(ps) > 0:
			for _, p := range ps {
				var err error
				if schema, err = merge(schema, p, path+"/required"); err != nil {
					return err
				}
			}
		case addl != nil:
			schema = addl
		case c.closed:
			schema = &value{kind: 'b'}
		}
		if props == nil {
			props = &value{kind: 'o'}
		} else {
			props = &value{kind: 'o', obj: slices.Clone(props.obj)}
		}
		props.obj = append(props.obj, member{name, schema})
		return nil
	}
	if r := s.get("required"); r != nil {
		if r.kind != 'a' {
			return frag{}, genq.Errorf(genq.Invalid, "at %s: required must be an array of names", path)
		}
		for _, n := range r.arr {
			if n.kind != 's' {
				return frag{}, genq.Errorf(genq.Invalid, "at %s: required must be an array of names", path)
			}
			required[n.str] = true
			if err := addUnlisted(n.str); err != nil {
				return frag{}, err
			}
		}
	}
	deps, err := dependentRequired(s, path)
	if err != nil {
		return frag{}, err
	}
	deps, implied := resolveDependencies(deps, required)
	for _, n := range implied { // required by a required property's dependencies
		if err := addUnlisted(n); err != nil {
			return frag{}, err
		}
	}
	// The names a dependency requires first, then those that require
	// them, as the instances are written most often.
	for _, target := range []bool{true, false} {
		for _, d := range deps {
			n := d.a
			if target {
				n = d.b
			}
			if err := addUnlisted(n); err != nil {
				return frag{}, err
			}
		}
	}
	// Names no property lists, and no pattern matches, take
	// additionalProperties: any value where it is left out or true, unless
	// objects are closed.
	var unmatched *value
	switch {
	case addl != nil && addl.kind == 'o':
		unmatched = addl
	case (addl == nil || addl.kind == 'b' && addl.b) && !c.closed:
		unmatched = &value{kind: 'b', b: true}
	}
	patterns, err := c.patternMembers(s, props, path, names, unmatched)
	if err != nil {
		return frag{}, err
	}
	minP, maxP, err := bounds(s, "minProperties", "maxProperties", path)
	if err != nil {
		return frag{}, err
	}
	counted := minP > 0 || maxP >= 0
	if (props == nil || len(props.obj) == 0) && patterns == nil && names == nil && !counted {
		// Without properties the object is a map: its values follow
		// additionalProperties, or are any value.
		switch {
		case addl != nil && addl.kind == 'b' && !addl.b:
			return b.seq(b.lit("{"), c.ws(), b.lit("}")), nil
		case addl != nil && addl.kind == 'o':
			r, err := c.ruleOf(addl, path+"/additionalProperties")
			if err != nil {
				return frag{}, err
			}
			return c.mapObject(func() frag { return b.call(r) }), nil
		}
		return b.call(c.bi.object), nil
	}
	if props == nil {
		props = &value{kind: 'o'}
	}
	ch := newMemberChain(c, minP, maxP)
	anyOrder := !c.strict && len(props.obj) > 1 && len(props.obj) <= maxAnyOrder
	var presence []presence
	if !anyOrder {
		if presence, err = presenceRules(deps, props, path); err != nil {
			return frag{}, err
		}
	}
	// Properties come in any order (anyOrder) or in the schema's; required
	// ones always, optional ones may be left out.
	var rules []int32
	for i, m := range props.obj {
		var buf bytes.Buffer
		writeString(&buf, m.key)
		p := path + "/properties/" + m.key
		schema := m.val
		if !names.allowName(m.key) {
			schema = &value{kind: 'b'} // a name propertyNames refuses: never written
		}
		for _, pm := range c.patternSchemas(s, m.key) {
			if schema, err = merge(schema, pm, p); err != nil {
				return frag{}, err
			}
		}
		v, err := c.compile(schema, p)
		if err != nil {
			return frag{}, err
		}
		r := b.newRule(p + " member")
		b.define(r, b.seq(b.lit(buf.String()), c.ws(), b.lit(":"), c.ws(), v))
		if anyOrder {
			rules = append(rules, r)
			continue
		}
		if err := ch.member(r, !required[m.key], presence[i]); err != nil {
			return frag{}, genq.WrapError(genq.ErrorCode(err), err, "at "+path+": "+genq.ErrorMessage(err))
		}
	}
	if anyOrder {
		ch.anyOrder(rules, closable(props, required, deps))
	}
	// Other properties, after the listed ones: with patternProperties,
	// told apart by the patterns their names match (patternMembers); else
	// their values follow unmatched. At most MaxOtherProperties, or
	// maxProperties' own bound where it is larger.
	var other func() frag
	switch {
	case patterns != nil:
		other = patterns
	case unmatched != nil:
		r := c.bi.value
		if unmatched.kind == 'o' {
			if r, err = c.ruleOf(unmatched, path+"/additionalProperties"); err != nil {
				return frag{}, err
			}
		}
		key, err := c.otherKey(props, path, names)
		if err != nil {
			return frag{}, err
		}
		other = func() frag { return b.seq(b.call(key), c.ws(), b.lit(":"), c.ws(), b.call(r)) }
	}
	if other != nil {
		r := b.newRule(path + " other member")
		b.define(r, other())
		ch.others(r, max(MaxOtherProperties, maxP, minP-len(props.obj)))
	}
	return ch.close(), b.err
}

// memberChain builds an object's members in order, counting them up to
// what minProperties and maxProperties need, and remembering which
// properties dependentRequired ties to later ones were written: at holds
// the node of each state, a count k (the last count meaning that many or
// more where only a minimum is set; without either, 0 and 1 tell the first
// member, written without a comma, from the others) and a set of presence
// bits.
type memberChain struct {
	c        *compiler
	open     frag
	at       map[chainKey]int32
	top      int
	min      int
	saturate bool
}

type chainKey struct {
	k    int
	bits uint64
}

// maxPresenceStates bounds the sets of written properties an object's
// automaton tells apart at one place for dependentRequired.
const maxPresenceStates = 64

func newMemberChain(c *compiler, min, max int) *memberChain {
	top, saturate := 1, true
	switch {
	case max >= 0:
		top, saturate = max, false
	case min > 1:
		top = min
	}
	ch := &memberChain{c: c, open: c.b.seq(c.b.lit("{"), c.ws()), at: map[chainKey]int32{}, top: top, min: min, saturate: saturate}
	ch.at[chainKey{}] = ch.open.end
	return ch
}

// next is the count after one more member; -1 where the maximum forbids it.
func (ch *memberChain) next(k int) int {
	switch {
	case k+1 <= ch.top:
		return k + 1
	case ch.saturate:
		return ch.top
	}
	return -1
}

// keys are the states in a fixed order, so that a schema always compiles
// to the same nodes.
func (ch *memberChain) keys() []chainKey {
	keys := make([]chainKey, 0, len(ch.at))
	for k := range ch.at {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y chainKey) int {
		if x.k != y.k {
			return x.k - y.k
		}
		return cmpUint64(x.bits, y.bits)
	})
	return keys
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// presence is what dependentRequired asks of one member: it may be
// written only where the bits need are all set (properties it depends on,
// written before it), and left out only where none of forbidSkip is set
// (properties written before it that depend on it). Written, it sets bit
// (none where negative); after it, only the bits of keep are remembered.
type presence struct {
	bit              int
	need, forbidSkip uint64
	keep             uint64
}

// step adds, from every state, one member r (after a comma but for the
// first), and keeps the states where optional.
func (ch *memberChain) step(r int32, optional bool, p presence) error {
	b := ch.c.b
	at := map[chainKey]int32{}
	node := func(k chainKey) int32 {
		k.bits &= p.keep
		if n, ok := at[k]; ok {
			return n
		}
		at[k] = b.node()
		return at[k]
	}
	for _, key := range ch.keys() {
		n := ch.at[key]
		if optional && key.bits&p.forbidSkip == 0 {
			b.eps(n, node(key))
		}
		k2 := ch.next(key.k)
		if k2 < 0 || key.bits&p.need != p.need {
			continue
		}
		f := b.call(r)
		if key.k > 0 {
			f = b.seq(ch.c.ws(), b.lit(","), ch.c.ws(), f)
		}
		b.eps(n, f.start)
		to := chainKey{k2, key.bits}
		if p.bit >= 0 {
			to.bits |= 1 << p.bit
		}
		b.eps(f.end, node(to))
	}
	ch.at = at
	sets := map[uint64]bool{}
	for k := range at {
		sets[k.bits] = true
	}
	if len(sets) > maxPresenceStates {
		return genq.Errorf(genq.Invalid, "dependentRequired ties together more properties than genq tells apart (%d sets of them at once)", maxPresenceStates)
	}
	return nil
}

// maxAnyOrder bounds the properties an object lists for them to be written
// in any order: the automaton tells apart every set of them written so
// far. An object that lists more writes them in the schema's order.
const maxAnyOrder = 6

// anyOrder adds, from the chain's start, the members of rules in any order,
// each at most once, and keeps the states where the set written is one
// closable allows, their sets forgotten: after them come other properties
// or the object's end.
func (ch *memberChain) anyOrder(rules []int32, closable func(set uint64) bool) {
	b := ch.c.b
	at := maps.Clone(ch.at)
	queue := ch.keys()
	for i := 0; i < len(queue) && !b.failed(); i++ {
		key := queue[i]
		k2 := ch.next(key.k)
		if k2 < 0 || key.bits == 1<<len(rules)-1 {
			continue
		}
		from := at[key]
		if key.k > 0 {
			f := b.call(ch.c.comma())
			b.eps(from, f.start)
			from = f.end
		}
		for j, r := range rules {
			if key.bits&(1<<j) != 0 {
				continue
			}
			to := chainKey{k2, key.bits | 1<<j}
			if _, ok := at[to]; !ok {
				at[to] = b.node()
				queue = append(queue, to)
			}
			f := b.call(r)
			b.eps(from, f.start)
			b.eps(f.end, at[to])
		}
	}
	ch.at = map[chainKey]int32{}
	for _, key := range queue {
		if !closable(key.bits) {
			continue
		}
		to := chainKey{k: key.k}
		if _, ok := ch.at[to]; !ok {
			ch.at[to] = b.node()
		}
		b.eps(at[key], ch.at[to])
	}
}

// closable tells the sets of props (bit i for props.obj[i]) an object may
// end with: every required property, and where a property is, those it
// depends on.
func closable(props *value, required map[string]bool, deps []dependency) func(uint64) bool {
	pos := map[string]int{}
	var need uint64
	for i, m := range props.obj {
		pos[m.key] = i
		if required[m.key] {
			need |= 1 << i
		}
	}
	return func(set uint64) bool {
		if set&need != need {
			return false
		}
		for _, d := range deps {
			if set&(1<<pos[d.a]) != 0 && set&(1<<pos[d.b]) == 0 {
				return false
			}
		}
		return true
	}
}

// comma is the rule of the separator between two members or items.
func (c *compiler) comma() int32 {
	if c.commaRule < 0 {
		c.commaRule = c.b.newRule("comma")
		c.b.define(c.commaRule, c.b.seq(c.ws(), c.b.lit(","), c.ws()))
	}
	return c.commaRule
}

// member adds a listed property's member rule.
func (ch *memberChain) member(r int32, optional bool, p presence) error {
	return ch.step(r, optional, p)
}

// others adds up to n members of rule r, each optional.
func (ch *memberChain) others(r int32, n int) {
	b := ch.c.b
	keepAll := presence{bit: -1, keep: ^uint64(0)}
	// ends: after some of the n members, a state's node; fresh nodes, or
	// a member could lead back to before itself.
	ends := map[chainKey]int32{}
	end := func(k chainKey) int32 {
		if _, ok := ends[k]; !ok {
			ends[k] = b.node()
		}
		return ends[k]
	}
	for _, k := range ch.keys() {
		b.eps(ch.at[k], end(k))
	}
	for range n {
		ch.step(r, false, keepAll)
		for _, k := range ch.keys() {
			b.eps(ch.at[k], end(k))
		}
	}
	ch.at = ends
}

// close ends the object where its count holds minProperties.
func (ch *memberChain) close() frag {
	b := ch.c.b
	end := b.node()
	for _, key := range ch.keys() {
		if key.k < ch.min {
			continue
		}
		cl := b.lit("}")
		if key.k > 0 {
			cl = b.seq(ch.c.ws(), b.lit("}"))
		}
		b.eps(ch.at[key], cl.start)
		b.eps(cl.end, end)
	}
	return frag{ch.open.start, end}
}

// ruleOf compiles s into a rule of its own, named path.
func (c *compiler) ruleOf(s *value, path string) (int32, error) {
	r := c.b.newRule(path)
	f, err := c.compile(s, path)
	if err != nil {
		return 0, err
	}
	c.b.define(r, f)
	return r, nil
}

// maxPatternSets bounds the patterns an object's other names are told
// apart by, in every combination: 2^n products of their automata.
const maxPatternSets = 4

// patternMembers is the member of an object whose name is none of props'
// names (and one propertyNames allows), with s's patternProperties: its
// value holds to the schemas of all the patterns its name matches, merged,
// and, where its name matches none, to unmatched (nil: no such member).
// Names are told apart by the set of patterns they match: for each set,
// the names that match those patterns and no other, as the product of
// the patterns' automata and their complements. With more than
// maxPatternSets patterns, a name that matches any holds to every
// pattern's schema (narrower). A set whose schemas do not merge, or merge
// to false, writes no member. nil without patternProperties.
func (c *compiler) patternMembers(s, props *value, path string, names *nameRule, unmatched *value) (func() frag, error) {
	pp := s.get("patternProperties")
	if pp == nil {
		return nil, nil
	}
	if pp.kind != 'o' {
		return nil, genq.Errorf(genq.Invalid, "at %s: patternProperties must be an object of schemas", path)
	}
	if len(pp.obj) == 0 {
		return nil, nil
	}
	b := c.b
	if props == nil {
		props = &value{kind: 'o'}
	}
	patterns := make([]string, len(pp.obj))
	for i, m := range pp.obj {
		patterns[i] = m.key
	}
	type class struct{ matched, unmatched []string }
	type member struct{ key, value int32 }
	var members []member
	add := func(cl class, schema *value, at string) error {
		if schema == nil || schema.kind == 'b' && !schema.b {
			return nil
		}
		key, err := c.namedKey(cl.matched, cl.unmatched, props, names)
		if err != nil {
			return genq.WrapError(genq.ErrorCode(err), err, "at "+at+": "+genq.ErrorMessage(err))
		}
		kr := b.newRule(at + " key")
		b.define(kr, key)
		v, err := c.ruleOf(schema, at)
		if err != nil {
			return err
		}
		members = append(members, member{kr, v})
		return nil
	}
	mergeAll := func() (*value, bool) {
		all := &value{kind: 'b', b: true}
		for _, m := range pp.obj {
			var err error
			if all, err = merge(all, m.val, path+"/patternProperties"); err != nil {
				return nil, false
			}
		}
		return all, true
	}
	if len(patterns) > maxPatternSets {
		if all, ok := mergeAll(); ok {
			for i, p := range patterns {
				if err := add(class{matched: []string{p}}, all, path+"/patternProperties/"+pp.obj[i].key); err != nil {
					return nil, err
				}
			}
		}
	} else {
		for set := 1; set < 1<<len(patterns); set++ {
			var cl class
			schema := &value{kind: 'b', b: true}
			for i, p := range patterns {
				if set&(1<<i) == 0 {
					cl.unmatched = append(cl.unmatched, p)
					continue
				}
				cl.matched = append(cl.matched, p)
				if schema != nil {
					var err error
					if schema, err = merge(schema, pp.obj[i].val, path+"/patternProperties"); err != nil {
						schema = nil
					}
				}
			}
			if err := add(cl, schema, path+"/patternProperties/"+strings.Join(cl.matched, ",")); err != nil {
				return nil, err
			}
		}
	}
	if err := add(class{unmatched: patterns}, unmatched, path+"/additionalProperties"); err != nil {
		return nil, err
	}
	return func() frag {
		alts := make([]frag, len(members))
		for i, m := range members {
			alts[i] = b.seq(b.call(m.key), c.ws(), b.lit(":"), c.ws(), b.call(m.value))
		}
		return b.alt(alts...)
	}, nil
}

// patternSchemas are the schemas of s's patternProperties whose pattern
// matches name.
func (c *compiler) patternSchemas(s *value, name string) []*value {
	pp := s.get("patternProperties")
	if pp == nil || pp.kind != 'o' {
		return nil
	}
	var out []*value
	for _, m := range pp.obj {
		if re := c.regexp(m.key); re != nil && re.MatchString(name) {
			out = append(out, m.val)
		}
	}
	return out
}

// regexp is pattern compiled by Go, once per grammar, to check names;
// nil where Go's parser refuses it.
func (c *compiler) regexp(pattern string) *regexp.Regexp {
	if re, ok := c.regexps[pattern]; ok {
		return re
	}
	q, err := propertyClasses(pattern)
	if err != nil {
		q = pattern // which Go's parser refuses: nil
	}
	re, _ := regexp.Compile(q)
	if c.regexps == nil {
		c.regexps = map[string]*regexp.Regexp{}
	}
	c.regexps[pattern] = re
	return re
}

// otherKey is the rule of a key that is none of props' names, quoted: a
// trie of the names as they are written (their canonical JSON), which
// leaves for the rest of any string wherever a key stops following them,
// and ends at the closing quote only where no name ends. Such a key has no
// escapes but those of a name's own spelling: written with an escape, the
// same name could pass for another.
func (c *compiler) otherKey(props *value, path string, names *nameRule) (int32, error) {
	b := c.b
	r := b.newRule(path + " other key")
	if names != nil {
		f, err := c.namedKey(nil, nil, props, names)
		if err != nil {
			return 0, genq.WrapError(genq.ErrorCode(err), err, "at "+path+"/propertyNames: "+genq.ErrorMessage(err))
		}
		b.define(r, f)
		return r, nil
	}
	b.define(r, c.otherKeyString(props, func() frag { return b.call(c.rest) }))
	return r, nil
}

// namedKey is a key that is none of props' names, that propertyNames
// allows (names, nil for any), that matches every pattern of matched and
// none of unmatched: the product of their automata, built once per
// grammar.
func (c *compiler) namedKey(matched, unmatched []string, props *value, names *nameRule) (frag, error) {
	var listed []string
	for _, m := range props.obj {
		listed = append(listed, m.key)
	}
	key := "key but " + strings.Join(listed, ",")
	parts := []func() (frag, error){func() (frag, error) {
		return c.otherKeyString(props, func() frag { return c.b.seq(c.b.star(c.plainChar()), c.b.lit(`"`)) }), nil
	}}
	var rejects []func() (frag, error)
	for _, p := range matched {
		key += " matching " + p
		parts = append(parts, func() (frag, error) { return c.pattern(p) })
	}
	for _, p := range unmatched {
		key += " not matching " + p
		rejects = append(rejects, func() (frag, error) { return c.pattern(p) })
	}
	if names != nil {
		key += " named " + strings.Join(names.keys, " and ")
		parts = append(parts, names.parts...)
	}
	return c.sharedString(key, func() (frag, error) { return c.product(parts, rejects) })
}

// nameRule is what propertyNames says of a name: a string schema's
// pattern, format and lengths, as automata for keys written and as a
// check of the names properties lists.
type nameRule struct {
	keys  []string
	parts []func() (frag, error)
	allow func(name string) bool
}

// allow tells a name propertyNames allows; a nil rule allows every name.
func (n *nameRule) allowName(name string) bool { return n == nil || n.allow(name) }

// propertyNames reads s's propertyNames: nil where any name goes.
func (c *compiler) propertyNames(s *value, path string) (*nameRule, error) {
	pn := s.get("propertyNames")
	if pn == nil || pn.kind == 'b' && pn.b {
		return nil, nil
	}
	at := path + "/propertyNames"
	if pn.kind == 'b' { // false: no name at all
		return &nameRule{keys: []string{"none"}, parts: []func() (frag, error){func() (frag, error) { return c.b.alt(), nil }},
			allow: func(string) bool { return false }}, nil
	}
	if pn.kind != 'o' {
		return nil, genq.Errorf(genq.Invalid, "the schema at %s must be an object or a boolean", at)
	}
	for _, m := range pn.obj {
		switch m.key {
		case "pattern", "format", "minLength", "maxLength", "const", "enum":
		case "type":
			if m.val.kind != 's' || m.val.str != "string" {
				return nil, genq.Errorf(genq.Invalid, "at %s: propertyNames' type must be \"string\"", at)
			}
		default:
			if _, ok := enforced(m.key); ok || unenforced(m.key) {
				return nil, genq.Errorf(genq.Invalid, "at %s: propertyNames with %q is not supported: genq takes pattern, format, minLength, maxLength, const and enum there", at, m.key)
			}
		}
	}
	keys, parts, err := c.stringParts(pn, at)
	if err != nil {
		return nil, err
	}
	// const and enum list the names allowed: a pattern of them.
	var res []*regexp.Regexp
	var listed []*value
	if v := pn.get("const"); v != nil {
		listed = append(listed, v)
	}
	if v := pn.get("enum"); v != nil {
		if v.kind != 'a' {
			return nil, genq.Errorf(genq.Invalid, "at %s: enum must be an array", at)
		}
		listed = append(listed, v.arr...)
	}
	if pn.get("const") != nil || pn.get("enum") != nil {
		var names []string
		for _, v := range listed {
			if v.kind == 's' { // a name is a string: other values name nothing
				names = append(names, regexp.QuoteMeta(v.str))
			}
		}
		if len(names) == 0 {
			return c.propertyNames(&value{kind: 'o', obj: []member{{"propertyNames", &value{kind: 'b'}}}}, path)
		}
		p := `^(` + strings.Join(names, "|") + `)$`
		keys = append(keys, "pattern "+p)
		parts = append(parts, func() (frag, error) { return c.pattern(p) })
		res = append(res, regexp.MustCompile(p))
	}
	min, max, _ := bounds(pn, "minLength", "maxLength", at)
	if p := pn.get("pattern"); p != nil {
		re := c.regexp(p.str)
		if re == nil {
			return nil, genq.Errorf(genq.Invalid, "at %s: pattern %q is not a supported regular expression", at, p.str)
		}
		res = append(res, re)
	}
	if f := pn.get("format"); f != nil {
		if p, ok := c.formatPattern(f.str); ok && c.formats {
			res = append(res, regexp.MustCompile(p))
		}
	}
	return &nameRule{keys: keys, parts: parts, allow: func(name string) bool {
		n := utf8.RuneCountInString(name)
		if n < min || max >= 0 && n > max {
			return false
		}
		for _, re := range res {
			if !re.MatchString(name) {
				return false
			}
		}
		return true
	}}, nil
}

// otherKeyString builds otherKey's automaton in c.b, rest building the
// rest of a plain string after its first character (a call of a shared
// rule, or, for an intersection, the automaton itself).
func (c *compiler) otherKeyString(props *value, rest func() frag) frag {
	b := c.b
	type trieNode struct {
		id       int32
		children map[byte]*trieNode
		terminal bool
		escape   bool // inside an escape sequence
		cont     int  // continuation bytes due in the current UTF-8 character
	}
	newNode := func() *trieNode { return &trieNode{id: b.node(), children: map[byte]*trieNode{}} }
	root := newNode()
	for _, m := range props.obj {
		var buf bytes.Buffer
		writeString(&buf, m.key)
		enc := buf.Bytes()[1 : buf.Len()-1]
		n, escLeft, cont := root, 0, 0
		for i, ch := range enc {
			// The state after ch: inside an escape, or a UTF-8 character.
			switch {
			case escLeft > 0:
				escLeft--
				if escLeft == 0 && ch == 'u' && enc[i-1] == '\\' {
					escLeft = 4
				}
			case ch == '\\':
				escLeft = 1
			case cont > 0:
				cont--
			case ch >= 0xF0:
				cont = 3
			case ch >= 0xE0:
				cont = 2
			case ch >= 0xC0:
				cont = 1
			}
			next := n.children[ch]
			if next == nil {
				next = newNode()
				next.escape, next.cont = escLeft > 0, cont
				n.children[ch] = next
			}
			n = next
		}
		n.terminal = true
	}
	start, end := b.node(), b.node()
	quote := b.lit(`"`)
	b.eps(start, quote.start)
	b.eps(quote.end, root.id)
	// Where a key stops following the names: the rest of any plain
	// string, after the continuation bytes its character still has due
	// (any: a lead byte's own ranges are not told apart here). Four entries
	// every trie node leaves to, so that the trie adds edges, not nodes.
	var restAt [4]int32
	for k := range restAt {
		f := b.seq(b.repeat(k, k, func() frag { return b.ranges(0x80, 0xBF) }), rest())
		restAt[k] = f.start
		b.eps(f.end, end)
	}
	// leaveOn adds leave edges for the bytes from lo to hi that continue no
	// name, in runs.
	leaveOn := func(n *trieNode, lo, hi, conts int, skip func(int) bool) {
		for x := lo; x <= hi; x++ {
			if skip(x) || n.children[byte(x)] != nil {
				continue
			}
			y := x
			for y+1 <= hi && !skip(y+1) && n.children[byte(y+1)] == nil {
				y++
			}
			b.byteEdge(n.id, byte(x), byte(y), restAt[conts])
			x = y
		}
	}
	none := func(int) bool { return false }
	var walk func(n *trieNode)
	walk = func(n *trieNode) {
		switch {
		case n.escape:
			// inside a name's escape: only the name goes on
		case n.cont > 0:
			leaveOn(n, 0x80, 0xBF, n.cont-1, none)
		default:
			leaveOn(n, 0x20, 0x7F, 0, func(x int) bool { return x == '"' || x == '\\' })
			leaveOn(n, 0xC2, 0xDF, 1, none)
			leaveOn(n, 0xE0, 0xEF, 2, none)
			leaveOn(n, 0xF0, 0xF4, 3, none)
			if !n.terminal {
				b.byteEdge(n.id, '"', '"', end)
			}
		}
		for ch, next := range n.children {
			b.byteEdge(n.id, ch, ch, next.id)
			walk(next)
		}
	}
	walk(root)
	return frag{start, end}
}
