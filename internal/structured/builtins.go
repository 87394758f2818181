package structured

// What every JSON text is made of, and every grammar starts with:
// whitespace, characters, digits, the built-in rules, lists and maps.

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
