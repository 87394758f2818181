package structured

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/cases"
	"golang.org/x/text/secure/bidirule"
	"golang.org/x/text/unicode/bidi"
	"golang.org/x/text/unicode/norm"
)

// The formats hostname and idn-hostname, as the official suite's
// optional/format reads them: RFC 1123's labels, and IDNA2008's (RFC 5890
// to 5893) for A-labels (xn--…) and U-labels. An A-label's validity rests
// on its Punycode, which no automaton decodes, so these are tests of a
// whole value (formatCheck), made on top of an automaton of their
// superset (hostnameSuperset, idnHostnameSuperset).
//
// Where IDNA2008 needs Unicode's data, the Go toolchain's tables are read
// (unicode, golang.org/x/text): a code point they do not know is
// unassigned, so refused, never taken on a guess.

// validHostname is the format hostname: ASCII labels of letters, digits
// and hyphens, 1 to 63 long, 253 in all; a label with "--" in its third
// and fourth places must be an A-label.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	uLabels := make([]string, 0, len(labels))
	for _, l := range labels {
		u, ok := ldhLabel(l)
		if !ok {
			return false
		}
		uLabels = append(uLabels, u)
	}
	return bidiDomain(uLabels)
}

// idnFullStops are the full stops IDNA reads as "." between labels
// beside it (RFC 3490 §3.1): ideographic, fullwidth and halfwidth.
const idnFullStops = "\u3002\uff0e\uff61"

// validIDNHostname is the format idn-hostname: labels parted by a full
// stop (or idnFullStops), each an LDH label, an A-label or a U-label, 253
// octets in all in ASCII form.
func validIDNHostname(s string) bool {
	// strings.Map returns s itself when no rune changes: this runs for
	// each token a mask tries at a string's end.
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune(idnFullStops, r) {
			return '.'
		}
		return r
	}, s)
	if s == "" {
		return false
	}
	labels := strings.Split(s, ".")
	uLabels := make([]string, 0, len(labels))
	total := len(labels) - 1
	for _, l := range labels {
		if isASCII(l) {
			u, ok := ldhLabel(l)
			if !ok {
				return false
			}
			uLabels = append(uLabels, u)
			total += len(l)
			continue
		}
		a, ok := uLabel(l)
		if !ok {
			return false
		}
		uLabels = append(uLabels, l)
		total += len(a)
	}
	return total <= 253 && bidiDomain(uLabels)
}

// ldhLabel checks an ASCII label: letters, digits and hyphens, 1 to 63,
// no hyphen first or last, and, with "--" in its third and fourth
// places, an A-label. It returns the label's Unicode form.
func ldhLabel(l string) (string, bool) {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return "", false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return "", false
		}
	}
	if len(l) < 4 || l[2:4] != "--" {
		return l, true
	}
	if !strings.EqualFold(l[:4], "xn--") {
		return "", false // a reserved label, not an A-label
	}
	return aLabel(l)
}

// aLabel decodes A-label l (xn--…), which must be Punycode that encodes
// back to itself, of a valid U-label that is not all ASCII.
func aLabel(l string) (string, bool) {
	ace := "xn--" + l[4:]
	u, err := idna.Punycode.ToUnicode(ace)
	if err != nil || u == ace || isASCII(u) {
		return "", false
	}
	back, err := idna.Punycode.ToASCII(u)
	if err != nil || !strings.EqualFold(back, ace) {
		return "", false
	}
	if _, ok := uLabel(u); !ok {
		return "", false
	}
	return u, true
}

// joiners checks RFC 5892's CONTEXTJ rules (ZERO WIDTH JOINER and
// NON-JOINER), whose joining types Go's unicode tables lack, and that no
// label begins with a combining mark.
var joiners = idna.New(idna.CheckJoiners(true))

// uLabel checks a U-label by IDNA2008 (RFC 5891 §5.4): NFC, hyphens,
// no leading combining mark, each code point PVALID or allowed by its
// context, and an A-label form of at most 63 octets, which it returns.
func uLabel(u string) (string, bool) {
	if u == "" || !utf8.ValidString(u) || !norm.NFC.IsNormalString(u) {
		return "", false
	}
	rs := []rune(u)
	if rs[0] == '-' || rs[len(rs)-1] == '-' || len(rs) >= 4 && rs[2] == '-' && rs[3] == '-' {
		return "", false
	}
	if unicode.Is(unicode.M, rs[0]) {
		return "", false
	}
	join := false
	for i, r := range rs {
		switch idnaProperty(r) {
		case pvalid:
		case contextJ:
			join = true
		case contextO:
			if !contextOHolds(rs, i) {
				return "", false
			}
		default:
			return "", false
		}
	}
	if join {
		if _, err := joiners.ToUnicode(u); err != nil {
			return "", false
		}
	}
	a, err := idna.Punycode.ToASCII(u)
	if err != nil || len(a) > 63 {
		return "", false
	}
	return a, true
}

// bidiDomain applies RFC 5893: in a domain name with a right-to-left
// label, every label must satisfy the Bidi Rule.
func bidiDomain(labels []string) bool {
	rtl := false
	for _, l := range labels {
		if bidirule.DirectionString(l) != bidi.LeftToRight {
			rtl = true
			break
		}
	}
	if !rtl {
		return true
	}
	for _, l := range labels {
		if !bidirule.ValidString(l) {
			return false
		}
	}
	return true
}

// idnaClass is a code point's derived property in IDNA2008 (RFC 5892).
type idnaClass uint8

const (
	disallowed idnaClass = iota
	pvalid
	contextJ
	contextO
)

// idnaProperty derives r's property by RFC 5892 §3's rules, in order.
func idnaProperty(r rune) idnaClass {
	switch r { // F: Exceptions
	case 0x00DF, 0x03C2, 0x06FD, 0x06FE, 0x0F0B, 0x3007:
		return pvalid
	case 0x00B7, 0x0375, 0x05F3, 0x05F4, 0x30FB:
		return contextO
	case 0x0640, 0x07FA, 0x302E, 0x302F, 0x3031, 0x3032, 0x3033, 0x3034, 0x3035, 0x303B:
		return disallowed
	}
	if r >= 0x0660 && r <= 0x0669 || r >= 0x06F0 && r <= 0x06F9 {
		return contextO
	}
	if !assigned(r) { // J: Unassigned
		return disallowed
	}
	if r < 0x80 { // K: LDH
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return pvalid
		}
		return disallowed
	}
	if r == 0x200C || r == 0x200D { // H: JoinControl
		return contextJ
	}
	if unstable(r) || ignorable(r) || oldHangulJamo(r) { // B, C, D, I
		return disallowed
	}
	if unicode.In(r, unicode.Ll, unicode.Lu, unicode.Lo, unicode.Nd, unicode.Lm, unicode.Mn, unicode.Mc) { // A
		return pvalid
	}
	return disallowed
}

// assigned says Go's tables give r a general category.
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
		unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// unstable is RFC 5892's Unstable: r changes under NFKC, case folding
// and NFKC again.
func unstable(r rune) bool {
	s := string(r)
	return norm.NFKC.String(cases.Fold().String(norm.NFKC.String(s))) != s
}

// ignorable is RFC 5892's IgnorableProperties and IgnorableBlocks.
func ignorable(r rune) bool {
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector,
		unicode.White_Space, unicode.Noncharacter_Code_Point, unicode.Cf) ||
		r >= 0x20D0 && r <= 0x20FF || r >= 0x1D100 && r <= 0x1D24F
}

// oldHangulJamo is RFC 5892's OldHangulJamo: the conjoining jamo (the
// blocks that hold Hangul_Syllable_Type L, V and T alone).
func oldHangulJamo(r rune) bool {
	return r >= 0x1100 && r <= 0x11FF || r >= 0xA960 && r <= 0xA97F || r >= 0xD7B0 && r <= 0xD7FF
}

// contextOHolds applies RFC 5892 Appendix A's CONTEXTO rule of rs[i].
func contextOHolds(rs []rune, i int) bool {
	r := rs[i]
	switch {
	case r == 0x00B7: // MIDDLE DOT: between two l's
		return i > 0 && rs[i-1] == 'l' && i+1 < len(rs) && rs[i+1] == 'l'
	case r == 0x0375: // GREEK KERAIA: before Greek
		return i+1 < len(rs) && unicode.Is(unicode.Greek, rs[i+1])
	case r == 0x05F3 || r == 0x05F4: // HEBREW GERESH, GERSHAYIM: after Hebrew
		return i > 0 && unicode.Is(unicode.Hebrew, rs[i-1])
	case r == 0x30FB: // KATAKANA MIDDLE DOT: with Hiragana, Katakana or Han
		for _, o := range rs {
			if o != 0x30FB && unicode.In(o, unicode.Hiragana, unicode.Katakana, unicode.Han) {
				return true
			}
		}
		return false
	case r >= 0x0660 && r <= 0x0669: // ARABIC-INDIC DIGITS: not with extended ones
		return !hasRuneIn(rs, 0x06F0, 0x06F9)
	default: // EXTENDED ARABIC-INDIC DIGITS: not with Arabic-Indic ones
		return !hasRuneIn(rs, 0x0660, 0x0669)
	}
}

func hasRuneIn(rs []rune, lo, hi rune) bool {
	for _, r := range rs {
		if r >= lo && r <= hi {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
