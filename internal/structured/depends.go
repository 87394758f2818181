package structured

import (
	"github.com/genq/genq/internal/genq"
)

// dependentRequired (and draft 7's dependencies where every value is a
// list of names) is enforced by the object's automaton: properties are
// written in the schema's order, so a property that depends on an earlier
// one is written only where that one was, and one that an earlier written
// property depends on is no longer optional. The automaton remembers, as
// presence bits, the properties written so far that a later one is tied
// to, for as long as some later property is.

// dependency says that where property a is present, b must be too.
type dependency struct{ a, b string }

// dependentRequired reads s's dependentRequired, and draft 7's
// dependencies in their array form, as a list of pairs.
func dependentRequired(s *value, path string) ([]dependency, error) {
	var out []dependency
	for _, key := range []string{"dependentRequired", "dependencies"} {
		d := s.get(key)
		if d == nil {
			continue
		}
		if d.kind != 'o' {
			return nil, genq.Errorf(genq.Invalid, "at %s: %s must be an object of arrays of names", path, key)
		}
		for _, m := range d.obj {
			if m.val.kind != 'a' {
				return nil, genq.Errorf(genq.Invalid, "at %s: %s must be an object of arrays of names", path, key)
			}
			for _, n := range m.val.arr {
				if n.kind != 's' {
					return nil, genq.Errorf(genq.Invalid, "at %s: %s must be an object of arrays of names", path, key)
				}
				out = append(out, dependency{m.key, n.str})
			}
		}
	}
	return out, nil
}

// namesOnly tells draft 7's dependencies whose values are all lists of
// names: dependentRequired by another name. Its schema form stays refused.
func namesOnly(d *value) bool {
	if d.kind != 'o' {
		return false
	}
	for _, m := range d.obj {
		if m.val.kind != 'a' {
			return false
		}
	}
	return true
}

// resolveDependencies adds to required the names a required property's
// dependencies require, transitively (implied lists those it adds, in
// order), and returns the dependencies left to enforce: those between
// two optional properties.
func resolveDependencies(deps []dependency, required map[string]bool) (left []dependency, implied []string) {
	for changed := true; changed; {
		changed = false
		for _, d := range deps {
			if required[d.a] && !required[d.b] {
				required[d.b] = true
				implied = append(implied, d.b)
				changed = true
			}
		}
	}
	for _, d := range deps {
		if d.a != d.b && !required[d.b] {
			left = append(left, d)
		}
	}
	return left, implied
}

// presenceRules is what each of props' members must hold to for deps, in
// props' order: a presence bit for each property tied to another, kept
// from where it is written to the last place a property tied to it is.
func presenceRules(deps []dependency, props *value, path string) ([]presence, error) {
	out := make([]presence, len(props.obj))
	for i := range out {
		out[i] = presence{bit: -1}
	}
	if len(deps) == 0 {
		for i := range out {
			out[i].keep = ^uint64(0)
		}
		return out, nil
	}
	pos := map[string]int{}
	for i, m := range props.obj {
		pos[m.key] = i
	}
	// last[i]: the last position of a property tied to i's.
	last := make([]int, len(props.obj))
	for i := range last {
		last[i] = -1
	}
	for _, d := range deps {
		a, b := pos[d.a], pos[d.b]
		last[a] = max(last[a], b)
		last[b] = max(last[b], a)
	}
	bits := 0
	for i := range out {
		if last[i] > i { // tied to a later property: remembered
			if bits == 64 {
				return nil, genq.Errorf(genq.Invalid, "at %s: dependentRequired ties more than 64 properties to later ones: genq does not enforce it", path)
			}
			out[i].bit = bits
			bits++
		}
	}
	for _, d := range deps {
		a, b := pos[d.a], pos[d.b]
		if b < a {
			out[a].need |= 1 << out[b].bit // a only where b was written
		} else {
			out[b].forbidSkip |= 1 << out[a].bit // b not left out where a was written
		}
	}
	for i := range out {
		for j := 0; j <= i; j++ {
			if out[j].bit >= 0 && last[j] > i {
				out[i].keep |= 1 << out[j].bit
			}
		}
	}
	return out, nil
}
