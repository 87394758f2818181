package grammar

// JSONChar matches one character of a JSON string's content, written as
// itself or escaped, as a small deterministic automaton: 21 nodes and no
// epsilons, where alternatives of sequences took some 80. A string with a
// maxLength repeats it once per character, so its size is most of such a
// grammar's, and of its compile time.
func (b *Builder) JSONChar() Frag { return b.stringChar(true) }

// PlainChar is JSONChar without escapes: a character written as itself.
// Its first byte is one node's edges, so a state inside such a string is
// one thread with one mask, not one per kind of character.
func (b *Builder) PlainChar() Frag { return b.stringChar(false) }

func (b *Builder) stringChar(escapes bool) Frag {
	start, end := b.Node(), b.Node()
	edge := func(from int32, to int32, r ...byte) {
		for i := 0; i+1 < len(r); i += 2 {
			b.ByteEdge(from, r[i], r[i+1], to)
		}
	}
	hex := []byte{'0', '9', 'a', 'f', 'A', 'F'}
	edge(start, end, 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F)

	// UTF-8 of two to four bytes: cont[i] lacks i continuation bytes.
	cont := [4]int32{end, b.Node(), b.Node(), b.Node()}
	for i := 1; i < 4; i++ {
		edge(cont[i], cont[i-1], 0x80, 0xBF)
	}
	for _, l := range UTF8Leads() {
		if l.Generic() {
			edge(start, cont[l.Cont], l.Lo, l.Hi)
			continue
		}
		n := b.Node()
		edge(start, n, l.Lo, l.Hi)
		edge(n, cont[l.Cont-1], l.NextLo, l.NextHi)
	}

	if !escapes {
		return Frag{start, end}
	}
	// Escapes: \uXXXX with hexes[i] lacking i hex digits, and a high
	// surrogate only before a low one.
	esc, u := b.Node(), b.Node()
	edge(start, esc, '\\', '\\')
	edge(esc, end, '"', '"', '\\', '\\', '/', '/', 'b', 'b', 'f', 'f', 'n', 'n', 'r', 'r', 't', 't')
	edge(esc, u, 'u', 'u')
	hexes := [4]int32{end, b.Node(), b.Node(), b.Node()}
	for i := 1; i < 4; i++ {
		edge(hexes[i], hexes[i-1], hex...)
	}
	edge(u, hexes[3], '0', '9', 'a', 'c', 'A', 'C', 'e', 'f', 'E', 'F')
	d := b.Node()
	edge(u, d, 'd', 'd', 'D', 'D')
	edge(d, hexes[2], '0', '7')
	high := b.Node()
	edge(d, high, '8', '9', 'a', 'b', 'A', 'B')
	prev := high
	for _, r := range [][]byte{hex, hex, {'\\', '\\'}, {'u', 'u'}, {'d', 'd', 'D', 'D'}} {
		n := b.Node()
		edge(prev, n, r...)
		prev = n
	}
	edge(prev, hexes[2], 'c', 'f', 'C', 'F')
	return Frag{start, end}
}

// Lits matches any of ss, as a trie: strings that share a prefix share
// its nodes, so a state is one thread until they part (a class's escapes
// all start with a backslash, most with \u00).
func (b *Builder) Lits(ss []string) Frag {
	start, end := b.Node(), b.Node()
	type key struct {
		from int32
		c    byte
	}
	next := map[key]int32{}
	for _, s := range ss {
		cur := start
		for i := 0; i < len(s); i++ {
			k := key{cur, s[i]}
			n, ok := next[k]
			if !ok {
				n = b.Node()
				b.ByteEdge(cur, s[i], s[i], n)
				next[k] = n
			}
			cur = n
		}
		b.Eps(cur, end)
	}
	return Frag{start, end}
}

// Union matches any of fs, as Alt does, but takes the byte edges of each
// alternative's first node onto its own where that node has nothing else
// (a character class's ranges and sequences): a state before a class is
// then one thread with every first byte, not one per alternative. fs
// must be fresh: nothing but Union may lead to their first nodes.
func (b *Builder) Union(fs ...Frag) Frag {
	if b.Err != nil {
		return b.Alt(fs...)
	}
	start, end := b.Node(), b.Node()
	for _, f := range fs {
		n := &b.Grammar.Nodes[f.Start]
		if f.Start != f.End && len(n.Eps) == 0 && n.Call < 0 && !n.final && len(n.Edges) > 0 {
			b.Grammar.Nodes[start].Edges = append(b.Grammar.Nodes[start].Edges, n.Edges...)
			n.Edges = nil // unreachable now: no mask to work out
		} else {
			b.Eps(start, f.Start)
		}
		b.Eps(f.End, end)
	}
	return Frag{start, end}
}

// UTF8Lead is a run of lead bytes of well-formed UTF-8 (RFC 3629) and the
// range of the byte that must follow them. Every automaton that writes
// UTF-8 by hand takes its leads from UTF8Leads, so that none lets an
// overlong form, a surrogate or a code point above U+10FFFF through.
type UTF8Lead struct {
	Lo, Hi         byte // the lead bytes
	NextLo, NextHi byte // the first continuation byte's range
	Cont           int  // continuation bytes after the lead
}

// Generic tells whether the lead's first continuation byte is any one,
// 0x80 to 0xBF, as every later one is.
func (l UTF8Lead) Generic() bool { return l.NextLo == 0x80 && l.NextHi == 0xBF }

// UTF8Leads are the leads of characters of two to four bytes, in byte
// order. E0 and F0 narrow their next byte against overlong forms, ED
// against surrogates (D800-DFFF), F4 against code points over U+10FFFF;
// C0, C1 and F5 to FF lead nothing. An array, so that callers get a copy.
func UTF8Leads() [8]UTF8Lead {
	return [8]UTF8Lead{
		{0xC2, 0xDF, 0x80, 0xBF, 1},
		{0xE0, 0xE0, 0xA0, 0xBF, 2},
		{0xE1, 0xEC, 0x80, 0xBF, 2},
		{0xED, 0xED, 0x80, 0x9F, 2},
		{0xEE, 0xEF, 0x80, 0xBF, 2},
		{0xF0, 0xF0, 0x90, 0xBF, 3},
		{0xF1, 0xF3, 0x80, 0xBF, 3},
		{0xF4, 0xF4, 0x80, 0x8F, 3},
	}
}

// UTF8LeadOf is the lead that c is one of, and false for a byte that
// leads no character of two to four bytes.
func UTF8LeadOf(c byte) (UTF8Lead, bool) {
	for _, l := range UTF8Leads() {
		if l.Lo <= c && c <= l.Hi {
			return l, true
		}
	}
	return UTF8Lead{}, false
}
