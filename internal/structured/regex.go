package structured

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
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
func FormatsGrammar() *grammar.Grammar {
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

// ECMAScript's \s is its WhiteSpace and LineTerminator code points,
// more than Go's [\t\n\f\r ]; ecmaPattern writes it, and \S, as these
// ranges, so that a class and its complement are ECMAScript's in Go's
// syntax (surrogates are no character of a JSON string's UTF-8).
const (
	ecmaSpace    = `\t-\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}`
	ecmaNonSpace = `\x{0}-\x{8}\x{E}-\x{1F}!-\x{9F}\x{A1}-\x{167F}\x{1681}-\x{1FFF}\x{200B}-\x{2027}\x{202A}-\x{202E}` +
		`\x{2030}-\x{205E}\x{2060}-\x{2FFF}\x{3001}-\x{D7FF}\x{E000}-\x{FEFE}\x{FF00}-\x{10FFFF}`
)

// ecmaPattern is ECMAScript pattern p (the dialect JSON Schema's patterns
// are written in) in Go's syntax, read the same: \s and \S as
// ECMAScript's classes, \uHHHH, \xHH, \cX, \0 and \v as the code points
// they name, \b inside a class as a backspace. It refuses, by name, what
// the two read differently and it does not rewrite: other escapes of a
// letter or digit (back-references, \b outside a class), POSIX classes,
// an empty class [] or [^] (nothing or any character in ECMAScript, a
// class holding ] in Go), and a lone surrogate.
func ecmaPattern(p string) (string, error) {
	if strings.Contains(p, "[:") {
		return "", genq.Errorf(genq.Invalid, "pattern %q: POSIX classes ([:...:]) are not supported", p)
	}
	var out strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		ch := p[i]
		switch {
		case ch == '[' && !inClass:
			if strings.HasPrefix(p[i:], "[]") || strings.HasPrefix(p[i:], "[^]") {
				return "", genq.Errorf(genq.Invalid, "pattern %q: an empty class [] or [^] is not supported", p)
			}
			inClass = true
		case ch == ']' && inClass:
			inClass = false
		}
		if ch != '\\' {
			out.WriteByte(ch)
			continue
		}
		if i+1 >= len(p) {
			return "", genq.Errorf(genq.Invalid, "pattern %q: it ends with a lone backslash", p)
		}
		n, err := ecmaEscape(&out, p, i+1, inClass)
		if err != nil {
			return "", err
		}
		i += n
	}
	return out.String(), nil
}

// ecmaEscape writes in Go's syntax the escape of p whose letter is at i,
// and says how many bytes it took past the backslash.
func ecmaEscape(out *strings.Builder, p string, i int, inClass bool) (int, error) {
	c := p[i]
	hex := func(n int) (rune, bool) {
		if i+n >= len(p) {
			return 0, false
		}
		v, err := strconv.ParseUint(p[i+1:i+1+n], 16, 32)
		return rune(v), err == nil && !strings.ContainsAny(p[i+1:i+1+n], "+-_")
	}
	code := func(r rune) { fmt.Fprintf(out, `\x{%X}`, r) }
	set := func(ranges string) {
		if inClass {
			out.WriteString(ranges)
		} else {
			out.WriteString("[" + ranges + "]")
		}
	}
	switch {
	case c == 's':
		set(ecmaSpace)
	case c == 'S':
		set(ecmaNonSpace)
	case strings.IndexByte("dDwWntfrvpP", c) >= 0: // \p as propertyClasses reads it
		out.WriteByte('\\')
		out.WriteByte(c)
	case c == 'b' && inClass:
		code(8)
	case c == 'x':
		r, ok := hex(2)
		if !ok {
			return 0, genq.Errorf(genq.Invalid, "pattern %q: write \\x with two hex digits", p)
		}
		code(r)
		return 3, nil
	case c == 'u':
		r, ok := hex(4)
		if !ok {
			return 0, genq.Errorf(genq.Invalid, "pattern %q: write \\u with four hex digits (\\u{…} is not supported)", p)
		}
		if r >= 0xD800 && r <= 0xDFFF {
			return 0, genq.Errorf(genq.Invalid, "pattern %q: a surrogate escape (\\u%04X) is not supported: write the character", p, r)
		}
		code(r)
		return 5, nil
	case c == 'c' && i+1 < len(p) && (p[i+1]|0x20 >= 'a' && p[i+1]|0x20 <= 'z'):
		code(rune(p[i+1] % 32))
		return 2, nil
	case c == '0' && (i+1 >= len(p) || p[i+1] < '0' || p[i+1] > '9'):
		code(0)
	case c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'):
		return 0, genq.Errorf(genq.Invalid, "pattern %q: the escape \\%c is not supported", p, c)
	default: // an escaped punctuation character stands for itself
		out.WriteByte('\\')
		out.WriteByte(c)
	}
	return 1, nil
}

// pattern matches a JSON string (quotes included) whose decoded value
// matches the regular expression p. Like JSON Schema's, the pattern is not
// anchored unless it says so with ^ and $.
func (c *compiler) pattern(p string) (grammar.Frag, error) {
	q, err := goSyntax(p)
	if err != nil {
		return grammar.Frag{}, err
	}
	return c.goPattern(q)
}

// goSyntax is ECMAScript pattern p in Go's syntax, its escapes
// (ecmaPattern) and property classes (propertyClasses) rewritten: how
// both the grammar and the name checks read a pattern.
func goSyntax(p string) (string, error) {
	q, err := ecmaPattern(p)
	if err != nil {
		return "", err
	}
	return propertyClasses(q)
}

// categories are ECMAScript's names of Unicode general categories, long
// and short, as Go's unicode.Categories names them. Other (C) and
// Unassigned (Cn) are left out: Go's tables have no unassigned category,
// so \P{C} would take code points ECMAScript's refuses.
var categories = func() map[string]string {
	m := map[string]string{}
	for long, short := range map[string]string{
		"Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
		"Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo",
		"Mark": "M", "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me",
		"Number": "N", "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No",
		"Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
		"Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
		"Final_Punctuation": "Pf", "Other_Punctuation": "Po",
		"Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So",
		"Separator": "Z", "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp",
		"Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Private_Use": "Co",
	} {
		if _, ok := unicode.Categories[short]; ok {
			m[long], m[short] = short, short
		}
	}
	return m
}()

// propertyClasses rewrites p's ECMAScript property escapes (\p{Letter},
// \P{gc=Lu}, \p{Script=Greek}) as Go's syntax writes them (\p{L},
// \P{Lu}, \p{Greek}), and refuses by name those Go's tables cannot say
// the same way (binary properties such as Alphabetic, Script_Extensions).
func propertyClasses(p string) (string, error) {
	if !strings.Contains(p, `\p`) && !strings.Contains(p, `\P`) {
		return p, nil
	}
	var out strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '\\' || i+1 >= len(p) {
			out.WriteByte(p[i])
			continue
		}
		c := p[i+1]
		if c != 'p' && c != 'P' {
			out.WriteString(p[i : i+2])
			i++
			continue
		}
		end := strings.IndexByte(p[i:], '}')
		if i+2 >= len(p) || p[i+2] != '{' || end < 0 {
			return "", genq.Errorf(genq.Invalid, "pattern %q: write \\%c with a property in braces, as \\%c{Letter}", p, c, c)
		}
		name := p[i+3 : i+end]
		short, err := propertyName(name)
		if err != nil {
			return "", genq.Errorf(genq.Invalid, "pattern %q: \\%c{%s} is not supported: %s", p, c, name, err.Error())
		}
		out.WriteString(`\` + string(c) + "{" + short + "}")
		i += end
	}
	return out.String(), nil
}

// propertyName is Go's name of an ECMAScript property escape's property:
// a general category (Letter, L, gc=L, General_Category=Letter) or a
// script (Script=Greek, sc=Greek).
func propertyName(name string) (string, error) {
	key, val, hasKey := strings.Cut(name, "=")
	switch {
	case !hasKey:
		val = key
	case key == "General_Category" || key == "gc":
	case key == "Script" || key == "sc":
		if _, ok := unicode.Scripts[val]; !ok {
			return "", errors.New("genq knows no script " + strconv.Quote(val))
		}
		return val, nil
	default:
		return "", errors.New("genq reads general categories and Script only")
	}
	if short, ok := categories[val]; ok {
		return short, nil
	}
	return "", errors.New("genq reads general categories (but Other and Unassigned) and Script only")
}

// goPattern is pattern for p read in Go's syntax, unchecked.
func (c *compiler) goPattern(p string) (grammar.Frag, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return grammar.Frag{}, genq.WrapError(genq.Invalid, err, "pattern "+quote(p)+" is not a supported regular expression: "+err.Error())
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
	parts := []grammar.Frag{b.Lit(`"`)}
	anyChars := func() grammar.Frag { return b.Star(c.char()) }
	if !anchoredStart {
		parts = append(parts, anyChars())
	}
	for _, s := range subs {
		f, err := c.regex(s, p)
		if err != nil {
			return grammar.Frag{}, err
		}
		parts = append(parts, f)
	}
	if !anchoredEnd {
		parts = append(parts, anyChars())
	}
	parts = append(parts, b.Lit(`"`))
	return b.Seq(parts...), b.Err
}

func quote(s string) string { return `"` + s + `"` }

func (c *compiler) regex(re *syntax.Regexp, p string) (grammar.Frag, error) {
	b := c.b
	if b.Failed() {
		return grammar.Frag{}, b.Err
	}
	if re.Flags&syntax.FoldCase != 0 && !c.fold {
		return grammar.Frag{}, genq.Errorf(genq.Invalid, "pattern %q: case-insensitive matching is not supported", p)
	}
	subs := func() ([]grammar.Frag, error) {
		out := make([]grammar.Frag, 0, len(re.Sub))
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
		return b.Alt(), nil
	case syntax.OpEmptyMatch:
		return b.Empty(), nil
	case syntax.OpLiteral:
		fs := make([]grammar.Frag, 0, len(re.Rune))
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				fs = append(fs, c.runeClass(foldRanges(r)))
				continue
			}
			fs = append(fs, c.runeClass([]rune{r, r}))
		}
		return b.Seq(fs...), nil
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
		return b.Seq(fs...), err
	case syntax.OpAlternate:
		fs, err := subs()
		return b.Alt(fs...), err
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
		if min > grammar.MaxRepeat || max > grammar.MaxRepeat {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "pattern %q: a repeat over %d is not supported", p, grammar.MaxRepeat)
		}
		var err error
		f := b.Repeat(min, max, func() grammar.Frag {
			f, e := c.regex(re.Sub[0], p)
			if e != nil && err == nil {
				err = e
			}
			return f
		})
		return f, err
	}
	return grammar.Frag{}, genq.Errorf(genq.Invalid, "pattern %q: %s is not supported (anchors only at the very start and end)", p, opName(re.Op))
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
// short escapes or \u00XX (a trie), every other code point as its UTF-8
// bytes: one node's edges on the lead byte, into tails that the
// sequences share (the continuation bytes left, by their ranges), so that
// a class of many ranges, such as \p{L}, costs states by its distinct
// tails, not by its ranges.
func (c *compiler) runeClass(r []rune) grammar.Frag {
	b := c.b
	start, end := b.Node(), b.Node()
	tails := map[string]int32{}
	var tail func(seq [][2]byte) int32
	tail = func(seq [][2]byte) int32 {
		if len(seq) == 0 {
			return end
		}
		key := string(flatten(seq))
		if n, ok := tails[key]; ok {
			return n
		}
		n := b.Node()
		b.ByteEdge(n, seq[0][0], seq[0][1], tail(seq[1:]))
		tails[key] = n
		return n
	}
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
				b.ByteEdge(start, seq[0][0], seq[0][1], tail(seq[1:]))
			})
		}
	}
	if len(escapes) > 0 {
		return b.Union(grammar.Frag{Start: start, End: end}, b.Lits(escapes))
	}
	return grammar.Frag{Start: start, End: end}
}

// flatten is seq's bytes in order, a map key.
func flatten(seq [][2]byte) []byte {
	out := make([]byte, 0, 2*len(seq))
	for _, br := range seq {
		out = append(out, br[0], br[1])
	}
	return out
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
