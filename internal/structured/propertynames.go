package structured

// The names of an object's members beyond those it lists:
// patternProperties, propertyNames and other keys.

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

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
func (c *compiler) patternMembers(s, props *value, path string, names *nameRule, unmatched *value) (func() grammar.Frag, error) {
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
		kr := b.NewRule(at + " key")
		b.Define(kr, key)
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
	return func() grammar.Frag {
		alts := make([]grammar.Frag, len(members))
		for i, m := range members {
			alts[i] = b.Seq(b.Call(m.key), c.ws(), b.Lit(":"), c.ws(), b.Call(m.value))
		}
		return b.Alt(alts...)
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
	// As pattern reads it; one it refuses is nil.
	var re *regexp.Regexp
	if q, err := goSyntax(pattern); err == nil {
		re, _ = regexp.Compile(q)
	}
	if c.regexps == nil {
		c.regexps = map[string]*regexp.Regexp{}
	}
	c.regexps[pattern] = re
	return re
}

// otherKey is the rule of a key that is none of props' names, quoted: a
// trie of the names as they may be written (nameSpellings), which
// leaves for the rest of any string wherever a key stops following them,
// and ends at the closing quote only where no name ends. Such a key has no
// escapes but those of a name's own spelling: written with an escape, the
// same name could pass for another.
func (c *compiler) otherKey(props *value, path string, names *nameRule) (int32, error) {
	b := c.b
	r := b.NewRule(path + " other key")
	if names != nil {
		f, err := c.namedKey(nil, nil, props, names)
		if err != nil {
			return 0, genq.WrapError(genq.ErrorCode(err), err, "at "+path+"/propertyNames: "+genq.ErrorMessage(err))
		}
		b.Define(r, f)
		return r, nil
	}
	b.Define(r, c.otherKeyString(props, func() grammar.Frag { return b.Call(c.rest) }))
	return r, nil
}

// namedKey is a key that is none of props' names, that propertyNames
// allows (names, nil for any), that matches every pattern of matched and
// none of unmatched: the product of their automata, built once per
// grammar.
func (c *compiler) namedKey(matched, unmatched []string, props *value, names *nameRule) (grammar.Frag, error) {
	var listed []string
	for _, m := range props.obj {
		listed = append(listed, m.key)
	}
	key := "key but " + strings.Join(listed, ",")
	parts := []func() (grammar.Frag, error){func() (grammar.Frag, error) {
		return c.otherKeyString(props, func() grammar.Frag { return c.b.Seq(c.b.Star(c.plainChar()), c.b.Lit(`"`)) }), nil
	}}
	var rejects []func() (grammar.Frag, error)
	for _, p := range matched {
		key += " matching " + p
		parts = append(parts, func() (grammar.Frag, error) { return c.pattern(p) })
	}
	for _, p := range unmatched {
		key += " not matching " + p
		rejects = append(rejects, func() (grammar.Frag, error) { return c.pattern(p) })
	}
	build := func() (grammar.Frag, error) { return c.product(parts, rejects) }
	if names != nil {
		key += " named " + strings.Join(names.keys, " and ")
		parts = append(parts, names.parts...)
		if l := names.length; l != nil {
			build = func() (grammar.Frag, error) { return c.lengthProduct(parts, rejects, l.part, l.min, l.max, l.at) }
		}
	}
	return c.sharedString(key, build)
}

// nameRule is what propertyNames says of a name: a string schema's
// pattern, format and lengths, as automata for keys written and as a
// check of the names properties lists.
type nameRule struct {
	keys  []string
	parts []func() (grammar.Frag, error)
	// length is the length bounds' part where they are over MaxRepeat:
	// counted in a length region around the key's product, not in it.
	length *lengthPart
	allow  func(name string) bool
}

// lengthPart is a string's length bounds and their automaton, at the
// place they were read.
type lengthPart struct {
	min, max int
	part     func() (grammar.Frag, error)
	at       string
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
		return &nameRule{keys: []string{"none"}, parts: []func() (grammar.Frag, error){func() (grammar.Frag, error) { return c.b.Alt(), nil }},
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
	keys, parts, err := c.stringParts(pn, at, false)
	if err != nil {
		return nil, err
	}
	min, max, err := boundsUpTo(pn, "minLength", "maxLength", at, maxCount)
	if err != nil {
		return nil, err
	}
	// stringParts puts the length bounds' part last; past MaxRepeat a
	// counter calls rules, which a key's product cannot hold.
	var length *lengthPart
	if _, _, over := overRepeat(min, max, "minLength", "maxLength"); over {
		length = &lengthPart{min: min, max: max, part: parts[len(parts)-1], at: at}
		parts = parts[:len(parts)-1]
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
		parts = append(parts, func() (grammar.Frag, error) { return c.pattern(p) })
		res = append(res, regexp.MustCompile(p))
	}
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
	return &nameRule{keys: keys, parts: parts, length: length, allow: func(name string) bool {
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

// trieNode is a node of otherKeyString's trie of listed names.
type trieNode struct {
	id       int32
	children []trieChild // few: a slice, not a map per node
	kids     byteSet     // children's bytes, for leaveOn's runs
	terminal bool
	escape   bool // inside an escape sequence
	cont     int  // continuation bytes due in the current UTF-8 character
	// The range of the next byte where cont > 0: the lead's own for the
	// first continuation byte (grammar.UTF8Leads), any after.
	nextLo, nextHi byte
}

// byteSet is a set of bytes, a bit each.
type byteSet [4]uint64

func (s *byteSet) add(c byte)     { s[c>>6] |= 1 << (c & 63) }
func (s byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

type trieChild struct {
	b byte
	n *trieNode
}

// child is n's child on byte c, or nil.
func (n *trieNode) child(c byte) *trieNode {
	if !n.kids.has(c) {
		return nil
	}
	for _, ch := range n.children {
		if ch.b == c {
			return ch.n
		}
	}
	return nil
}

// nameSpellings are the ways a key may spell each of props' names, quotes
// left out: as writeString writes it, and, for a name with U+2028 or
// U+2029 (which Go's encoder escapes), with those written as themselves,
// which a JSON reader takes for the same name.
func nameSpellings(props *value) [][]byte {
	var out [][]byte
	for _, m := range props.obj {
		var buf bytes.Buffer
		writeString(&buf, m.key)
		out = append(out, buf.Bytes()[1:buf.Len()-1])
		if !strings.ContainsAny(m.key, "\u2028\u2029") {
			continue
		}
		var raw []byte
		for _, r := range m.key {
			if r == '\u2028' || r == '\u2029' {
				raw = utf8.AppendRune(raw, r)
				continue
			}
			buf.Reset()
			writeString(&buf, string(r))
			raw = append(raw, buf.Bytes()[1:buf.Len()-1]...)
		}
		out = append(out, raw)
	}
	return out
}

// otherKeyString builds otherKey's automaton in c.b, rest building the
// rest of a plain string after its first character (a call of a shared
// rule, or, for an intersection, the automaton itself).
func (c *compiler) otherKeyString(props *value, rest func() grammar.Frag) grammar.Frag {
	b := c.b
	newNode := func() *trieNode { return &trieNode{id: b.Node()} }
	root := newNode()
	for _, enc := range nameSpellings(props) {
		n, escLeft, cont := root, 0, 0
		var nextLo, nextHi byte
		for i, ch := range enc {
			// The state after ch: inside an escape, or a UTF-8 character
			// (writeString's output is well-formed UTF-8).
			switch {
			case escLeft > 0:
				escLeft--
				if escLeft == 0 && ch == 'u' && enc[i-1] == '\\' {
					escLeft = 4
				}
			case ch == '\\':
				escLeft = 1
			case cont > 0:
				cont, nextLo, nextHi = cont-1, 0x80, 0xBF
			default:
				if l, ok := grammar.UTF8LeadOf(ch); ok {
					cont, nextLo, nextHi = l.Cont, l.NextLo, l.NextHi
				}
			}
			next := n.child(ch)
			if next == nil {
				next = newNode()
				next.escape, next.cont = escLeft > 0, cont
				next.nextLo, next.nextHi = nextLo, nextHi
				n.children = append(n.children, trieChild{ch, next})
				n.kids.add(ch)
			}
			n = next
		}
		n.terminal = true
	}
	start, end := b.Node(), b.Node()
	quote := b.Lit(`"`)
	b.Eps(start, quote.Start)
	b.Eps(quote.End, root.id)
	// Where a key stops following the names: the rest of any plain
	// string, after the continuation bytes its character still has due.
	// restAt[k] takes k continuation bytes of any value; a lead whose next
	// byte has a range of its own (E0, ED, F0, F4: no overlong form,
	// surrogate or code point over U+10FFFF) leaves to leadAt, which takes
	// that range first. Entries every trie node leaves to, so that the
	// trie adds edges, not nodes.
	var restAt [4]int32
	for k := range restAt {
		f := b.Seq(b.Repeat(k, k, func() grammar.Frag { return b.Ranges(0x80, 0xBF) }), rest())
		restAt[k] = f.Start
		b.Eps(f.End, end)
	}
	leads := grammar.UTF8Leads()
	var leadAt [len(leads)]int32
	for i, l := range leads {
		leadAt[i] = restAt[l.Cont]
		if !l.Generic() {
			leadAt[i] = b.Node()
			b.ByteEdge(leadAt[i], l.NextLo, l.NextHi, restAt[l.Cont-1])
		}
	}
	// leaveOn adds leave edges to `to` for the bytes from lo to hi that
	// continue no name and are not in skip, in runs: a bit test per byte,
	// as it runs for every byte a key may have at every node of the trie.
	leaveOn := func(n *trieNode, lo, hi byte, to int32, skip byteSet) {
		blocked := n.kids
		for i := range blocked {
			blocked[i] |= skip[i]
		}
		free := func(x int) bool { return !blocked.has(byte(x)) }
		for x := int(lo); x <= int(hi); x++ {
			if !free(x) {
				continue
			}
			y := x
			for y+1 <= int(hi) && free(y+1) {
				y++
			}
			b.ByteEdge(n.id, byte(x), byte(y), to)
			x = y
		}
	}
	var none, quotes byteSet
	quotes.add('"')
	quotes.add('\\')
	var walk func(n *trieNode)
	walk = func(n *trieNode) {
		switch {
		case n.escape:
			// inside a name's escape: only the name goes on
		case n.cont > 0:
			leaveOn(n, n.nextLo, n.nextHi, restAt[n.cont-1], none)
		default:
			leaveOn(n, 0x20, 0x7F, restAt[0], quotes)
			for i, l := range leads {
				leaveOn(n, l.Lo, l.Hi, leadAt[i], none)
			}
			if !n.terminal {
				b.ByteEdge(n.id, '"', '"', end)
			}
		}
		// In byte order, so that node numbers do not vary.
		slices.SortFunc(n.children, func(x, y trieChild) int { return int(x.b) - int(y.b) })
		for _, ch := range n.children {
			b.ByteEdge(n.id, ch.b, ch.b, ch.n.id)
			walk(ch.n)
		}
	}
	walk(root)
	return grammar.Frag{Start: start, End: end}
}
