package structured

import (
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
)

// enforcedFormats are the formats FormatsGrammar warms: those schemas use
// most (GitHub's API descriptions write uri and uri-template on nearly
// every object). iri and iri-reference are left out: their Unicode
// ranges make their masks the dearest (docs/benchmarks.md), spent only
// where a schema asks.
var enforcedFormats = []string{"date", "date-time", "time", "duration", "uuid", "email", "ipv4", "ipv6",
	"uri", "uri-reference", "uri-template", "json-pointer", "relative-json-pointer"}

// FormatsGrammar is a grammar of the formats schemas use most. Each format
// is a rule whose masks a Vocab shares with every grammar that holds it,
// so preparing this one (Prepare) once per model spares the first schema
// with each format its walks.
func FormatsGrammar() *Grammar {
	var b strings.Builder
	b.WriteString(`{"anyOf":[`)
	for i, f := range enforcedFormats {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"type":"string","format":"` + f + `"}`)
	}
	b.WriteString("]}")
	g, err := Compile([]byte(b.String()))
	if err != nil {
		panic("structured: the formats' grammar: " + err.Error()) // a fixed schema: a test compiles it
	}
	return g
}

// checkPatternSyntax refuses what ECMAScript (the dialect JSON Schema's
// patterns are written in) and Go's parser would read differently: escapes
// outside a small common set, POSIX classes, and \S, which in Go takes
// characters that ECMAScript counts as space.
func checkPatternSyntax(p string) error {
	if strings.Contains(p, "[:") {
		return genq.Errorf(genq.Invalid, "pattern %q: POSIX classes ([:...:]) are not supported", p)
	}
	for i := 0; i+1 < len(p); i++ {
		if p[i] != '\\' {
			continue
		}
		c := p[i+1]
		i++
		switch {
		case strings.IndexByte("dDwWsntfr", c) >= 0:
		case c == 'x':
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return genq.Errorf(genq.Invalid, "pattern %q: write \\x with two hex digits", p)
			}
		case c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'):
			return genq.Errorf(genq.Invalid, "pattern %q: the escape \\%c is not supported", p, c)
		}
		if c == 's' && strings.Contains(p, "[^") {
			return genq.Errorf(genq.Invalid, "pattern %q: \\s in a negated class is not supported", p)
		}
	}
	if strings.Contains(p, `\S`) {
		return genq.Errorf(genq.Invalid, "pattern %q: \\S is not supported", p)
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// pattern matches a JSON string (quotes included) whose decoded value
// matches the regular expression p. Like JSON Schema's, the pattern is not
// anchored unless it says so with ^ and $.
func (c *compiler) pattern(p string) (frag, error) {
	if err := checkPatternSyntax(p); err != nil {
		return frag{}, err
	}
	return c.goPattern(p)
}

// goPattern is pattern for p read in Go's syntax, unchecked.
func (c *compiler) goPattern(p string) (frag, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return frag{}, genq.WrapError(genq.Invalid, err, "pattern "+quote(p)+" is not a supported regular expression: "+err.Error())
	}
	re = re.Simplify()
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	anchoredStart := len(subs) > 0 && subs[0].Op == syntax.OpBeginText
	if anchoredStart {
		subs = subs[1:]
	}
	anchoredEnd := len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText
	if anchoredEnd {
		subs = subs[:len(subs)-1]
	}
	b := c.b
	parts := []frag{b.lit(`"`)}
	anyChars := func() frag { return b.star(c.char()) }
	if !anchoredStart {
		parts = append(parts, anyChars())
	}
	for _, s := range subs {
		f, err := c.regex(s, p)
		if err != nil {
			return frag{}, err
		}
		parts = append(parts, f)
	}
	if !anchoredEnd {
		parts = append(parts, anyChars())
	}
	parts = append(parts, b.lit(`"`))
	return b.seq(parts...), b.err
}

func quote(s string) string { return `"` + s + `"` }

func (c *compiler) regex(re *syntax.Regexp, p string) (frag, error) {
	b := c.b
	if b.failed() {
		return frag{}, b.err
	}
	if re.Flags&syntax.FoldCase != 0 && !c.fold {
		return frag{}, genq.Errorf(genq.Invalid, "pattern %q: case-insensitive matching is not supported", p)
	}
	subs := func() ([]frag, error) {
		out := make([]frag, 0, len(re.Sub))
		for _, s := range re.Sub {
			f, err := c.regex(s, p)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return b.alt(), nil
	case syntax.OpEmptyMatch:
		return b.empty(), nil
	case syntax.OpLiteral:
		fs := make([]frag, 0, len(re.Rune))
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				fs = append(fs, c.runeClass(foldRanges(r)))
				continue
			}
			fs = append(fs, c.runeClass([]rune{r, r}))
		}
		return b.seq(fs...), nil
	case syntax.OpCharClass:
		return c.runeClass(re.Rune), nil
	case syntax.OpAnyCharNotNL:
		// ECMAScript's dot leaves out every line terminator, not only \n.
		return c.runeClass([]rune{0, '\n' - 1, '\n' + 1, '\r' - 1, '\r' + 1, 0x2027, 0x202A, utf8.MaxRune}), nil
	case syntax.OpAnyChar:
		return c.runeClass([]rune{0, utf8.MaxRune}), nil
	case syntax.OpCapture:
		return c.regex(re.Sub[0], p)
	case syntax.OpConcat:
		fs, err := subs()
		return b.seq(fs...), err
	case syntax.OpAlternate:
		fs, err := subs()
		return b.alt(fs...), err
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		min, max := 0, -1
		switch re.Op {
		case syntax.OpPlus:
			min = 1
		case syntax.OpQuest:
			max = 1
		case syntax.OpRepeat:
			min, max = re.Min, re.Max
		}
		if min > maxRepeat || max > maxRepeat {
			return frag{}, genq.Errorf(genq.Invalid, "pattern %q: a repeat over %d is not supported", p, maxRepeat)
		}
		var err error
		f := b.repeat(min, max, func() frag {
			f, e := c.regex(re.Sub[0], p)
			if e != nil && err == nil {
				err = e
			}
			return f
		})
		return f, err
	}
	return frag{}, genq.Errorf(genq.Invalid, "pattern %q: %s is not supported (anchors only at the very start and end)", p, opName(re.Op))
}

func opName(op syntax.Op) string {
	switch op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return "an anchor here"
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return "a word boundary"
	}
	return "this construct"
}

// runeClass matches one character in the rune ranges r (pairs), written
// as JSON writes it inside a string: '"' and '\' escaped, controls as
// short escapes or \u00XX, every other code point as its UTF-8 bytes.
func (c *compiler) runeClass(r []rune) frag {
	b := c.b
	var alts []frag
	var escapes []string
	for i := 0; i+1 < len(r); i += 2 {
		lo, hi := r[i], r[i+1]
		for ch := lo; ch <= hi && ch < 0x20; ch++ {
			escapes = append(escapes, jsonEscape(ch))
		}
		if lo < 0x20 {
			lo = 0x20
		}
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= hi {
				escapes = append(escapes, `\`+string(special))
			}
		}
		// Surrogates are not characters and have no UTF-8 form.
		for _, rg := range cutRanges(lo, hi, []rune{'"', '\\'}, 0xD800, 0xDFFF) {
			utf8Ranges(rg[0], rg[1], func(seq [][2]byte) {
				fs := make([]frag, len(seq))
				for k, br := range seq {
					fs[k] = b.ranges(br[0], br[1])
				}
				alts = append(alts, b.seq(fs...))
			})
		}
	}
	if len(escapes) > 0 {
		alts = append(alts, b.lits(escapes))
	}
	return b.union(alts...)
}

func jsonEscape(ch rune) string {
	switch ch {
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	}
	const hexd = "0123456789abcdef"
	return `\u00` + string(hexd[ch>>4]) + string(hexd[ch&15])
}

// cutRanges returns [lo,hi] less the single runes in holes and the range
// [gapLo,gapHi], as pairs.
func cutRanges(lo, hi rune, holes []rune, gapLo, gapHi rune) [][2]rune {
	out := [][2]rune{{lo, hi}}
	cut := func(a, z rune) {
		var next [][2]rune
		for _, rg := range out {
			if z < rg[0] || a > rg[1] {
				next = append(next, rg)
				continue
			}
			if rg[0] < a {
				next = append(next, [2]rune{rg[0], a - 1})
			}
			if z < rg[1] {
				next = append(next, [2]rune{z + 1, rg[1]})
			}
		}
		out = next
	}
	for _, h := range holes {
		cut(h, h)
	}
	cut(gapLo, gapHi)
	return out
}

// utf8Ranges calls emit with sequences of byte ranges whose concatenations
// are exactly the UTF-8 forms of the code points lo to hi (no surrogates
// among them).
func utf8Ranges(lo, hi rune, emit func([][2]byte)) {
	if lo > hi {
		return
	}
	for _, max := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= max && hi > max {
			utf8Ranges(lo, max, emit)
			utf8Ranges(max+1, hi, emit)
			return
		}
	}
	if hi < 0x80 {
		emit([][2]byte{{byte(lo), byte(hi)}})
		return
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				utf8Ranges(lo, lo|m, emit)
				utf8Ranges((lo|m)+1, hi, emit)
				return
			}
			if hi&m != m {
				utf8Ranges(lo, (hi&^m)-1, emit)
				utf8Ranges(hi&^m, hi, emit)
				return
			}
		}
	}
	var a, z [utf8.UTFMax]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(z[:], hi)
	seq := make([][2]byte, n)
	for i := 0; i < n; i++ {
		seq[i] = [2]byte{a[i], z[i]}
	}
	emit(seq)
}
