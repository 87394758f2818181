package tokenizer

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// precompiled is SentencePiece's compiled normalization map (the
// precompiled_charsmap of spiece.model and of tokenizer.json's Precompiled
// normalizer; T5's is nmt_nfkc: NFKC, control characters removed, odd
// spaces made plain). It is a darts-clone double-array trie from byte
// strings to offsets in a blob of NUL-terminated replacements.
type precompiled struct {
	units      []uint32
	normalized []byte
}

func parsePrecompiled(b []byte) (*precompiled, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("precompiled charsmap: %d bytes, too short", len(b))
	}
	size := binary.LittleEndian.Uint32(b)
	if size%4 != 0 || uint64(size) > uint64(len(b)-4) || size == 0 {
		return nil, fmt.Errorf("precompiled charsmap: trie of %d bytes in %d", size, len(b)-4)
	}
	units := make([]uint32, size/4)
	for i := range units {
		units[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	return &precompiled{units: units, normalized: b[4+size:]}, nil
}

// firstPrefix returns the replacement of the shortest prefix of key that the
// trie holds. Like Hugging Face's normalizer (spm_precompiled), the whole
// key is then replaced by it, even when the prefix is shorter.
func (p *precompiled) firstPrefix(key string) (string, bool) {
	unit := func(i uint32) (uint32, bool) {
		if int(i) >= len(p.units) {
			return 0, false
		}
		return p.units[i], true
	}
	offset := func(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
	u, ok := unit(0)
	if !ok {
		return "", false
	}
	pos := offset(u)
	for i := 0; i < len(key); i++ {
		c := uint32(key[i])
		if c == 0 {
			break
		}
		pos ^= c
		if u, ok = unit(pos); !ok || u&((1<<31)|0xff) != c {
			return "", false
		}
		pos ^= offset(u)
		if (u>>8)&1 == 1 {
			leaf, ok := unit(pos)
			if !ok {
				return "", false
			}
			start := int(leaf & (1<<31 - 1))
			if start > len(p.normalized) {
				return "", false
			}
			end := start
			for end < len(p.normalized) && p.normalized[end] != 0 {
				end++
			}
			return string(p.normalized[start:end]), true
		}
	}
	return "", false
}

// normalize applies the map as Hugging Face's Precompiled normalizer does:
// a grapheme cluster shorter than 6 bytes is looked up whole; otherwise, or
// when it has no entry, each character is looked up on its own.
func (p *precompiled) normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for s != "" {
		n := graphemeLen(s)
		g := s[:n]
		s = s[n:]
		if len(g) < 6 {
			if r, ok := p.firstPrefix(g); ok {
				b.WriteString(r)
				continue
			}
		}
		for _, c := range g {
			part := string(c)
			if r, ok := p.firstPrefix(part); ok {
				part = r
			}
			b.WriteString(part)
		}
	}
	return b.String()
}

// graphemeLen is the length in bytes of the extended grapheme cluster that
// starts s (Unicode's UAX #29), for what the normalizer needs: a cluster
// counts only when it is shorter than 6 bytes, and a cluster of 6 or more
// is looked up character by character, just as single characters are. So
// the rules that only ever join clusters of 6 bytes or more (Hangul jamo
// sequences, regional-indicator pairs) are left out; the others are here:
// CR LF, a base followed by extending marks, ZWJ and spacing marks, a
// prepended mark followed by its base, and emoji joined by ZWJ.
func graphemeLen(s string) int {
	first, n := utf8.DecodeRuneInString(s)
	if first == '\r' {
		if len(s) > 1 && s[1] == '\n' {
			return 2
		}
		return 1
	}
	if isControl(first) {
		return n
	}
	prev, pictBeforeZWJ := first, isPictographic(first)
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		switch {
		case isPrepend(prev) && !isControl(r) && r != '\r' && r != '\n':
		case isExtend(r) || r == zwj || isSpacingMark(r):
		case prev == zwj && pictBeforeZWJ && isPictographic(r):
		default:
			return n
		}
		if isPictographic(r) {
			pictBeforeZWJ = true
		} else if !isExtend(r) && r != zwj {
			pictBeforeZWJ = false
		}
		prev = r
		n += size
	}
	return n
}

const zwj = '\u200d'

func isControl(r rune) bool {
	switch {
	case r == '\r' || r == '\n':
		return true
	case r == '\u200c' || r == zwj || isPrepend(r):
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Zl, unicode.Zp, unicode.Cf)
}

func isExtend(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Other_Grapheme_Extend) ||
		r >= 0x1f3fb && r <= 0x1f3ff // emoji skin-tone modifiers
}

func isSpacingMark(r rune) bool {
	if r == 0x0e33 || r == 0x0eb3 { // Thai and Lao AM
		return true
	}
	if !unicode.Is(unicode.Mc, r) || isExtend(r) {
		return false
	}
	// Spacing marks that UAX #29 does not count as SpacingMark.
	switch {
	case r == 0x102b || r == 0x102c || r == 0x1038 || r == 0x1083 || r == 0x108f,
		r >= 0x1062 && r <= 0x1064, r >= 0x1067 && r <= 0x106d, r >= 0x1087 && r <= 0x108c,
		r >= 0x109a && r <= 0x109c, r == 0x1a61 || r == 0x1a63 || r == 0x1a64,
		r == 0xaa7b || r == 0xaa7d || r == 0x11720 || r == 0x11721:
		return false
	}
	return true
}

func isPrepend(r rune) bool {
	switch {
	case r >= 0x0600 && r <= 0x0605, r == 0x06dd, r == 0x070f, r == 0x0890 || r == 0x0891, r == 0x08e2,
		r == 0x0d4e, r == 0x110bd, r == 0x110cd, r == 0x111c2 || r == 0x111c3, r == 0x1193f, r == 0x11941,
		r == 0x11a3a, r >= 0x11a84 && r <= 0x11a89, r == 0x11d46, r == 0x11f02:
		return true
	}
	return false
}

// isPictographic approximates Extended_Pictographic, which Go's unicode
// package lacks: the emoji blocks and the older symbols emoji use.
func isPictographic(r rune) bool {
	switch {
	case r == 0xa9 || r == 0xae || r == 0x203c || r == 0x2049 || r == 0x2122 || r == 0x2139,
		r >= 0x2194 && r <= 0x21ff, r >= 0x2300 && r <= 0x23ff, r >= 0x25a0 && r <= 0x27bf,
		r >= 0x2900 && r <= 0x2bff, r == 0x3030 || r == 0x303d || r == 0x3297 || r == 0x3299:
		return true
	case r >= 0x1f1e6 && r <= 0x1f1ff, r >= 0x1f3fb && r <= 0x1f3ff: // regional indicators, skin tones
		return false
	case r >= 0x1f000 && r <= 0x1faff, r >= 0x1fc00 && r <= 0x1fffd:
		return true
	}
	return false
}
