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
	lead := func(lo, hi, nlo, nhi byte, left int) {
		n := b.Node()
		edge(start, n, lo, hi)
		edge(n, cont[left], nlo, nhi)
	}
	edge(start, cont[1], 0xC2, 0xDF)
	lead(0xE0, 0xE0, 0xA0, 0xBF, 1)
	edge(start, cont[2], 0xE1, 0xEC, 0xEE, 0xEF)
	lead(0xED, 0xED, 0x80, 0x9F, 1)
	lead(0xF0, 0xF0, 0x90, 0xBF, 2)
	edge(start, cont[3], 0xF1, 0xF3)
	lead(0xF4, 0xF4, 0x80, 0x8F, 2)

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
