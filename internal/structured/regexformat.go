package structured

import (
	"fmt"
	"strings"
)

// The format "regex" asks for an ECMA-262 regular expression. Its syntax
// is not a regular language (groups nest), and an expression's validity
// also rests on counts and names (a backreference's group, a duplicate
// group name, {n,m} with n > m, a range [z-a]). A strict schema, as it
// does hostname, holds it to a subset a grammar can hold, valid both with
// the u flag (as ajv reads the format) and without it (ECMA-262's Annex
// B), so no string it takes is an invalid expression whichever a
// validator reads. JSON Schema's mode refuses the format instead: the
// official suite's valid \k<name> backreferences, whose name must equal
// a group's, are beyond any automaton of bounded size. The subset:
//
//   - groups (…) and (?:…) nested at most regexFormatDepth deep, and the
//     lookarounds (?=…), (?!…), (?<=…), (?<!…) holding no group; no named
//     groups;
//   - escapes: \d \D \s \S \w \W, \b \B outside a class, \f \n \r \t \v,
//     \cX, \xHH, \uHHHH, a syntax character or / escaped, \- in a class,
//     and \p{…} \P{…} with a general category (regexFormatProperties);
//     no backreference, \0, \k or \u{…};
//   - quantifiers *, +, ?, {n}, {n,}, and {n,m} with n < m written without
//     leading zeros where n has at most three digits and m more, both one
//     digit, or both two with n's tens below m's (n = m: one digit), each
//     with an optional lazy ?;
//     a lookaround or an assertion is never quantified;
//   - classes [^…] whose ranges run between two printable ASCII
//     characters in order, - alone only first or last.
const regexFormatDepth = 3

// regexFormatProperties are the general categories \p{…} may name: ones
// ECMA-262 defines under both their short names.
var regexFormatProperties = []string{
	"L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
	"P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs", "Zl", "Zp",
	"C", "Cc", "Cf", "Co", "Cn",
}

// regexFormatPattern is the Go pattern (unanchored) of the ECMA-262
// expressions genq takes as the format "regex".
func regexFormatPattern() string {
	return regexDisjunction(regexFormatDepth)
}

// regexDisjunction is alternatives of terms whose groups nest at most
// depth deep; a negative depth, no group or lookaround at all.
func regexDisjunction(depth int) string {
	// Terms and bars in any order are the alternatives of terms, with
	// one copy of the term's automaton.
	return `(` + regexTerm(depth) + `|\|)*`
}

// regexTerm is an assertion, a lookaround, or an atom with an optional
// quantifier.
func regexTerm(depth int) string {
	const (
		hex = `[0-9A-Fa-f]`
		// A syntax character, or /, escaped; an escape both readings take.
		identity = `\\[\^$\\.*+?()\[\]{}|/]`
	)
	charEsc := `\\([fnrtv]|c[A-Za-z]|x` + hex + `{2}|u` + hex + `{4}|[dDsSwW]|[pP]\{(` +
		strings.Join(regexFormatProperties, "|") + `)\})`
	atoms := []string{
		`[^\^$\\.*+?()\[\]{}|]`, // a pattern character
		`\.`,
		identity,
		charEsc,
		regexClass(),
	}
	assertions := []string{`\^`, `\$`, `\\[bB]`}
	// A lookaround holds no group, so that each depth adds one copy of
	// the automaton below it, not two.
	if depth >= 0 {
		assertions = append(assertions, `\(\?(=|!|<=|<!)`+regexDisjunction(-1)+`\)`)
	}
	if depth > 0 {
		atoms = append(atoms, `\((\?:)?`+regexDisjunction(depth-1)+`\)`)
	}
	quantified := `(` + strings.Join(atoms, "|") + `)(` + regexQuantifier() + `)?`
	return strings.Join(append(assertions, quantified), "|")
}

// regexQuantifier is *, +, ?, {n}, {n,} or {n,m} with n ≤ m, then an
// optional lazy ?.
func regexQuantifier() string {
	const numeral = `(0|[1-9][0-9]*)`
	// canonical is a numeral of exactly k digits, without leading zeros.
	canonical := func(k int) string {
		if k == 1 {
			return `[0-9]`
		}
		return fmt.Sprintf(`[1-9][0-9]{%d}`, k-1)
	}
	var ranges []string
	// n shorter than m: n has at most three digits, m any more.
	for k := 1; k <= 3; k++ {
		ranges = append(ranges, canonical(k)+`,[1-9][0-9]{`+fmt.Sprint(k)+`,}`)
	}
	// As long: one digit each, in order; two, the tens in order.
	for a := 0; a <= 9; a++ {
		ranges = append(ranges, fmt.Sprintf(`%d,[%d-9]`, a, a))
	}
	for a := 1; a < 9; a++ {
		ranges = append(ranges, fmt.Sprintf(`%d[0-9],[%d-9][0-9]`, a, a+1))
	}
	return `([*+?]|\{(` + numeral + `,?|` + strings.Join(ranges, "|") + `)\})\??`
}

// regexClass is a character class: items that are a character, an
// escape or a range in order, with - alone only first or last.
func regexClass() string {
	const hex = `[0-9A-Fa-f]`
	esc := `\\([bfnrtv\-]|c[A-Za-z]|x` + hex + `{2}|u` + hex + `{4}|[dDsSwW]|[\^$\\.*+?()\[\]{}|/])`
	single := `[^\\\]\-]|` + esc
	item := single + `|` + asciiRanges()
	return `\[\^?(-?(` + item + `)+-?|-)?\]`
}

// asciiRanges are the ranges lo-hi between printable ASCII characters
// other than \, ] and -, lo ≤ hi: ECMA-262 refuses a range out of order.
func asciiRanges() string {
	var alts []string
	for lo := byte(' '); lo <= '~'; lo++ {
		if !rangeEnd(lo) {
			continue
		}
		var his strings.Builder
		for hi := lo; hi <= '~'; hi++ {
			if rangeEnd(hi) {
				his.WriteString(classLiteral(hi))
			}
		}
		alts = append(alts, classLiteral(lo)+`-[`+his.String()+`]`)
	}
	return strings.Join(alts, "|")
}

// rangeEnd says whether c may end a range in regexClass.
func rangeEnd(c byte) bool { return c != '\\' && c != ']' && c != '-' }

// classLiteral is c escaped for a Go pattern, inside or outside a class.
func classLiteral(c byte) string {
	if c < 0x80 && (strings.IndexByte(`\.+*?()|[]{}^$-`, c) >= 0) {
		return `\` + string(c)
	}
	return string(c)
}
