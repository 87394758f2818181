package structured

// An array schema's rule: its items, prefixItems and counts.

import (
	"strconv"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

func (c *compiler) array(s *value, path string) (grammar.Frag, error) {
	min, max, err := boundsUpTo(s, "minItems", "maxItems", path, maxCount)
	if err != nil {
		return grammar.Frag{}, err
	}
	if err := countedItems(s, min, max, path); err != nil {
		return grammar.Frag{}, err
	}
	// Positional items: 2020-12's prefixItems, the rest after them
	// items; or draft 7's items as an array, the rest additionalItems.
	prefix, rest, restAt := s.get("prefixItems"), s.get("items"), "/items"
	if rest != nil && rest.kind == 'a' {
		prefix, rest, restAt = rest, s.get("additionalItems"), "/additionalItems"
	}
	if prefix != nil && prefix.kind != 'a' {
		return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: prefixItems must be an array of schemas", path)
	}
	if s.get("contains") != nil {
		f, ok, err := c.containsArray(s, s.get("items"), min, max, path, "/items")
		if err != nil || ok {
			return f, err
		}
	}
	unique, err := uniqueItems(s, path)
	if err != nil {
		return grammar.Frag{}, err
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
		return c.list(min, max, func() grammar.Frag { return c.b.Call(c.bi.value) }), nil
	}
	r, err := c.ruleOf(rest, path+restAt)
	if err != nil {
		return grammar.Frag{}, err
	}
	return c.list(min, max, func() grammar.Frag { return c.b.Call(r) }), nil
}

// tuple matches an array whose first items follow prefix, a schema each,
// and whose others follow rest (nil: any value; false: none), from lo to
// hi items (hi < 0: no bound). An array may stop before its prefix ends.
func (c *compiler) tuple(prefix []*value, rest *value, lo, hi int, path, restAt string) (grammar.Frag, error) {
	b := c.b
	open := b.Seq(b.Lit("["), c.ws())
	end := b.Node()
	closeAt := func(n int32, items int) {
		if items < lo {
			return
		}
		cl := b.Lit("]")
		if items > 0 {
			cl = b.Seq(c.ws(), b.Lit("]"))
		}
		b.Eps(n, cl.Start)
		b.Eps(cl.End, end)
	}
	at := open.End
	closeAt(at, 0)
	k := 0
	for i, p := range prefix {
		if hi >= 0 && i >= hi {
			break
		}
		r, err := c.ruleOf(p, path+"/prefixItems/"+strconv.Itoa(i))
		if err != nil {
			return grammar.Frag{}, err
		}
		item := b.Call(r)
		if i > 0 {
			item = b.Seq(c.ws(), b.Lit(","), c.ws(), item)
		}
		b.Eps(at, item.Start)
		at, k = item.End, i+1
		if i+1 < len(prefix) {
			closeAt(at, i+1)
		}
	}
	if k < len(prefix) || rest != nil && rest.kind == 'b' && !rest.b { // no items after the prefix
		closeAt(at, k)
		return grammar.Frag{Start: open.Start, End: end}, b.Err
	}
	item := func() grammar.Frag { return b.Call(c.bi.value) }
	if rest != nil {
		r, err := c.ruleOf(rest, path+restAt)
		if err != nil {
			return grammar.Frag{}, err
		}
		item = func() grammar.Frag { return b.Call(r) }
	}
	restMax := -1
	if hi >= 0 {
		restMax = hi - k
	}
	more := b.Repeat(max(0, lo-k), restMax, func() grammar.Frag { return b.Seq(c.ws(), b.Lit(","), c.ws(), item()) })
	b.Eps(at, more.Start)
	closeAt(more.End, max(k, lo))
	return grammar.Frag{Start: open.Start, End: end}, b.Err
}
