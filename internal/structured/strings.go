package structured

// A string schema's rule: its lengths, pattern and format, the shared
// rules whose masks a vocabulary keeps.

import (
	"fmt"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

func (c *compiler) str(s *value, path string) (grammar.Frag, error) {
	b := c.b
	keys, parts, err := c.stringParts(s, path)
	if err != nil {
		return grammar.Frag{}, err
	}
	if s.get(keyPatterns) != nil || s.get(keyNotPatterns) != nil {
		return c.patternString(s, keys, parts, path)
	}
	switch len(parts) {
	case 0:
		return b.Call(c.bi.str), nil
	case 1:
		return c.sharedString(keys[0], parts[0])
	}
	f, err := c.sharedString(strings.Join(keys, " and "), func() (grammar.Frag, error) { return c.intersect(parts) })
	if err != nil {
		return grammar.Frag{}, genq.WrapError(genq.ErrorCode(err), err, "at "+path+": "+genq.ErrorMessage(err))
	}
	return f, nil
}

// stringParts are the automata of whole JSON strings a string schema's
// keywords make (pattern, format, lengths), each built in c.b when called,
// and the keys that name them.
func (c *compiler) stringParts(s *value, path string) ([]string, []func() (grammar.Frag, error), error) {
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
		if err := c.checkFormat(format, path); err != nil {
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
	if err := countsAlone(s, min, max, len(parts), path); err != nil {
		return nil, nil, err
	}
	return keys, parts, nil
}

// sharedString compiles a string with bounds or a pattern into a rule of
// its own, named by key, built once per grammar. Its nodes are numbered
// contiguously and the rule calls nothing, so the same key builds the same
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
