package structured

import (
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// canonicalString is a pattern of every string, matched as the pattern
// automaton writes characters: each one way (UTF-8, the short escapes,
// \u00XX for other controls). A string that must not match a pattern is
// held to it: the pattern's automaton knows only that spelling, and a
// value spelled otherwise (\u0061 for a) would slip past the refusal.
const canonicalString = `(?s)^.*$`

// patternString is a string that matches every pattern of keyPatterns and
// none of keyNotPatterns, besides the parts stringParts made of s's other
// keywords (keys name them): the product of their automata, built once
// per grammar under the keys together.
func (c *compiler) patternString(s *value, keys []string, parts []func() (grammar.Frag, error), path string) (grammar.Frag, error) {
	list := func(k string) ([]string, error) {
		v := s.get(k)
		if v == nil {
			return nil, nil
		}
		var out []string
		for _, p := range v.arr {
			if p.kind != 's' {
				return nil, genq.Errorf(genq.Invalid, "at %s: pattern must be a string", path)
			}
			out = append(out, p.str)
		}
		return out, nil
	}
	must, err := list(keyPatterns)
	if err != nil {
		return grammar.Frag{}, err
	}
	mustNot, err := list(keyNotPatterns)
	if err != nil {
		return grammar.Frag{}, err
	}
	// stringParts puts the length bounds' part last: beside patterns it is
	// counted in a length region around their product (lengthProduct).
	min, max, err := boundsUpTo(s, "minLength", "maxLength", path, maxCount)
	if err != nil {
		return grammar.Frag{}, err
	}
	var length func() (grammar.Frag, error)
	if min > 0 || max >= 0 {
		length, parts = parts[len(parts)-1], parts[:len(parts)-1]
	}
	part := func(p string) func() (grammar.Frag, error) {
		return func() (grammar.Frag, error) { return c.pattern(p) }
	}
	for _, p := range must {
		keys, parts = append(keys, "pattern "+p), append(parts, part(p))
	}
	if len(mustNot) > 0 {
		keys, parts = append(keys, "pattern "+canonicalString), append(parts, part(canonicalString))
	}
	var rejects []func() (grammar.Frag, error)
	for _, p := range mustNot {
		keys, rejects = append(keys, "not pattern "+p), append(rejects, part(p))
	}
	if length == nil && len(parts) == 1 && len(rejects) == 0 {
		return c.sharedString(keys[0], parts[0])
	}
	build := func() (grammar.Frag, error) { return c.product(parts, rejects) }
	if length != nil {
		build = func() (grammar.Frag, error) { return c.lengthProduct(parts, rejects, length, min, max, path) }
	}
	f, err := c.sharedString(strings.Join(keys, " and "), build)
	if err != nil {
		return grammar.Frag{}, genq.WrapError(genq.ErrorCode(err), err, "at "+path+": "+genq.ErrorMessage(err))
	}
	return f, nil
}

// patternsHold tells whether str, a listed value, matches every pattern
// of s's keyPatterns and none of its keyNotPatterns.
func (c *compiler) patternsHold(s *value, str, path string) (bool, error) {
	for _, k := range []string{keyPatterns, keyNotPatterns} {
		v := s.get(k)
		if v == nil {
			continue
		}
		for _, p := range v.arr {
			re := c.regexp(p.str)
			if p.kind != 's' || re == nil {
				return false, genq.Errorf(genq.Invalid, "at %s: pattern %q is not a supported regular expression", path, p.str)
			}
			if re.MatchString(str) != (k == keyPatterns) {
				return false, nil
			}
		}
	}
	return true, nil
}
