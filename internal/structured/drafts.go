package structured

import (
	"strings"

	"github.com/genq/genq/internal/genq"
)

// The drafts of JSON Schema genq reads, as the root's $schema names them.
// draftNone is a schema without $schema: read as the latest draft, except
// that format asserts and draft 4's boolean exclusiveMinimum and
// exclusiveMaximum keep their meaning, as the many schemas written for
// draft 4 or 7 without a $schema intend.
const (
	draftNone = 0
	draft4    = 4
	draft6    = 6
	draft7    = 7
	draft2019 = 2019
	draft2020 = 2020
)

// snowplowSelfDescribing is the meta-schema of Snowplow's self-describing
// schemas (Iglu): draft 4's, and beside it a self object naming the
// schema, which draft 4 reads as an unknown word.
const snowplowSelfDescribing = "iglucentral.com/schemas/com.snowplowanalytics.self-desc/schema/jsonschema/1-0-0"

// schemaDraft reads the root's $schema. A meta-schema genq does not know
// is refused: its vocabularies, and so what its keywords assert, cannot
// be known; draft 3's is named, as genq does not read its keywords
// (divisibleBy, disallow, extends, a boolean required).
func schemaDraft(root *value) (int, error) {
	if root.kind != 'o' {
		return draftNone, nil
	}
	ms := root.get("$schema")
	if ms == nil {
		return draftNone, nil
	}
	if ms.kind != 's' {
		return 0, genq.Errorf(genq.Invalid, "at #: $schema must be a string")
	}
	uri := strings.TrimSuffix(ms.str, "#")
	uri = strings.TrimPrefix(strings.TrimPrefix(uri, "https://"), "http://")
	switch uri {
	case "json-schema.org/draft-04/schema", snowplowSelfDescribing:
		return draft4, nil
	case "json-schema.org/draft-06/schema":
		return draft6, nil
	case "json-schema.org/draft-07/schema":
		return draft7, nil
	case "json-schema.org/draft/2019-09/schema":
		return draft2019, nil
	case "json-schema.org/draft/2020-12/schema", "json-schema.org/schema":
		return draft2020, nil
	case "json-schema.org/draft-03/schema":
		return 0, genq.Errorf(genq.Invalid, "at #: $schema %q is draft 3, whose keywords (divisibleBy, disallow, extends, a boolean required) genq does not read: use draft 4 or later", ms.str)
	}
	return 0, genq.Errorf(genq.Invalid, "at #: $schema %q is not a meta-schema genq knows (drafts 4, 6 and 7, 2019-09 and 2020-12): what its keywords assert cannot be known", ms.str)
}

// draft3Only are draft 3's asserting keywords that later drafts dropped.
// A schema without $schema that uses one was written for draft 3, where
// it asserts: it is refused by name rather than read as an unknown word.
var draft3Only = []string{"divisibleBy", "disallow", "extends"}

// checkDraft3 refuses, in a schema without $schema, a keyword only draft 3
// defines.
func checkDraft3(s *value, draft int, path string) error {
	if draft != draftNone {
		return nil
	}
	for _, k := range draft3Only {
		if s.get(k) != nil {
			return genq.Errorf(genq.Invalid, "the schema keyword %q (at %s) is draft 3's, which genq does not read: write it as draft 4 or later does", k, path)
		}
	}
	return nil
}

// Keywords whose values are schemas, maps of them or lists of them: the
// places a walk over a schema's subschemas goes.
var (
	schemaKeywords    = []string{"items", "additionalItems", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties"}
	schemaMapKeywords = []string{"properties", "patternProperties", "definitions", "$defs", "dependencies", "dependentSchemas"}
	schemaListKeys    = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
)

// normalizeDraft4 rewrites draft 4's boolean exclusiveMinimum and
// exclusiveMaximum, in s and its subschemas, as the numbers later drafts
// write: {"minimum": 5, "exclusiveMinimum": true} is {"exclusiveMinimum":
// 5}; false, or true without its bound, asserts nothing and goes.
func normalizeDraft4(s *value, depth int) {
	if s == nil || s.kind != 'o' || depth > maxSchemaDepth {
		return
	}
	for _, pair := range [][2]string{{"minimum", "exclusiveMinimum"}, {"maximum", "exclusiveMaximum"}} {
		ex := s.get(pair[1])
		if ex == nil || ex.kind != 'b' {
			continue
		}
		bound := s.get(pair[0])
		s.obj = dropMember(s.obj, pair[1])
		if ex.b && bound != nil {
			s.obj = dropMember(s.obj, pair[0])
			s.obj = append(s.obj, member{pair[1], bound})
		}
	}
	for _, k := range schemaKeywords {
		normalizeDraft4(s.get(k), depth+1)
	}
	for _, k := range schemaMapKeywords {
		if m := s.get(k); m != nil && m.kind == 'o' {
			for _, e := range m.obj {
				normalizeDraft4(e.val, depth+1)
			}
		}
	}
	for _, k := range schemaListKeys {
		if l := s.get(k); l != nil && l.kind == 'a' {
			for _, e := range l.arr {
				normalizeDraft4(e, depth+1)
			}
		}
	}
}

func dropMember(ms []member, key string) []member {
	out := ms[:0]
	for _, m := range ms {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

// readDraft reads root's draft into c, and with it whether formats assert
// (2019-09's and 2020-12's default vocabularies make format an
// annotation; strict and assertFormats make it assert whatever the
// draft), and rewrites draft 4's boolean bounds where the draft may be 4.
func (c *compiler) readDraft(root *value, assertFormats bool) error {
	draft, err := schemaDraft(root)
	if err != nil {
		return err
	}
	c.draft = draft
	c.formats = c.strict || assertFormats || draft < draft2019
	if draft == draft4 || draft == draftNone {
		normalizeDraft4(root, 0)
	}
	c.ids, err = indexIDs(root, draft)
	c.scope = nil
	return err
}

// checkShape refuses, by name, a keyword whose value is not the shape
// JSON Schema gives it (a schema, or a list or map of schemas): read
// another way, or skipped, it would be dropped. A boolean required is
// draft 3's.
func checkShape(s *value, path string) error {
	bad := func(k, want string) error {
		return genq.Errorf(genq.Invalid, "at %s: %q must be %s", path, k, want)
	}
	isSchema := func(v *value) bool { return v.kind == 'o' || v.kind == 'b' }
	if r := s.get("required"); r != nil && r.kind == 'b' {
		return genq.Errorf(genq.Invalid, "at %s: a boolean %q is draft 3's, which genq does not read: list the names in the object's required", path, "required")
	}
	for _, k := range schemaKeywords {
		if v := s.get(k); v != nil && !isSchema(v) && !(k == "items" && v.kind == 'a') {
			return bad(k, "a schema")
		}
	}
	for _, k := range schemaMapKeywords {
		v := s.get(k)
		if v == nil {
			continue
		}
		if v.kind != 'o' {
			return bad(k, "an object of schemas")
		}
		for _, m := range v.obj {
			if !isSchema(m.val) && !(k == "dependencies" && m.val.kind == 'a') {
				return genq.Errorf(genq.Invalid, "the schema at %s/%s/%s (in %q) must be an object or a boolean", path, k, m.key, k)
			}
		}
	}
	for _, k := range schemaListKeys {
		v := s.get(k)
		if v == nil || k == "items" && v.kind != 'a' {
			continue
		}
		if v.kind != 'a' || !allSchemas(v.arr) {
			return bad(k, "an array of schemas")
		}
	}
	return nil
}

func allSchemas(vs []*value) bool {
	for _, v := range vs {
		if v.kind != 'o' && v.kind != 'b' {
			return false
		}
	}
	return true
}
