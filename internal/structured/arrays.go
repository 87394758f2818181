package structured

// An array schema's rule: its items, prefixItems and counts.

import (
	"strconv"

	"github.com/genq/genq/internal/genq"
)

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
