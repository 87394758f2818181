package structured

// A string schema's rule: its lengths, pattern and format, the shared
// rules whose masks a vocabulary keeps.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

func (c *compiler) str(s *value, path string) (grammar.Frag, error) {
	f, err := c.strAutomaton(s, path)
	if err != nil {
		return f, err
	}
	if format := s.get("format"); format != nil && format.kind == 's' {
		if ok := c.formatCheck(format.str); ok != nil {
			f = c.b.Checked(f, format.str, func(lit []byte) bool {
				v, valid := decodeJSONString(lit)
				return valid && ok(v)
			})
		}
	}
	return f, nil
}

// strAutomaton is a string schema's rule, its format tested by its
// superset's automaton alone.
func (c *compiler) strAutomaton(s *value, path string) (grammar.Frag, error) {
	b := c.b
	patterns := s.get(keyPatterns) != nil || s.get(keyNotPatterns) != nil
	// Beside patterns a length is counted where patternString builds them.
	keys, parts, err := c.stringParts(s, path, true)
	if err != nil {
		return grammar.Frag{}, err
	}
	if patterns {
		return c.patternString(s, keys, parts, path)
	}
	switch len(parts) {
	case 0:
		return b.Call(c.bi.str), nil
	case 1:
		return c.sharedString(keys[0], parts[0])
	}
	build := func() (grammar.Frag, error) { return c.intersect(parts) }
	if min, max, _ := boundsUpTo(s, "minLength", "maxLength", path, maxCount); min > 0 || max >= 0 {
		// The length part is last: the others' automaton is counted.
		build = func() (grammar.Frag, error) { return c.lengthString(parts, min, max, path) }
	}
	f, err := c.sharedString(strings.Join(keys, " and "), build)
	if err != nil {
		return grammar.Frag{}, genq.WrapError(genq.ErrorCode(err), err, "at "+path+": "+genq.ErrorMessage(err))
	}
	return f, nil
}

// stringParts are the automata of whole JSON strings a string schema's
// keywords make (pattern, format, lengths; the lengths last), each built
// in c.b when called, and the keys that name them. checked says the
// caller tests a format's whole value where one asks (formatCheck).
func (c *compiler) stringParts(s *value, path string, checked bool) ([]string, []func() (grammar.Frag, error), error) {
	min, max, err := boundsUpTo(s, "minLength", "maxLength", path, maxCount)
	if err != nil {
		return nil, nil, err
	}
	// Each constraint is an automaton of whole JSON strings; more than one
	// is their product.
	var keys []string
	var parts []func() (grammar.Frag, error)
	if pat := s.get("pattern"); pat != nil {
		if pat.kind != 's' {
			return nil, nil, genq.Errorf(genq.Invalid, "at %s: pattern must be a string", path)
		}
		keys = append(keys, "pattern "+pat.str)
		parts = append(parts, func() (grammar.Frag, error) {
			f, err := c.pattern(pat.str)
			if err != nil {
				return grammar.Frag{}, genq.WrapError(genq.Invalid, err, "at "+path+": "+genq.ErrorMessage(err))
			}
			return f, nil
		})
	}
	// A format genq knows is enforced, as OpenAI's structured outputs do,
	// unless the schema's meta-schema makes it an annotation (c.formats);
	// one it does not know is an annotation, as the spec says.
	if format := s.get("format"); format != nil {
		if format.kind != 's' {
			return nil, nil, genq.Errorf(genq.Invalid, "at %s: format must be a string", path)
		}
		if err := c.checkFormat(format, path, checked); err != nil {
			return nil, nil, err
		}
		if p, ok := c.formatPattern(format.str); ok && c.formats {
			keys = append(keys, "pattern "+p)
			parts = append(parts, func() (grammar.Frag, error) { return c.formatRegex(p) })
		}
	}
	if min > 0 || max >= 0 {
		keys = append(keys, fmt.Sprintf("length %d %d", min, max))
		parts = append(parts, func() (grammar.Frag, error) {
			b := c.b // the builder of the moment: a product builds each part alone
			return b.Seq(b.Lit(`"`), b.Counted(min, max, c.char), b.Lit(`"`)), nil
		})
	}
	return keys, parts, nil
}

// sharedString compiles a string with bounds or a pattern into a rule of
// its own, named by key, built once per grammar. Its nodes are numbered
// contiguously and the rule calls no rule but among them (a counted
// repeat's copy, a length region's body), so the same key builds the same
// nodes in every grammar: their masks, which cost a walk of nearly the
// whole vocabulary each, are kept per Vocab under the key and shared by
// every grammar that holds the rule.
func (c *compiler) sharedString(key string, build func() (grammar.Frag, error)) (grammar.Frag, error) {
	if r, ok := c.shared[key]; ok {
		return c.b.Call(r), nil
	}
	first := int32(len(c.b.Grammar.Nodes))
	r := c.b.NewRule(key)
	f, err := build()
	if err != nil {
		return grammar.Frag{}, err
	}
	c.b.Define(r, f)
	if c.b.Err != nil {
		return grammar.Frag{}, c.b.Err
	}
	c.shared[key] = r
	c.b.Grammar.SharedRules = append(c.b.Grammar.SharedRules, grammar.SharedRange{Key: key, First: first, End: int32(len(c.b.Grammar.Nodes))})
	return c.b.Call(r), nil
}

// lengthString is a string held to parts, the last its length bounds:
// the others' automaton once, its characters counted in a length region
// (grammar.LengthRegion), not multiplied by a counter. Where the region
// cannot count exactly, it is the product of all parts, as before.
func (c *compiler) lengthString(parts []func() (grammar.Frag, error), min, max int, path string) (grammar.Frag, error) {
	others := parts[:len(parts)-1]
	body := func() (grammar.Frag, error) {
		if len(others) == 1 {
			return others[0]()
		}
		return c.intersect(others)
	}
	return c.regionOr(body, func() (grammar.Frag, error) { return c.intersect(parts) }, min, max, path)
}

// lengthProduct is lengthString for strings that match every part of
// accept and none of reject (patternString's product), with length the
// automaton of their length bounds: the product counted in a length
// region, or, where the region cannot count exactly, multiplied by the
// length's automaton (a bound up to MaxRepeat).
func (c *compiler) lengthProduct(accept, reject []func() (grammar.Frag, error), length func() (grammar.Frag, error), min, max int, path string) (grammar.Frag, error) {
	return c.regionOr(func() (grammar.Frag, error) { return c.product(accept, reject) },
		func() (grammar.Frag, error) { return c.product(append(slices.Clip(accept), length), reject) }, min, max, path)
}

// regionOr is body's automaton with its characters counted in a length
// region of min to max, or, where the region cannot count exactly, whole
// (body multiplied by the length's automaton); a bound past MaxRepeat is
// refused there, as the product would unroll it.
func (c *compiler) regionOr(body, whole func() (grammar.Frag, error), min, max int, path string) (grammar.Frag, error) {
	g, f, boundary, err := c.countedBody(body)
	if err != nil {
		return grammar.Frag{}, err
	}
	if f, ok := c.b.LengthRegion(min, max, g, f, boundary); ok {
		return f, nil
	}
	// The length is one of at least two parts: the body's and its own.
	if err := countsAlone(min, max, 2, path); err != nil {
		return grammar.Frag{}, err
	}
	return whole()
}

// countedBody builds, alone, the automaton build makes, paired with a
// JSON string's characters (trackChars), and marks its nodes between two
// characters (boundary): there each byte but the closing quote begins a
// character.
func (c *compiler) countedBody(build func() (grammar.Frag, error)) (*grammar.Grammar, grammar.Frag, []bool, error) {
	main := c.b
	defer func() { c.b = main }()
	c.b = &grammar.Builder{Grammar: &grammar.Grammar{}}
	f, err := build()
	if err == nil {
		err = c.b.Err
	}
	if err != nil {
		return nil, grammar.Frag{}, nil, err
	}
	return trackChars(c.b.Grammar.Nodes, f)
}

// decodeJSONString is the value of lit, a JSON string with its quotes.
func decodeJSONString(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1]), true
	}
	var v string
	if err := json.Unmarshal(lit, &v); err != nil {
		return "", false
	}
	return v, true
}
