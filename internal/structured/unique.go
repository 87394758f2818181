package structured

import (
	"math/bits"
	"slices"
	"strconv"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// uniqueItems is enforced where every item an array may hold is one of a
// few values (an enum, a const, booleans, null, an anyOf of them): the
// array's automaton has a state for each set of values already written,
// and an item is one of the values not in it. Since no value repeats, the
// set's size is the number of items, so minItems, maxItems and the
// position in prefixItems are read off the set. Elsewhere it is refused:
// telling two items of any string or object apart would take an automaton
// of every item written before.

// maxUniqueStates bounds the sets of values an array's automaton tells
// apart for uniqueItems.
const maxUniqueStates = 1024

// uniqueItems reads s's uniqueItems: whether it asks for unique items.
func uniqueItems(s *value, path string) (bool, error) {
	u := s.get("uniqueItems")
	if u == nil {
		return false, nil
	}
	if u.kind != 'b' {
		return false, genq.Errorf(genq.Invalid, "at %s: uniqueItems must be a boolean", path)
	}
	return u.b, nil
}

// uniqueArray compiles an array of unique items, from lo to hi items (hi <
// 0: no bound), whose first items follow prefix and the others rest (nil:
// any value; false: none). ok is false where uniqueness holds of every
// array the schema allows anyway (at most one item): the caller compiles
// it as any array.
func (c *compiler) uniqueArray(prefix []*value, rest *value, lo, hi int, path, restAt string) (f grammar.Frag, ok bool, err error) {
	if rest != nil && rest.kind == 'b' && !rest.b && (hi < 0 || hi > len(prefix)) {
		hi = len(prefix)
	}
	if hi >= 0 && hi <= 1 {
		return grammar.Frag{}, false, nil
	}
	refuse := func() (grammar.Frag, bool, error) {
		return grammar.Frag{}, false, genq.Errorf(genq.Invalid, "the schema keyword \"uniqueItems\" (at %s) is not supported here: genq enforces it where the items are enum or const values (or booleans, or null), at most %d sets of them", path, maxUniqueStates)
	}
	// The values each position takes, as indices of classes of equal
	// values.
	var classes [][]*value
	classOf := func(v *value) int {
		for i, cl := range classes {
			if jsonEqual(cl[0], v) {
				if !slices.ContainsFunc(cl, func(w *value) bool { return sameJSON(v, w) }) {
					classes[i] = append(cl, v)
				}
				return i
			}
		}
		classes = append(classes, []*value{v})
		return len(classes) - 1
	}
	known := map[int]uint64{} // the sets of the positions read so far
	at := func(p int) (uint64, bool, error) {
		p = min(p, len(prefix))
		if set, ok := known[p]; ok {
			return set, true, nil
		}
		schema, where := rest, path+restAt
		if p < len(prefix) {
			schema, where = prefix[p], path+"/prefixItems/"+strconv.Itoa(p)
		}
		if schema == nil {
			return 0, false, nil
		}
		vals, ok, err := c.finiteValues(schema, where, 0)
		if err != nil || !ok {
			return 0, ok, err
		}
		var set uint64
		for _, v := range vals {
			i := classOf(v)
			if i >= 64 {
				return 0, false, nil
			}
			set |= 1 << i
		}
		known[p] = set
		return set, true, nil
	}
	b := c.b
	open := b.Seq(b.Lit("["), c.ws())
	end := b.Node()
	nodes := map[uint64]int32{0: open.End}
	queue := []uint64{0}
	type step struct {
		from, to uint64
		class    int
	}
	var steps []step
	for len(queue) > 0 {
		set := queue[0]
		queue = queue[1:]
		n := bits.OnesCount64(set)
		if n >= lo {
			cl := b.Lit("]")
			if n > 0 {
				cl = b.Seq(c.ws(), b.Lit("]"))
			}
			b.Eps(nodes[set], cl.Start)
			b.Eps(cl.End, end)
		}
		if hi >= 0 && n >= hi {
			continue
		}
		allowed, ok, err := at(n)
		if err != nil {
			return grammar.Frag{}, false, err
		}
		if !ok {
			return refuse()
		}
		for free := allowed &^ set; free != 0; free &= free - 1 {
			i := bits.TrailingZeros64(free)
			to := set | 1<<i
			if _, seen := nodes[to]; !seen {
				if len(nodes) >= maxUniqueStates {
					return refuse()
				}
				nodes[to] = b.Node()
				queue = append(queue, to)
			}
			steps = append(steps, step{set, to, i})
		}
	}
	// A rule for each class of values and one for the comma between two
	// items, called from every state, so that a state costs a few nodes.
	rules := make([]int32, len(classes))
	for i, cl := range classes {
		rules[i] = b.NewRule(path + " unique item")
		alts := make([]grammar.Frag, len(cl))
		for j, v := range cl {
			alts[j] = c.literal(v)
		}
		b.Define(rules[i], b.Alt(alts...))
	}
	comma := b.NewRule(path + " comma")
	b.Define(comma, b.Seq(c.ws(), b.Lit(","), c.ws()))
	for _, st := range steps {
		item := b.Call(rules[st.class])
		if st.from != 0 {
			item = b.Seq(b.Call(comma), item)
		}
		b.Eps(nodes[st.from], item.Start)
		b.Eps(item.End, nodes[st.to])
	}
	return grammar.Frag{Start: open.Start, End: end}, true, b.Err
}

// finiteValues are the values s allows where they are few and listed: an
// enum or a const (of the schema's types), booleans or null by type, an
// anyOf of such, false (none). ok is false where s allows other values.
func (c *compiler) finiteValues(s *value, path string, depth int) ([]*value, bool, error) {
	if depth > maxSchemaDepth {
		return nil, false, nil
	}
	s, err := c.resolved(s, path, 0)
	if err != nil {
		return nil, false, err
	}
	if s.kind == 'b' {
		return nil, !s.b, nil
	}
	var types []string
	if t := s.get("type"); t != nil {
		if types, err = typeList(s, path); err != nil {
			return nil, false, err
		}
	}
	for _, m := range s.obj {
		switch m.key {
		case "type", "enum", "const", "anyOf":
			continue
		}
		if keywordOfJSONSchema(m.key) {
			return nil, false, nil
		}
	}
	var vals []*value
	switch e, cst, anyOf := s.get("enum"), s.get("const"), s.get("anyOf"); {
	case anyOf != nil:
		if e != nil || cst != nil || types != nil || anyOf.kind != 'a' {
			return nil, false, nil
		}
		for _, br := range anyOf.arr {
			v, ok, err := c.finiteValues(br, path+"/anyOf", depth+1)
			if err != nil || !ok {
				return nil, ok, err
			}
			vals = append(vals, v...)
		}
		return vals, true, nil
	case e != nil || cst != nil:
		if e != nil {
			if e.kind != 'a' {
				return nil, false, nil
			}
			vals = e.arr
		}
		if cst != nil {
			if e != nil && !slices.ContainsFunc(vals, func(v *value) bool { return jsonEqual(v, cst) }) {
				return nil, true, nil
			}
			vals = []*value{cst}
		}
	case types != nil:
		for _, t := range types {
			switch t {
			case "boolean":
				vals = append(vals, &value{kind: 'b', b: true}, &value{kind: 'b', b: false})
			case "null":
				vals = append(vals, &value{kind: 'z'})
			default:
				return nil, false, nil
			}
		}
		return vals, true, nil
	default:
		return nil, false, nil
	}
	if types != nil {
		vals = slices.DeleteFunc(slices.Clone(vals), func(v *value) bool { return !anyType(v, types) })
	}
	return vals, true, nil
}

// jsonEqual tells two JSON values equal as JSON Schema compares them:
// numbers by value, objects whatever the order of their members.
func jsonEqual(a, b *value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case 'n':
		x, ok1 := a.rat()
		y, ok2 := b.rat()
		return ok1 && ok2 && x.Cmp(y) == 0
	case 's':
		return a.str == b.str
	case 'b':
		return a.b == b.b
	case 'z':
		return true
	case 'a':
		return slices.EqualFunc(a.arr, b.arr, jsonEqual)
	case 'o':
		if len(a.obj) != len(b.obj) {
			return false
		}
		for _, m := range a.obj {
			w := b.get(m.key)
			if w == nil || !jsonEqual(m.val, w) {
				return false
			}
		}
		return true
	}
	return false
}
