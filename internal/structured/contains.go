package structured

import (
	"math/big"
	"slices"
	"strconv"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// contains, with minContains and maxContains, is enforced where each item
// can be told, by construction, to match the contains schema or not: the
// items split into two rules, those that match and those that do not,
// and the array's automaton counts the first up to what the bounds need.
// The split is exact where the contains schema is true or false, where the
// items are a few listed values (each checked against a contains schema
// of listed values or of types), and where the items are any value or any
// value of some types and the contains schema is a few listed scalars or
// types: the values that do not match are then every other value, numbers
// among them written in their shortest form (so that 1.0 cannot pass for
// a 1 that would match). Elsewhere it is refused, naming the keyword.

// maxContainsStates bounds the states (items, matches) of an array's
// automaton for contains.
const maxContainsStates = 4096

var jsonTypes = []string{"object", "array", "string", "number", "boolean", "null"}

// containsBound reads minContains or maxContains: a non-negative integer
// (2.0 is 2).
func containsBound(s *value, key, path string) (int, bool, error) {
	v := s.get(key)
	if v == nil {
		return 0, false, nil
	}
	r, ok := v.rat()
	if v.kind != 'n' || !ok || !r.IsInt() || r.Sign() < 0 {
		return 0, false, genq.Errorf(genq.Invalid, "at %s: %s must be a non-negative integer", path, key)
	}
	if r.Num().Cmp(big.NewInt(grammar.MaxRepeat)) > 0 {
		return 0, false, genq.Errorf(genq.Invalid, "at %s: %s is %s; genq enforces at most %d", path, key, r.Num(), grammar.MaxRepeat)
	}
	return int(r.Num().Int64()), true, nil
}

// containsArray compiles an array of lo to hi items (hi < 0: no bound)
// that follow items (nil: any value), of which from minC to maxC (maxC <
// 0: no bound) match s's contains. ok is false where contains asserts
// nothing (minContains 0 and no maxContains): the caller compiles the
// array as it would without.
func (c *compiler) containsArray(s, items *value, lo, hi int, path, itemsAt string) (f grammar.Frag, ok bool, err error) {
	cs := s.get("contains")
	minC, hasMin, err := containsBound(s, "minContains", path)
	if err != nil {
		return grammar.Frag{}, false, err
	}
	if !hasMin {
		minC = 1
	}
	maxC, hasMax, err := containsBound(s, "maxContains", path)
	if err != nil {
		return grammar.Frag{}, false, err
	}
	if !hasMax {
		maxC = -1
	}
	if minC == 0 && maxC < 0 {
		return grammar.Frag{}, false, nil
	}
	refuse := func(why string) (grammar.Frag, bool, error) {
		return grammar.Frag{}, false, genq.Errorf(genq.Invalid, "the schema keyword \"contains\" (at %s) is not supported here: %s", path, why)
	}
	if s.get("prefixItems") != nil || items != nil && items.kind == 'a' {
		return refuse("genq does not enforce it beside prefixItems")
	}
	if u, _ := uniqueItems(s, path); u {
		return refuse("genq does not enforce it beside uniqueItems")
	}
	match, other, why, err := c.splitItems(cs, items, path+"/contains", path+itemsAt)
	if err != nil {
		return grammar.Frag{}, false, err
	}
	if why != "" && maxC < 0 {
		match, other, err = c.containsAtLeast(cs, items, path+"/contains", path+itemsAt)
		if err != nil {
			return refuse(genq.ErrorMessage(err))
		}
		why = ""
	}
	if why != "" {
		return refuse(why)
	}
	b := c.b
	mRule, nRule := b.NewRule(path+" item that contains matches"), b.NewRule(path+" item that contains does not match")
	b.Define(mRule, match)
	b.Define(nRule, other)
	comma := b.NewRule(path + " comma")
	b.Define(comma, b.Seq(c.ws(), b.Lit(","), c.ws()))
	// A state is (items, matches): items up to maxItems, or saturating
	// where the count only tells the first item from the others or
	// reaches minItems; matches up to maxContains, or saturating at
	// minContains.
	type state struct{ k, m int }
	nextK := func(k int) int {
		switch {
		case hi >= 0 && k >= hi:
			return -1
		case hi < 0 && k >= max(lo, 1):
			return k
		}
		return k + 1
	}
	nextM := func(m int) int {
		switch {
		case maxC >= 0 && m >= maxC:
			return -1
		case maxC < 0 && m >= minC:
			return m
		}
		return m + 1
	}
	open := b.Seq(b.Lit("["), c.ws())
	end := b.Node()
	nodes := map[state]int32{{}: open.End}
	queue := []state{{}}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		if st.k >= lo && st.m >= minC {
			cl := b.Lit("]")
			if st.k > 0 {
				cl = b.Seq(c.ws(), b.Lit("]"))
			}
			b.Eps(nodes[st], cl.Start)
			b.Eps(cl.End, end)
		}
		k := nextK(st.k)
		if k < 0 {
			continue
		}
		for _, t := range []struct {
			rule int32
			m    int
		}{{nRule, st.m}, {mRule, nextM(st.m)}} {
			if t.m < 0 {
				continue
			}
			to := state{k, t.m}
			if _, seen := nodes[to]; !seen {
				if len(nodes) >= maxContainsStates {
					return refuse("minItems, maxItems, minContains and maxContains need too many states")
				}
				nodes[to] = b.Node()
				queue = append(queue, to)
			}
			item := b.Call(t.rule)
			if st.k > 0 {
				item = b.Seq(b.Call(comma), item)
			}
			b.Eps(nodes[st], item.Start)
			b.Eps(item.End, nodes[to])
		}
	}
	return grammar.Frag{Start: open.Start, End: end}, true, b.Err
}

// containsAtLeast builds, where contains asks only a least count, the
// items that match cs as the items of both schemas, and the others as any
// item: an item that matches but is counted as no match only lowers the
// count, so which items match need not be told apart, and no complement
// of cs is needed.
func (c *compiler) containsAtLeast(cs, items *value, csPath, itemsPath string) (match, other grammar.Frag, err error) {
	if items == nil {
		match, err = c.compile(cs, csPath)
		return match, c.b.Call(c.bi.value), err
	}
	both := &value{kind: 'o', obj: []member{{"allOf", &value{kind: 'a', arr: []*value{items, cs}}}}}
	if match, err = c.compile(both, csPath); err != nil {
		return grammar.Frag{}, grammar.Frag{}, err
	}
	other, err = c.compile(items, itemsPath)
	return match, other, err
}

// splitItems builds the items that match cs and those that do not; why
// says why they cannot be told apart exactly, where they cannot.
func (c *compiler) splitItems(cs, items *value, csPath, itemsPath string) (match, other grammar.Frag, why string, err error) {
	b := c.b
	itemFrag := func() (grammar.Frag, error) {
		if items == nil {
			return b.Call(c.bi.value), nil
		}
		return c.compile(items, itemsPath)
	}
	if cs == nil {
		return grammar.Frag{}, grammar.Frag{}, "contains is missing beside minContains", nil
	}
	cs, err = c.resolved(cs, csPath, 0)
	if err != nil {
		return grammar.Frag{}, grammar.Frag{}, "", err
	}
	if cs.kind == 'b' {
		all, err := itemFrag()
		if cs.b {
			return all, b.Alt(), "", err
		}
		return b.Alt(), all, "", err
	}
	// Items of a few listed values: each checked against cs.
	if items != nil {
		vals, ok, err := c.finiteValues(items, itemsPath, 0)
		if err != nil {
			return grammar.Frag{}, grammar.Frag{}, "", err
		}
		if ok {
			var ms, ns []grammar.Frag
			for _, v := range vals {
				holds, known, err := c.holds(cs, v, csPath)
				if err != nil {
					return grammar.Frag{}, grammar.Frag{}, "", err
				}
				if !known {
					return grammar.Frag{}, grammar.Frag{}, "the contains schema is neither enum, const nor type", nil
				}
				if holds {
					ms = append(ms, c.literal(v))
				} else {
					ns = append(ns, c.literal(v))
				}
			}
			return b.Alt(ms...), b.Alt(ns...), "", nil
		}
	}
	// Items of any value, or of any value of some types.
	itemTypes := jsonTypes
	if items != nil {
		r, err := c.resolved(items, itemsPath, 0)
		if err != nil {
			return grammar.Frag{}, grammar.Frag{}, "", err
		}
		t, ok, err := typesOnly(r, itemsPath)
		if err != nil {
			return grammar.Frag{}, grammar.Frag{}, "", err
		}
		if !ok {
			return grammar.Frag{}, grammar.Frag{}, "the items are neither listed values nor of types alone", nil
		}
		if t != nil {
			itemTypes = t
		}
	}
	has := func(types []string, t string) bool { return slices.Contains(types, t) }
	if ct, ok, err := typesOnly(cs, csPath); err != nil || ok {
		if err != nil {
			return grammar.Frag{}, grammar.Frag{}, "", err
		}
		if ct == nil {
			ct = jsonTypes
		}
		var ms, ns []grammar.Frag
		for _, t := range itemTypes {
			switch {
			case has(ct, t) || t == "integer" && has(ct, "number"):
				ms = append(ms, c.typeValue(t))
			case t == "number" && has(ct, "integer"):
				ms = append(ms, b.Call(c.bi.integer))
				ns = append(ns, c.canonicalNumber(true, false, nil)) // a fraction: no integer
			default:
				ns = append(ns, c.typeValue(t))
			}
		}
		return b.Alt(ms...), b.Alt(ns...), "", nil
	}
	lits, ok, err := c.finiteValues(cs, csPath, 0)
	if err != nil {
		return grammar.Frag{}, grammar.Frag{}, "", err
	}
	if !ok {
		return grammar.Frag{}, grammar.Frag{}, "the contains schema is neither enum, const nor type, and the items are not listed values", nil
	}
	var ms, ns []grammar.Frag
	var strs, nums []string
	bools := map[bool]bool{}
	null := false
	for _, v := range lits {
		if !anyType(v, itemTypes) {
			continue
		}
		ms = append(ms, c.literal(v))
		switch v.kind {
		case 's':
			strs = append(strs, v.str)
		case 'n':
			nums = append(nums, numberText(v.num.String()))
		case 'b':
			bools[v.b] = true
		case 'z':
			null = true
		default:
			return grammar.Frag{}, grammar.Frag{}, "the contains schema lists an object or an array", nil
		}
	}
	for _, t := range itemTypes {
		switch t {
		case "string":
			if len(strs) == 0 {
				ns = append(ns, b.Call(c.bi.str))
				continue
			}
			names := &value{kind: 'o'}
			for _, s := range strs {
				names.obj = append(names.obj, member{s, nil})
			}
			ns = append(ns, c.otherKeyString(names, func() grammar.Frag { return b.Seq(b.Star(c.plainChar()), b.Lit(`"`)) }))
		case "number", "integer":
			if len(nums) == 0 {
				ns = append(ns, c.typeValue(t))
				continue
			}
			ns = append(ns, c.canonicalNumber(t == "number", true, nums))
		case "boolean":
			for _, x := range []bool{true, false} {
				if !bools[x] {
					ns = append(ns, b.Lit(strconv.FormatBool(x)))
				}
			}
		case "null":
			if !null {
				ns = append(ns, b.Lit("null"))
			}
		default:
			ns = append(ns, c.typeValue(t))
		}
	}
	return b.Alt(ms...), b.Alt(ns...), "", nil
}

// typeValue is any value of type t.
func (c *compiler) typeValue(t string) grammar.Frag {
	b := c.b
	switch t {
	case "object":
		return b.Call(c.bi.object)
	case "array":
		return b.Call(c.bi.array)
	case "string":
		return b.Call(c.bi.str)
	case "number":
		return b.Call(c.bi.num)
	case "integer":
		return b.Call(c.bi.integer)
	case "boolean":
		return b.Alt(b.Lit("true"), b.Lit("false"))
	}
	return b.Lit("null")
}

// typesOnly reads a schema that says nothing but its types: the types
// (nil for any), ok false where it says more.
func typesOnly(s *value, path string) ([]string, bool, error) {
	if s.kind == 'b' {
		return nil, s.b, nil
	}
	for _, m := range s.obj {
		if m.key != "type" && keywordOfJSONSchema(m.key) {
			return nil, false, nil
		}
	}
	t, err := typeList(s, path)
	return t, err == nil, err
}

// holds tells whether v is valid against s, where s lists values or types
// (known false elsewhere).
func (c *compiler) holds(s, v *value, path string) (holds, known bool, err error) {
	if s.kind == 'b' {
		return s.b, true, nil
	}
	if t, ok, err := typesOnly(s, path); err != nil || ok {
		if t == nil {
			return err == nil, err == nil, err
		}
		for _, ty := range t {
			if ty == "integer" && v.kind == 'n' {
				if r, ok := v.rat(); ok && r.IsInt() {
					return true, true, nil
				}
				continue
			}
			if ty != "integer" && v.isType(ty) {
				return true, true, nil
			}
		}
		return false, true, nil
	}
	vals, ok, err := c.finiteValues(s, path, 0)
	if err != nil || !ok {
		return false, false, err
	}
	return slices.ContainsFunc(vals, func(w *value) bool { return jsonEqual(v, w) }), true, nil
}

// canonicalNumber matches numbers in their shortest form (no exponent, no
// leading zeros, no fraction's trailing zeros, never -0), but for the
// texts of but (shortest forms themselves): each value one text, so that
// leaving out a value's text leaves out the value. fraction allows a
// fraction; whole allows integers (false: a fraction is due).
func (c *compiler) canonicalNumber(fraction, whole bool, but []string) grammar.Frag {
	b := c.b
	// A state of the shortest form's automaton.
	type dstate struct {
		phase byte // 's' start, '-' after a minus, '0' a zero, 'i' integer digits, '.' a dot, 'f' fraction digits
		neg   bool
		n     int  // digits in this phase
		zero  bool // the last fraction digit is 0
	}
	final := func(d dstate) bool {
		switch d.phase {
		case '0':
			return whole && !d.neg
		case 'i':
			return whole
		case 'f':
			return !d.zero
		}
		return false
	}
	move := func(d dstate, ch byte) (dstate, bool) {
		digit := ch >= '0' && ch <= '9'
		switch d.phase {
		case 's':
			switch {
			case ch == '-':
				return dstate{phase: '-', neg: true}, true
			case ch == '0':
				return dstate{phase: '0'}, true
			case digit:
				return dstate{phase: 'i', n: 1}, true
			}
		case '-':
			switch {
			case ch == '0':
				return dstate{phase: '0', neg: true}, true
			case digit:
				return dstate{phase: 'i', neg: true, n: 1}, true
			}
		case '0', 'i':
			switch {
			case ch == '.' && fraction:
				return dstate{phase: '.', neg: d.neg}, true
			case d.phase == 'i' && digit && d.n < maxIntDigits:
				return dstate{phase: 'i', neg: d.neg, n: d.n + 1}, true
			}
		case '.', 'f':
			if digit && d.n < maxFracDigits {
				return dstate{phase: 'f', neg: d.neg, n: d.n + 1, zero: ch == '0'}, true
			}
		}
		return dstate{}, false
	}
	// The trie of the texts left out; a key's trie position is -1 once it
	// has left every text.
	type tnode struct {
		next     map[byte]int
		terminal bool
	}
	trie := []tnode{{next: map[byte]int{}}}
	for _, t := range but {
		at := 0
		for i := 0; i < len(t); i++ {
			n, ok := trie[at].next[t[i]]
			if !ok {
				n = len(trie)
				trie = append(trie, tnode{next: map[byte]int{}})
				trie[at].next[t[i]] = n
			}
			at = n
		}
		trie[at].terminal = true
	}
	type key struct {
		d dstate
		t int
	}
	end := b.Node()
	w := newWorklist(b, func(k key, n int32) {
		if final(k.d) && (k.t < 0 || !trie[k.t].terminal) {
			b.Eps(n, end)
		}
	})
	start := w.node(key{dstate{phase: 's'}, 0})
	for k, from, ok := w.next(); ok; k, from, ok = w.next() {
		for _, ch := range []byte("-.0123456789") {
			d, ok := move(k.d, ch)
			if !ok {
				continue
			}
			t := -1
			if k.t >= 0 {
				if n, ok := trie[k.t].next[ch]; ok {
					t = n
				}
			}
			b.ByteEdge(from, ch, ch, w.node(key{d, t}))
		}
	}
	return grammar.Frag{Start: start, End: end}
}
