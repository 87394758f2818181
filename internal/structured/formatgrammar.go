package structured

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// A format JSON Schema defines is, where formats assert, enforced
// exactly as its RFC's grammar has it (formatPattern), or, where no
// grammar can hold it exactly, held to a grammar of its superset and
// tested as a whole value where the string ends (formatCheck): enforcing
// less would accept strings the format forbids, and enforcing a narrower
// subset would refuse valid strings the official suite's optional/format
// cases name. A format JSON Schema does not define (int32, a vendor's) is
// an annotation.

// checkedFormats are the formats tested as a whole value where the
// string ends (grammar.Checked), on top of their superset's grammar.
var checkedFormats = map[string]func(string) bool{
	"hostname":     validHostname,
	"idn-hostname": validIDNHostname,
	"regex":        validECMARegex,
}

// checkFormat refuses, where formats assert and unless checked (the
// value's own string schema, or a listed value), a format tested as a
// whole value, which genq does not fold into other automata (names,
// negations).
func (c *compiler) checkFormat(f *value, path string, checked bool) error {
	if f == nil || !c.formats {
		return nil
	}
	if f.kind != 's' {
		return genq.Errorf(genq.Invalid, "at %s: format must be a string", path)
	}
	if c.formatCheck(f.str) != nil && !checked {
		return genq.Errorf(genq.Invalid, "at %s: format %q is not supported in propertyNames, nor under not, if or "+
			"overlapping oneOf branches, which genq negates: it is tested as a whole value where a string ends, "+
			"which genq does on a value's own string schema alone", path, f.str)
	}
	return nil
}

// formatCheck is the test of a whole value that format asks for on top
// of its pattern in this compile's mode, or nil. A strict schema holds
// hostname and regex to subsets a grammar holds alone (strictHostname,
// regexFormatPattern), as OpenAI's structured outputs do.
func (c *compiler) formatCheck(format string) func(string) bool {
	if !c.formats || c.strict && (format == "hostname" || format == "regex") {
		return nil
	}
	return checkedFormats[format]
}

// Pieces of the formats' patterns (Go's syntax, matched against a
// string's decoded value; \d is ASCII's digits alone).
const (
	hexDigit  = `[0-9A-Fa-f]`
	decOctet  = `(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)` // no leading zero
	ipv4Pat   = `(` + decOctet + `\.){3}` + decOctet
	pctEnc    = `%` + hexDigit + hexDigit
	unreserv  = `A-Za-z0-9\-._~`
	subDelims = `!$&'()*+,;=`
	// ucschar and iprivate are RFC 3987's characters an IRI adds.
	ucschar = `\x{A0}-\x{D7FF}\x{F900}-\x{FDCF}\x{FDF0}-\x{FFEF}\x{10000}-\x{1FFFD}\x{20000}-\x{2FFFD}` +
		`\x{30000}-\x{3FFFD}\x{40000}-\x{4FFFD}\x{50000}-\x{5FFFD}\x{60000}-\x{6FFFD}\x{70000}-\x{7FFFD}` +
		`\x{80000}-\x{8FFFD}\x{90000}-\x{9FFFD}\x{A0000}-\x{AFFFD}\x{B0000}-\x{BFFFD}\x{C0000}-\x{CFFFD}` +
		`\x{D0000}-\x{DFFFD}\x{E1000}-\x{EFFFD}`
	iprivate = `\x{E000}-\x{F8FF}\x{F0000}-\x{FFFFD}\x{100000}-\x{10FFFD}`
	// jsonPointer is RFC 6901's: each token's ~ escaped as ~0 or ~1.
	jsonPointer = `(/([^~/]|~[01])*)*`
)

// formatPattern is formatPattern, with a strict schema's hostname and
// regex, written once per compile and mode: a large schema asks for the
// same formats hundreds of times, and writing a pattern builds long
// strings. The mode is in the key because one compile of tools holds
// strict and other tools alike.
func (c *compiler) formatPattern(format string) (string, bool) {
	key := formatKey{format, c.strict}
	if p, ok := c.formatPats[key]; ok {
		return p.pattern, p.known
	}
	p, known := c.writeFormatPattern(format)
	if c.formatPats == nil {
		c.formatPats = map[formatKey]formatPat{}
	}
	c.formatPats[key] = formatPat{p, known}
	return p, known
}

// formatKey names a format's pattern in a mode.
type formatKey struct {
	format string
	strict bool
}

// formatPat is a format's pattern, and whether genq knows the format.
type formatPat struct {
	pattern string
	known   bool
}

func (c *compiler) writeFormatPattern(format string) (string, bool) {
	switch {
	case format == "hostname" && c.strict:
		return "^(" + strictHostname() + ")$", true
	case format == "regex" && c.strict:
		return "^(" + regexFormatPattern() + ")$", true
	case format == "hostname":
		return "^(" + hostnameSuperset() + ")$", true
	case format == "idn-hostname":
		return "^(" + idnHostnameSuperset() + ")$", true
	case format == "regex":
		return "^(" + regexSuperset() + ")$", true
	}
	return formatPattern(format)
}

// hostnameSuperset is the letter-digit-hyphen labels of at most 63 a
// host name has, none with "--" in its third and fourth places but an
// A-label's xn-- (any case): validHostname tests the rest (Punycode,
// 253 in all).
func hostnameSuperset() string {
	const (
		ld  = `[A-Za-z0-9]`
		ldh = `[A-Za-z0-9-]`
	)
	long := ld + ldh + `(` + ld + ldh + `|-` + ld + `)` + ldh + `{0,58}` + ld
	ace := `[Xx][Nn]--` + ldh + `{0,58}` + ld
	label := ld + `(` + ldh + `{0,2}` + ld + `)?|` + long + `|` + ace
	return `(` + label + `)(\.(` + label + `))*`
}

// idnHostnameSuperset is labels parted by "." and idnFullStops, each an
// LDH label of either case, or a label of lowercase letters, digits,
// hyphens and the code points whose general category IDNA2008 may make
// PVALID (RFC 5892's LetterDigits) or that its exceptions and contexts
// allow, a combining mark not first: a model that writes an uppercase
// letter or a symbol into a U-label is kept out as it writes it, not
// left where no closing quote is allowed. validIDNHostname tests the
// rest (each code point's derivation, contexts, Bidi, lengths).
func idnHostnameSuperset() string {
	const (
		notMark = `\p{Ll}\p{Lo}\p{Lm}\p{Nd}\x{06FD}\x{06FE}\x{0F0B}\x{3007}\x{00B7}\x{0375}\x{05F3}\x{05F4}\x{30FB}\x{200C}\x{200D}`
		any     = notMark + `\p{Mn}\p{Mc}`
	)
	label := `[A-Za-z0-9-]+|[a-z0-9\-` + notMark + `][a-z0-9\-` + any + `]*`
	return `(` + label + `)([.` + idnFullStops + `](` + label + `))*`
}

// strictHostname is the hostname a strict schema holds to, as OpenAI's
// structured outputs assert hostname: RFC 1123's letter-digit-hyphen
// labels, none with "--" in its third and fourth places (so no A-label,
// xn--…, whose Punycode a grammar cannot check), at most six labels of at
// most 41 characters (within the 253 in all a hostname may have).
// Narrower than the format: JSON Schema's mode refuses it instead, since
// the official suite's valid A-labels would be refused.
func strictHostname() string {
	const (
		ld  = `[A-Za-z0-9]`
		ldh = `[A-Za-z0-9-]`
	)
	// A label of five or more: its third and fourth characters are not
	// both hyphens (in one of four the fourth is its last, no hyphen).
	long := ld + ldh + `(` + ld + ldh + `|-` + ld + `)` + ldh + `{0,36}` + ld
	label := ld + `(` + ldh + `{0,2}` + ld + `)?|` + long
	return `(` + label + `)(\.(` + label + `)){0,5}`
}

// formatPattern is the pattern of a format genq enforces, anchored; false
// for a format it does not (refusedFormats, or one JSON Schema does not
// define).
func formatPattern(format string) (string, bool) {
	var p string
	switch format {
	case "date":
		p = datePattern
	case "time":
		p = timePattern()
	case "date-time":
		p = `(` + datePattern + `)[Tt](` + timePattern() + `)`
	case "duration":
		p = durationPattern
	case "uuid":
		p = `[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`
	case "email":
		p = emailPattern(false)
	case "idn-email":
		p = emailPattern(true)
	case "ipv4":
		p = ipv4Pat
	case "ipv6":
		p = ipv6Pattern(7)
	case "uri":
		p = uriPattern(false, false)
	case "uri-reference":
		p = uriPattern(false, true)
	case "iri":
		p = uriPattern(true, false)
	case "iri-reference":
		p = uriPattern(true, true)
	case "json-pointer":
		p = jsonPointer
	case "relative-json-pointer": // a non-negative integer, then # or a JSON pointer
		p = `(0|[1-9]\d*)(#|` + jsonPointer + `)`
	case "uri-template":
		p = uriTemplatePattern()
	default:
		return "", false
	}
	return "^(" + p + ")$", true
}

// datePattern is RFC 3339's full-date: a month's days, 29 February in leap
// years alone (every fourth, but of the centuries every fourth).
const datePattern = `\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|02-(0[1-9]|1\d|2[0-8]))` +
	`|(\d\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29`

// timePattern is RFC 3339's full-time. A leap second (:60) is one only at
// 23:59 UTC: it is taken where the offset's minutes are a quarter hour's
// (every offset in use), each local hour and minute with the offsets that
// make it 23:59 UTC; a leap second at another offset is refused, a
// narrower rule than RFC 3339's, never a wider one.
func timePattern() string {
	const (
		hour   = `([01]\d|2[0-3])`
		frac   = `(\.\d+)?`
		offset = `([Zz]|[+-]` + hour + `:[0-5]\d)`
	)
	alts := []string{hour + `:[0-5]\d:[0-5]\d` + frac + offset}
	for h := 0; h < 24; h++ {
		// Local minute m at local hour h is 23:59 UTC at the offsets
		// +(h+1):00 and -(23-h):00 for :59, +h:(m+1) and -(23-h):(59-m)
		// for the others.
		for _, m := range []int{59, 44, 29, 14} {
			var offs []string
			if m == 59 {
				offs = append(offs, fmt.Sprintf(`\+%02d:00`, (h+1)%24), fmt.Sprintf(`-%02d:00`, 23-h))
				if h == 23 {
					offs = append(offs, `[Zz]`)
				}
			} else {
				offs = append(offs, fmt.Sprintf(`\+%02d:%02d`, h, m+1), fmt.Sprintf(`-%02d:%02d`, 23-h, 59-m))
			}
			alts = append(alts, fmt.Sprintf(`%02d:%02d:60`, h, m)+frac+`(`+strings.Join(offs, "|")+`)`)
		}
	}
	return strings.Join(alts, "|")
}

// durationPattern is RFC 3339's duration (appendix A): years, then months,
// then days, each only after the one before; hours, minutes, seconds
// likewise after T; or weeks alone.
const (
	durTime         = `T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)`
	durationPattern = `P((\d+Y(\d+M(\d+D)?)?|\d+M(\d+D)?|\d+D)(` + durTime + `)?|` + durTime + `|\d+W)`
)

// ipv6Pattern is RFC 3986's IPv6address, "::" standing for at least one
// group; maxWith is the most groups written beside "::" (RFC 5321's
// address literals write at most 6).
func ipv6Pattern(maxWith int) string {
	const h16 = hexDigit + `{1,4}`
	ls32 := `(` + h16 + `:` + h16 + `|` + ipv4Pat + `)`
	alts := []string{`(` + h16 + `:){6}` + ls32}
	// n groups after "::" (ls32 counts two), up to 7-n before it.
	for n := 7; n >= 0; n-- {
		var after string
		switch {
		case n >= 2:
			after = fmt.Sprintf(`(%s:){%d}%s`, h16, n-2, ls32)
		case n == 1:
			after = h16
		}
		before := 7 - n
		if before+n > maxWith {
			before = maxWith - n
		}
		if before < 0 {
			continue
		}
		pre := ""
		if before > 0 {
			pre = fmt.Sprintf(`((%s:){0,%d}%s)?`, h16, before-1, h16)
		}
		alts = append(alts, pre+`::`+after)
	}
	return strings.Join(alts, "|")
}

// emailPattern is RFC 5321's Mailbox: a dot-string or quoted local part,
// and a domain of letter-digit-hyphen labels or an IPv4 or IPv6 address
// literal; with idn, RFC 6531's, which takes UTF-8 beyond ASCII in its
// atoms, quoted strings and labels. Left out, as ajv's email, like many
// validators, refuses them and no valid case of the suite has them: a
// domain of one label (user@host), and the general address literal (a
// tag IANA registers).
func emailPattern(idn bool) string {
	atext := "A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-"
	qtext := `\x20\x21\x23-\x5B\x5D-\x7E`
	letDig := `A-Za-z0-9`
	if idn {
		// RFC 6531: UTF-8 beyond ASCII in atoms, quoted strings and
		// labels (U-labels; the suite takes one not in NFC).
		const utf8NonASCII = `\x{80}-\x{10FFFF}`
		atext += utf8NonASCII
		qtext += utf8NonASCII
		letDig += utf8NonASCII
	}
	atom := `[` + atext + `]+`
	quoted := `"([` + qtext + `]|\\[\x20-\x7E])*"`
	label := `[` + letDig + `]([` + letDig + `-]*[` + letDig + `])?`
	local := atom + `(\.` + atom + `)*|` + quoted
	domain := label + `(\.` + label + `)+|\[(` + ipv4Pat + `|IPv6:(` + ipv6Pattern(6) + `))\]`
	return `(` + local + `)@(` + domain + `)`
}

// uriPattern is RFC 3986's URI (RFC 3987's IRI where iri), or its
// reference (a relative one as well) where ref.
func uriPattern(iri, ref bool) string {
	unres := unreserv
	private := ""
	if iri {
		unres += ucschar
		private = iprivate
	}
	pchar := `([` + unres + subDelims + `:@]|` + pctEnc + `)`
	segment := pchar + `*`
	segNZ := pchar + `+`
	segNZNC := `([` + unres + subDelims + `@]|` + pctEnc + `)+`
	userinfo := `([` + unres + subDelims + `:]|` + pctEnc + `)*`
	regName := `([` + unres + subDelims + `]|` + pctEnc + `)*`
	ipFuture := `[vV]` + hexDigit + `+\.[` + unreserv + subDelims + `:]+`
	host := `\[(` + ipv6Pattern(7) + `|` + ipFuture + `)\]|` + ipv4Pat + `|` + regName
	authority := `(` + userinfo + `@)?(` + host + `)(:\d*)?`
	abempty := `(/` + segment + `)*`
	absolute := `/(` + segNZ + `(/` + segment + `)*)?`
	query := `(\?([` + unres + subDelims + `:@/?` + private + `]|` + pctEnc + `)*)?`
	fragment := `(#([` + unres + subDelims + `:@/?]|` + pctEnc + `)*)?`
	scheme := `[A-Za-z][A-Za-z0-9+\-.]*`
	// RFC 3986's hier-part may be empty ("about:"); ajv's uri, like many
	// validators, refuses that, and no valid case of the suite has it: a
	// URI here has an authority or a path.
	hier := `//` + authority + abempty + `|` + absolute + `|` + segNZ + `(/` + segment + `)*`
	uri := scheme + `:(` + hier + `)` + query + fragment
	if !ref {
		return uri
	}
	relative := `//` + authority + abempty + `|` + absolute + `|` + segNZNC + `(/` + segment + `)*|`
	return uri + `|(` + relative + `)` + query + fragment
}

// uriTemplatePattern is RFC 6570's URI template (level 4): literals, and
// expressions of an optional operator and comma-separated variables, each
// with a prefix length (1 to 9999) or the explode modifier. Like the
// official suite, a literal may hold an apostrophe (RFC 6570's erratum
// 6937).
func uriTemplatePattern() string {
	literal := `([\x21\x23\x24\x26-\x3B\x3D\x3F-\x5B\x5D\x5F\x61-\x7A\x7E` + ucschar + iprivate + `]|` + pctEnc + `)`
	varchar := `([A-Za-z0-9_]|` + pctEnc + `)`
	varname := varchar + `(\.?` + varchar + `)*`
	varspec := varname + `(:[1-9]\d{0,3}|\*)?`
	expression := `\{[+#./;?&=,!@|]?` + varspec + `(,` + varspec + `)*\}`
	return `(` + literal + `|` + expression + `)*`
}

// formatRegex is pattern for a format's own pattern, written by genq in
// Go's syntax: its escapes need no check against ECMAScript's, and Go's
// parser writes a class such as [Tt] as a case-folded letter.
func (c *compiler) formatRegex(p string) (grammar.Frag, error) {
	c.fold = true
	defer func() { c.fold = false }()
	return c.goPattern(p)
}

// foldRanges are r and the runes that fold to it, as rune ranges.
func foldRanges(r rune) []rune {
	out := []rune{r, r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = append(out, f, f)
	}
	return out
}
