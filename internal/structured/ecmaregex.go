package structured

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// validECMARegex is the format regex: an ECMA-262 Pattern, read as a
// RegExp with the u flag reads it (as ajv does). With the u flag the
// syntax is stricter than without it (ECMA-262's Annex B), so a pattern
// taken here compiles either way. Its validity rests on counts and names
// across the whole pattern (a backreference's group, \k<name>'s name,
// duplicate names), so it is a test of a whole value, made on top of an
// automaton of every string (formatCheck).
//
// regexSuperset is the automaton's part of the format regex: a Go
// pattern of the strings made of a Pattern's lexical pieces in an order
// the grammar of a Pattern allows: escapes only the u flag's, a
// quantifier only after an atom, a group opened only as ECMA-262 opens
// one and closed, no lone ] { }. Groups nest at most regexSupersetDepth
// deep (deeper patterns are refused: none was met in any corpus). Every
// other valid pattern is in it, and the slips a model brings from other
// dialects (\A, \Z, (?i), (?P<…>), a quantifier after nothing, a ) with
// no group open, a string ended inside a group) are not, so a mask keeps
// them out before the string ends, where no later byte could mend them.
// What rests on names and orders (backreferences, a range's ends, a
// quantified lookaround) is validECMARegex's, at the end.
func regexSuperset() string {
	const (
		hex  = `[0-9A-Fa-f]`
		name = `[A-Za-z_$\x{80}-\x{10FFFF}][A-Za-z0-9_$\x{80}-\x{10FFFF}]*`
	)
	charEsc := `[fnrtv]|c[A-Za-z]|0|x` + hex + `{2}|u(` + hex + `{4}|\{` + hex + `+\})|[pP]\{[A-Za-z0-9_=]+\}|[dDsSwW]|[\^$\\.*+?()\[\]{}|/]`
	atomEsc := `\\(` + charEsc + `|[1-9][0-9]*|k<` + name + `>)`
	class := `\[\^?([^\\\]]|\\(` + charEsc + `|[b\-]))*\]`
	quant := `(([*+?]|\{[0-9]+(,[0-9]*)?\})\??)?`
	atom := `([^\^$\\.*+?()\[\]{}|]|\.|` + atomEsc + `|` + class + `)`
	open := `\((\?(:|=|!|<=|<!|<` + name + `>))?`
	// Innermost first: each level holds the pieces, and groups of the
	// level inside it.
	level := `(` + atom + quant + `|\^|\$|\\[bB]|\|)*`
	for range regexSupersetDepth {
		level = `(` + atom + quant + `|\^|\$|\\[bB]|\||` + open + level + `\)` + quant + `)*`
	}
	return level
}

// regexSupersetDepth is how deep regexSuperset's groups nest.
const regexSupersetDepth = 8

// Where ECMA-262's newer editions allow more than some engines in use
// (duplicate group names in separate alternatives, modifiers (?i:…),
// escapes in group names, short script names in \p{…}), the pattern is
// refused: never an expression an engine would reject.
func validECMARegex(s string) bool {
	p := &reParser{rs: []rune(s), names: map[string]bool{}, ok: true}
	p.disjunction()
	if !p.ok || p.i != len(p.rs) {
		return false
	}
	if p.maxBackref > p.groups {
		return false
	}
	for _, n := range p.refs {
		if !p.names[n] {
			return false
		}
	}
	return true
}

// reParser reads a Pattern by recursive descent; ok turns false at the
// first error.
type reParser struct {
	rs         []rune
	i          int
	ok         bool
	groups     int
	maxBackref int
	names      map[string]bool
	refs       []string
	depth      int
}

// maxRegexDepth bounds nesting, so that a hostile pattern cannot exhaust
// the stack.
const maxRegexDepth = 256

func (p *reParser) eof() bool { return p.i >= len(p.rs) }

func (p *reParser) peek() rune {
	if p.eof() {
		return -1
	}
	return p.rs[p.i]
}

func (p *reParser) peekAt(k int) rune {
	if p.i+k >= len(p.rs) {
		return -1
	}
	return p.rs[p.i+k]
}

func (p *reParser) fail() { p.ok = false }

func (p *reParser) disjunction() {
	p.depth++
	if p.depth > maxRegexDepth {
		p.fail()
		return
	}
	defer func() { p.depth-- }()
	p.alternative()
	for p.ok && p.peek() == '|' {
		p.i++
		p.alternative()
	}
}

func (p *reParser) alternative() {
	for p.ok && !p.eof() && p.peek() != '|' && p.peek() != ')' {
		p.term()
	}
}

func (p *reParser) term() {
	switch c := p.peek(); {
	case c == '^' || c == '$':
		p.i++
		p.noQuantifier()
		return
	case c == '\\' && (p.peekAt(1) == 'b' || p.peekAt(1) == 'B'):
		p.i += 2
		p.noQuantifier()
		return
	case c == '(' && p.peekAt(1) == '?' && (p.peekAt(2) == '=' || p.peekAt(2) == '!'):
		p.i += 3
		p.group()
		p.noQuantifier() // a quantified lookaround is Annex B's alone
		return
	case c == '(' && p.peekAt(1) == '?' && p.peekAt(2) == '<' && (p.peekAt(3) == '=' || p.peekAt(3) == '!'):
		p.i += 4
		p.group()
		p.noQuantifier()
		return
	}
	p.atom()
	if p.ok {
		p.quantifier()
	}
}

// group reads a disjunction and its closing parenthesis.
func (p *reParser) group() {
	p.disjunction()
	if p.ok && p.peek() != ')' {
		p.fail()
		return
	}
	p.i++
}

func (p *reParser) noQuantifier() {
	switch p.peek() {
	case '*', '+', '?', '{':
		p.fail()
	}
}

func (p *reParser) atom() {
	c := p.peek()
	switch c {
	case '.':
		p.i++
	case '[':
		p.i++
		p.class()
	case '\\':
		p.i++
		p.atomEscape()
	case '(':
		p.i++
		if p.peek() == '?' {
			switch {
			case p.peekAt(1) == ':':
				p.i += 2
			case p.peekAt(1) == '<':
				p.i += 2
				name, ok := p.groupName()
				if !ok || p.names[name] {
					p.fail()
					return
				}
				p.names[name] = true
				p.groups++
			default:
				p.fail()
				return
			}
		} else {
			p.groups++
		}
		p.group()
	case '*', '+', '?', '{', '}', ']', ')', '|':
		p.fail() // nothing to repeat, or a lone syntax character
	default:
		p.i++
	}
}

// quantifier reads an optional quantifier and its lazy mark.
func (p *reParser) quantifier() {
	switch p.peek() {
	case '*', '+', '?':
		p.i++
	case '{':
		p.i++
		lo, ok := p.digits()
		if !ok {
			p.fail()
			return
		}
		hi := lo
		if p.peek() == ',' {
			p.i++
			hi = ""
			if p.peek() != '}' {
				if hi, ok = p.digits(); !ok {
					p.fail()
					return
				}
			}
		}
		if p.peek() != '}' || hi != "" && greaterDecimal(lo, hi) {
			p.fail()
			return
		}
		p.i++
	default:
		return
	}
	if p.peek() == '?' {
		p.i++
	}
}

// digits reads decimal digits, without leading zeros (which compare as
// numbers).
func (p *reParser) digits() (string, bool) {
	start := p.i
	for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
		p.i++
	}
	if p.i == start {
		return "", false
	}
	d := strings.TrimLeft(string(p.rs[start:p.i]), "0")
	if d == "" {
		d = "0"
	}
	return d, true
}

// greaterDecimal compares two decimals without leading zeros.
func greaterDecimal(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// atomEscape reads what follows a backslash outside a class.
func (p *reParser) atomEscape() {
	c := p.peek()
	switch {
	case c >= '1' && c <= '9':
		n, _ := p.digits()
		if len(n) > 9 {
			p.maxBackref = 1 << 30
		} else if v, _ := strconv.Atoi(n); v > p.maxBackref {
			p.maxBackref = v
		}
	case c == 'k':
		p.i++
		if p.peek() != '<' {
			p.fail()
			return
		}
		p.i++
		name, ok := p.groupName()
		if !ok {
			p.fail()
			return
		}
		p.refs = append(p.refs, name)
	default:
		if _, ok := p.classOrCharEscape(false); !ok {
			p.fail()
		}
	}
}

// classOrCharEscape reads a character class escape (\d, \p{…}: single is
// -1) or a character escape (single is its code point), in a class where
// inClass; false for an escape the u flag refuses.
func (p *reParser) classOrCharEscape(inClass bool) (single rune, ok bool) {
	c := p.peek()
	if c < 0 {
		return 0, false
	}
	p.i++
	switch c {
	case 'd', 'D', 's', 'S', 'w', 'W':
		return -1, true
	case 'p', 'P':
		return -1, p.property()
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'v':
		return '\v', true
	case 'c':
		l := p.peek()
		if l >= 'a' && l <= 'z' || l >= 'A' && l <= 'Z' {
			p.i++
			return l % 32, true
		}
		return 0, false
	case '0':
		if d := p.peek(); d >= '0' && d <= '9' {
			return 0, false
		}
		return 0, true
	case 'x':
		v, ok := p.hex(2)
		return v, ok
	case 'u':
		return p.unicodeEscape()
	case '-':
		return '-', inClass
	case 'b':
		return '\b', inClass
	}
	if strings.ContainsRune(`^$\.*+?()[]{}|/`, c) {
		return c, true
	}
	return 0, false
}

// hex reads n hex digits.
func (p *reParser) hex(n int) (rune, bool) {
	var v rune
	for range n {
		d, ok := hexVal(p.peek())
		if !ok {
			return 0, false
		}
		v = v*16 + d
		p.i++
	}
	return v, true
}

func hexVal(c rune) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unicodeEscape reads \uXXXX (a surrogate pair as one code point), or
// \u{…} up to U+10FFFF.
func (p *reParser) unicodeEscape() (rune, bool) {
	if p.peek() == '{' {
		p.i++
		var v rune
		n := 0
		for p.peek() != '}' {
			d, ok := hexVal(p.peek())
			if !ok {
				return 0, false
			}
			v = v*16 + d
			if v > unicode.MaxRune {
				return 0, false
			}
			p.i++
			n++
		}
		p.i++
		return v, n > 0
	}
	v, ok := p.hex(4)
	if !ok {
		return 0, false
	}
	if v >= 0xD800 && v <= 0xDBFF && p.peek() == '\\' && p.peekAt(1) == 'u' {
		save := p.i
		p.i += 2
		if lo, ok := p.hex(4); ok && lo >= 0xDC00 && lo <= 0xDFFF {
			return (v-0xD800)<<10 + (lo - 0xDC00) + 0x10000, true
		}
		p.i = save
	}
	return v, true
}

// class reads a character class after its [.
func (p *reParser) class() {
	if p.peek() == '^' {
		p.i++
	}
	for p.ok {
		switch p.peek() {
		case -1:
			p.fail()
			return
		case ']':
			p.i++
			return
		}
		lo, ok := p.classAtom()
		if !ok {
			p.fail()
			return
		}
		if p.peek() != '-' || p.peekAt(1) == ']' || p.peekAt(1) == -1 {
			continue
		}
		p.i++
		hi, ok := p.classAtom()
		if !ok || lo < 0 || hi < 0 || lo > hi {
			p.fail() // with the u flag a range is between two characters, in order
			return
		}
	}
}

// classAtom reads one character of a class (its code point) or a class
// escape (-1).
func (p *reParser) classAtom() (rune, bool) {
	c := p.peek()
	p.i++
	if c != '\\' {
		return c, true
	}
	return p.classOrCharEscape(true)
}

// groupName reads a RegExpIdentifierName and its closing >.
func (p *reParser) groupName() (string, bool) {
	start := p.i
	for !p.eof() && p.peek() != '>' {
		r := p.peek()
		first := p.i == start
		if !(r == '$' || r == '_' || idStart(r) || !first && idContinue(r)) {
			return "", false
		}
		p.i++
	}
	if p.eof() || p.i == start {
		return "", false
	}
	name := string(p.rs[start:p.i])
	p.i++
	return name, true
}

// idStart and idContinue are Unicode's ID_Start and ID_Continue, less
// their Other_ additions (refused rather than guessed).
func idStart(r rune) bool {
	return unicode.In(r, unicode.L, unicode.Nl) && !unicode.In(r, unicode.Pattern_Syntax, unicode.Pattern_White_Space)
}

func idContinue(r rune) bool {
	return r == 0x200C || r == 0x200D || idStart(r) ||
		unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc) && !unicode.In(r, unicode.Pattern_Syntax, unicode.Pattern_White_Space)
}

// property reads {…} after \p or \P: a general category, a binary
// property, or General_Category, Script or Script_Extensions = a value.
func (p *reParser) property() bool {
	if p.peek() != '{' {
		return false
	}
	p.i++
	start := p.i
	for !p.eof() && p.peek() != '}' {
		p.i++
	}
	if p.eof() {
		return false
	}
	body := string(p.rs[start:p.i])
	p.i++
	name, value, pair := strings.Cut(body, "=")
	if !pair {
		return generalCategory(name) || binaryProperties[name]
	}
	switch name {
	case "General_Category", "gc":
		return generalCategory(value)
	case "Script", "sc", "Script_Extensions", "scx":
		_, ok := unicode.Scripts[value]
		return ok
	}
	return false
}

// generalCategory reports whether v names a General_Category ECMA-262
// knows: those genq's patterns read (categories), and those Go's tables
// cannot say, which a pattern may still name.
func generalCategory(v string) bool {
	if _, ok := categories[v]; ok {
		return true
	}
	return slices.Contains([]string{"LC", "Cased_Letter", "C", "Other", "Cs", "Surrogate", "Cn", "Unassigned"}, v)
}

// binaryProperties are ECMA-262's binary Unicode properties, long and
// short.
var binaryProperties = setOf(
	"ASCII", "ASCII_Hex_Digit", "AHex", "Alphabetic", "Alpha", "Any", "Assigned",
	"Bidi_Control", "Bidi_C", "Bidi_Mirrored", "Bidi_M", "Case_Ignorable", "CI", "Cased",
	"Changes_When_Casefolded", "CWCF", "Changes_When_Casemapped", "CWCM",
	"Changes_When_Lowercased", "CWL", "Changes_When_NFKC_Casefolded", "CWKCF",
	"Changes_When_Titlecased", "CWT", "Changes_When_Uppercased", "CWU", "Dash",
	"Default_Ignorable_Code_Point", "DI", "Deprecated", "Dep", "Diacritic", "Dia",
	"Emoji", "Emoji_Component", "EComp", "Emoji_Modifier", "EMod", "Emoji_Modifier_Base", "EBase",
	"Emoji_Presentation", "EPres", "Extended_Pictographic", "ExtPict", "Extender", "Ext",
	"Grapheme_Base", "Gr_Base", "Grapheme_Extend", "Gr_Ext", "Hex_Digit", "Hex",
	"IDS_Binary_Operator", "IDSB", "IDS_Trinary_Operator", "IDST", "ID_Continue", "IDC", "ID_Start", "IDS",
	"Ideographic", "Ideo", "Join_Control", "Join_C", "Logical_Order_Exception", "LOE",
	"Lowercase", "Lower", "Math", "Noncharacter_Code_Point", "NChar", "Pattern_Syntax", "Pat_Syn",
	"Pattern_White_Space", "Pat_WS", "Quotation_Mark", "QMark", "Radical", "Regional_Indicator", "RI",
	"Sentence_Terminal", "STerm", "Soft_Dotted", "SD", "Terminal_Punctuation", "Term",
	"Unified_Ideograph", "UIdeo", "Uppercase", "Upper", "Variation_Selector", "VS",
	"White_Space", "space", "XID_Continue", "XIDC", "XID_Start", "XIDS")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
