package structured

import "github.com/genq/genq/internal/structured/grammar"

// What every JSON text is made of, and every grammar starts with:
// whitespace, characters, digits, the built-in rules, lists and maps.

// ws is whitespace between two tokens: nothing, a space, or a newline and
// up to maxIndent spaces. It is built by hand, a chain of one node per
// space, because it stands between every two tokens of a grammar: the
// general constructions would make it three times the nodes.
//
// In a grammar with the builtins, the whitespace itself is one builtin
// rule, called: four nodes at each place instead of nineteen, which in a
// large object schema (whitespace twice in every member) is a good share
// of its nodes.
func (c *compiler) ws() grammar.Frag {
	b := c.b
	if c.wsIn != b {
		return c.spaces(true)
	}
	start, end := b.Node(), b.Node()
	call := b.Call(c.wsRule)
	b.Eps(start, end)
	b.Eps(start, call.Start)
	b.Eps(call.End, end)
	return grammar.Frag{Start: start, End: end}
}

// spaces is ws's automaton, empty allowed or not (a rule must read a
// byte).
func (c *compiler) spaces(empty bool) grammar.Frag {
	b := c.b
	start, end, indent := b.Node(), b.Node(), b.Node()
	if empty {
		b.Eps(start, end)
	}
	b.ByteEdge(start, ' ', ' ', end)
	b.ByteEdge(start, '\n', '\n', indent)
	b.Eps(indent, end)
	for range maxIndent {
		next := b.Node()
		b.ByteEdge(indent, ' ', ' ', next)
		b.Eps(next, end)
		indent = next
	}
	return grammar.Frag{Start: start, End: end}
}

// char matches one character of a JSON string's body: a code point in valid
// UTF-8 other than '"', '\' and controls, or an escape. A surrogate's \u
// escape is one only in a pair, high then low, so that one match is always
// one code point.
func (c *compiler) char() grammar.Frag { return c.b.JSONChar() }

// plainChar is a character of a JSON string written as itself, not
// escaped.
func (c *compiler) plainChar() grammar.Frag { return c.b.PlainChar() }

// digits matches min to max decimal digits (max < 0: any number). The
// optional ones are a chain of one node per digit, as ws's spaces are.
func (c *compiler) digits(min, max int) grammar.Frag {
	b := c.b
	if max < 0 {
		return b.Repeat(min, max, func() grammar.Frag { return b.Ranges('0', '9') })
	}
	start := b.Node()
	cur := start
	for range min {
		next := b.Node()
		b.ByteEdge(cur, '0', '9', next)
		cur = next
	}
	end := b.Node()
	b.Eps(cur, end)
	for range max - min {
		next := b.Node()
		b.ByteEdge(cur, '0', '9', next)
		b.Eps(next, end)
		cur = next
	}
	return grammar.Frag{Start: start, End: end}
}

func (c *compiler) intPart() grammar.Frag {
	b := c.b
	return b.Seq(b.Opt(b.Lit("-")), b.Alt(b.Lit("0"), b.Seq(b.Ranges('1', '9'), c.digits(0, maxIntDigits-1))))
}

func (c *compiler) buildBuiltins() {
	b := c.b
	c.wsRule, c.wsIn = b.NewRule("whitespace"), b
	b.Define(c.wsRule, c.spaces(false))
	c.bi.str = b.NewRule(stringRuleName)
	c.bi.num = b.NewRule("number")
	c.bi.integer = b.NewRule("integer")
	c.bi.value = b.NewRule(anyValueRule)
	c.bi.object = b.NewRule(anyObjectRule)
	c.bi.array = b.NewRule(anyArrayRule)
	// Every other key's rest (otherKey): a builtin, so that its masks,
	// and the walks of tokens into it, are the Vocab's, worked out once.
	c.rest = b.NewRule("plain string rest")

	b.Define(c.bi.str, b.Seq(b.Lit(`"`), b.Star(c.char()), b.Lit(`"`)))
	b.Define(c.bi.integer, c.intPart())
	b.Define(c.bi.num, b.Seq(c.intPart(),
		b.Opt(b.Seq(b.Lit("."), c.digits(1, maxFracDigits))),
		b.Opt(b.Seq(b.Ranges('e', 'e', 'E', 'E'), b.Opt(b.Ranges('+', '+', '-', '-')), c.digits(1, maxExpDigits)))))
	b.Define(c.bi.value, b.Alt(b.Call(c.bi.object), b.Call(c.bi.array), b.Call(c.bi.str), b.Call(c.bi.num),
		b.Lit("true"), b.Lit("false"), b.Lit("null")))
	b.Define(c.bi.object, c.mapObject(func() grammar.Frag { return b.Call(c.bi.value) }))
	b.Define(c.bi.array, c.list(0, -1, func() grammar.Frag { return b.Call(c.bi.value) }))
	b.Define(c.rest, b.Seq(b.Star(c.plainChar()), b.Lit(`"`)))
}

// mapObject matches an object with any keys whose values match val.
func (c *compiler) mapObject(val func() grammar.Frag) grammar.Frag {
	b := c.b
	member := func() grammar.Frag { return b.Seq(b.Call(c.bi.str), c.ws(), b.Lit(":"), c.ws(), val()) }
	return b.Seq(b.Lit("{"), c.ws(),
		b.Opt(b.Seq(member(), b.Star(b.Seq(c.ws(), b.Lit(","), c.ws(), member())), c.ws())),
		b.Lit("}"))
}

// list matches an array of min to max items (max < 0: no bound).
func (c *compiler) list(min, max int, item func() grammar.Frag) grammar.Frag {
	b := c.b
	if max == 0 {
		return b.Seq(b.Lit("["), c.ws(), b.Lit("]"))
	}
	restMax := -1
	if max > 0 {
		restMax = max - 1
	}
	restMin := 0
	if min > 1 {
		restMin = min - 1
	}
	items := b.Seq(item(), b.Counted(restMin, restMax, func() grammar.Frag { return b.Seq(c.ws(), b.Lit(","), c.ws(), item()) }), c.ws())
	if min == 0 {
		items = b.Opt(items)
	}
	return b.Seq(b.Lit("["), c.ws(), items, b.Lit("]"))
}
