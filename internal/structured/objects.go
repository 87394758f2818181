package structured

// An object schema's rule: its listed properties, required or not, and
// the members they leave room for (additionalProperties, patterns).

import (
	"bytes"
	"slices"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

func (c *compiler) object(s *value, path string) (grammar.Frag, error) {
	b := c.b
	props := s.get("properties")
	if props != nil && props.kind != 'o' {
		return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: properties must be an object", path)
	}
	required := map[string]bool{}
	addl := s.get("additionalProperties")
	names, err := c.propertyNames(s, path)
	if err != nil {
		return grammar.Frag{}, err
	}
	// A name the object must be able to write that properties does not
	// list (a required one, or one dependentRequired names) is listed
	// last, its value what an other property's would be: the patterns'
	// schemas its name matches, or additionalProperties' (none in a closed
	// object).
	addUnlisted := func(name string) error {
		if props != nil && props.get(name) != nil {
			return nil
		}
		schema := &value{kind: 'b', b: true}
		switch ps := c.patternSchemas(s, name); {
		case len(ps) > 0:
			for _, p := range ps {
				var err error
				if schema, err = merge(schema, p, path+"/required"); err != nil {
					return err
				}
			}
		case addl != nil:
			schema = addl
		case c.closed:
			schema = &value{kind: 'b'}
		}
		if props == nil {
			props = &value{kind: 'o'}
		} else {
			props = &value{kind: 'o', obj: slices.Clone(props.obj)}
		}
		props.obj = append(props.obj, member{name, schema})
		return nil
	}
	if r := s.get("required"); r != nil {
		if r.kind != 'a' {
			return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: required must be an array of names", path)
		}
		for _, n := range r.arr {
			if n.kind != 's' {
				return grammar.Frag{}, genq.Errorf(genq.Invalid, "at %s: required must be an array of names", path)
			}
			required[n.str] = true
			if err := addUnlisted(n.str); err != nil {
				return grammar.Frag{}, err
			}
		}
	}
	deps, err := dependentRequired(s, path)
	if err != nil {
		return grammar.Frag{}, err
	}
	deps, implied := resolveDependencies(deps, required)
	for _, n := range implied { // required by a required property's dependencies
		if err := addUnlisted(n); err != nil {
			return grammar.Frag{}, err
		}
	}
	// The names a dependency requires first, then those that require
	// them, as the instances are written most often.
	for _, target := range []bool{true, false} {
		for _, d := range deps {
			n := d.a
			if target {
				n = d.b
			}
			if err := addUnlisted(n); err != nil {
				return grammar.Frag{}, err
			}
		}
	}
	// Names no property lists, and no pattern matches, take
	// additionalProperties: any value where it is left out or true, unless
	// objects are closed.
	var unmatched *value
	switch {
	case addl != nil && addl.kind == 'o':
		unmatched = addl
	case (addl == nil || addl.kind == 'b' && addl.b) && !c.closed:
		unmatched = &value{kind: 'b', b: true}
	}
	patterns, err := c.patternMembers(s, props, path, names, unmatched)
	if err != nil {
		return grammar.Frag{}, err
	}
	minP, maxP, err := bounds(s, "minProperties", "maxProperties", path)
	if err != nil {
		return grammar.Frag{}, err
	}
	counted := minP > 0 || maxP >= 0
	if (props == nil || len(props.obj) == 0) && patterns == nil && names == nil && !counted {
		// Without properties the object is a map: its values follow
		// additionalProperties, or are any value.
		switch {
		case addl != nil && addl.kind == 'b' && !addl.b:
			return b.Seq(b.Lit("{"), c.ws(), b.Lit("}")), nil
		case addl != nil && addl.kind == 'o':
			r, err := c.ruleOf(addl, path+"/additionalProperties")
			if err != nil {
				return grammar.Frag{}, err
			}
			return c.mapObject(func() grammar.Frag { return b.Call(r) }), nil
		}
		return b.Call(c.bi.object), nil
	}
	if props == nil {
		props = &value{kind: 'o'}
	}
	ch := newMemberChain(c, minP, maxP)
	anyOrder := !c.strict && len(props.obj) > 1 && len(props.obj) <= maxAnyOrder
	var presence []presence
	if !anyOrder {
		if presence, err = presenceRules(deps, props, path); err != nil {
			return grammar.Frag{}, err
		}
	}
	// Properties come in any order (anyOrder) or in the schema's; required
	// ones always, optional ones may be left out.
	var rules []int32
	for i, m := range props.obj {
		var buf bytes.Buffer
		writeString(&buf, m.key)
		p := path + "/properties/" + m.key
		schema := m.val
		if !names.allowName(m.key) {
			schema = &value{kind: 'b'} // a name propertyNames refuses: never written
		}
		for _, pm := range c.patternSchemas(s, m.key) {
			if schema, err = merge(schema, pm, p); err != nil {
				return grammar.Frag{}, err
			}
		}
		v, err := c.compile(schema, p)
		if err != nil {
			return grammar.Frag{}, err
		}
		r := b.NewRule(p + " member")
		b.Define(r, b.Seq(b.Lit(buf.String()), c.ws(), b.Lit(":"), c.ws(), v))
		if anyOrder {
			rules = append(rules, r)
			continue
		}
		if err := ch.member(r, !required[m.key], presence[i]); err != nil {
			return grammar.Frag{}, genq.WrapError(genq.ErrorCode(err), err, "at "+path+": "+genq.ErrorMessage(err))
		}
	}
	if anyOrder {
		ch.anyOrder(rules, closable(props, required, deps))
	}
	// Other properties, after the listed ones: with patternProperties,
	// told apart by the patterns their names match (patternMembers); else
	// their values follow unmatched. At most MaxOtherProperties, or
	// maxProperties' own bound where it is larger.
	var other func() grammar.Frag
	switch {
	case patterns != nil:
		other = patterns
	case unmatched != nil:
		r := c.bi.value
		if unmatched.kind == 'o' {
			if r, err = c.ruleOf(unmatched, path+"/additionalProperties"); err != nil {
				return grammar.Frag{}, err
			}
		}
		key, err := c.otherKey(props, path, names)
		if err != nil {
			return grammar.Frag{}, err
		}
		other = func() grammar.Frag { return b.Seq(b.Call(key), c.ws(), b.Lit(":"), c.ws(), b.Call(r)) }
	}
	if other != nil {
		r := b.NewRule(path + " other member")
		b.Define(r, other())
		ch.others(r, max(MaxOtherProperties, maxP, minP-len(props.obj)))
	}
	return ch.close(), b.Err
}
