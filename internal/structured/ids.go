package structured

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// documentBase is the base URI of a document whose root sets none: a
// relative $id or $ref resolves against it as RFC 3986 says. The .invalid
// top-level domain is reserved, so no real schema's URI is this one.
const documentBase = "https://genq.invalid/schema.json"

// metaSchema2020 is draft 2020-12's meta-schema, the one other document
// the suite refers to that genq is most often asked for by name.
const metaSchema2020 = "https://json-schema.org/draft/2020-12/schema"

// unknownScope stands in the dynamic scope for a schema genq made (a merge,
// a lowering's branch): which resources it came through is not known.
const unknownScope = "?"

// ids is a schema document's identifiers, as JSON Schema 2020-12 scopes
// them: each $id starts a resource whose base URI its $refs resolve
// against, and $anchor and $dynamicAnchor name schemas within a resource.
// Nothing outside the document is ever fetched: a $ref that does not
// resolve inside it is refused.
type ids struct {
	// root is the root's base URI: its $id's, else documentBase.
	root *url.URL
	// resources are the document's resources by absolute URI, fragment
	// dropped; a URI two subschemas claim maps to nil.
	resources map[string]*value
	// anchors are the schemas that $anchor, $dynamicAnchor and drafts 6
	// and 7's "#name" ids name, by resource URI, "#" and name.
	anchors map[string]*value
	// dynamic holds the anchors that $dynamicAnchor sets, and
	// dynamicNames, per name, the resources that set one.
	dynamic      map[string]bool
	dynamicNames map[string][]string
	// baseOf is the base URI where each $ref's (and $dynamicRef's) string
	// stands, and dynamicRefs the strings that are a $dynamicRef's.
	baseOf      map[*value]*url.URL
	dynamicRefs map[*value]bool
	// resourceOf is each subschema's resource URI.
	resourceOf map[*value]string
	// scoped are the names of $dynamicAnchors that several resources
	// set, sorted: only a $dynamicRef to one of them depends on the
	// dynamic scope.
	scoped []string
	// nested: a subschema below the root sets its own base URI.
	nested bool
}

// indexIDs walks root's subschemas, as the keywords that hold schemas
// reach them, and reads their identifiers. A $dynamicRef alone in its
// schema becomes a $ref whose string is marked dynamic, so that every
// place a $ref is followed follows it too.
func indexIDs(root *value, draft int) (*ids, error) {
	base, _ := url.Parse(documentBase)
	x := &ids{
		root:         base,
		resources:    map[string]*value{},
		anchors:      map[string]*value{},
		dynamic:      map[string]bool{},
		dynamicNames: map[string][]string{},
		baseOf:       map[*value]*url.URL{},
		dynamicRefs:  map[*value]bool{},
		resourceOf:   map[*value]string{},
	}
	if err := x.walk(root, base, "#", draft, 0); err != nil {
		return nil, err
	}
	for name, rs := range x.dynamicNames {
		if len(rs) > 1 {
			x.scoped = append(x.scoped, name)
		}
	}
	slices.Sort(x.scoped)
	return x, nil
}

// idKeys are the keywords that set a schema's base URI in draft.
func idKeys(draft int) []string {
	switch draft {
	case draft4:
		return []string{"id"}
	case draftNone:
		return []string{"$id", "id"}
	}
	return []string{"$id"}
}

func (x *ids) walk(s *value, base *url.URL, path string, draft, depth int) error {
	if s == nil || s.kind != 'o' || depth > maxSchemaDepth {
		return nil
	}
	if err := x.enter(s, &base, path, draft, depth); err != nil {
		return err
	}
	for _, k := range schemaKeywords {
		if err := x.walk(s.get(k), base, path+"/"+k, draft, depth+1); err != nil {
			return err
		}
	}
	for _, k := range schemaMapKeywords {
		if m := s.get(k); m != nil && m.kind == 'o' {
			for _, e := range m.obj {
				if err := x.walk(e.val, base, path+"/"+k+"/"+e.key, draft, depth+1); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range schemaListKeys {
		if l := s.get(k); l != nil && l.kind == 'a' {
			for i, e := range l.arr {
				if err := x.walk(e, base, path+"/"+k+"/"+strconv.Itoa(i), draft, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// enter reads s's own identifiers: its $id moves *base, its anchors are
// named in the resource, its $ref and $dynamicRef remember *base.
func (x *ids) enter(s *value, base **url.URL, path string, draft, depth int) error {
	if depth == 0 {
		// The root is its document's resource even without an $id.
		x.add(x.resources, (*base).String(), s)
	}
	for _, k := range idKeys(draft) {
		id := s.get(k)
		if id == nil || id.kind != 's' || refOnly(draft) && s.get("$ref") != nil {
			continue
		}
		u, err := (*base).Parse(id.str)
		if err != nil {
			return genq.Errorf(genq.Invalid, "at %s: %s %q is not a URI reference: %v", path, k, id.str, err)
		}
		name := u.Fragment
		u.Fragment, u.RawFragment = "", ""
		if !strings.HasPrefix(id.str, "#") {
			x.nested = x.nested || depth > 0
			*base = u
			x.add(x.resources, u.String(), s)
		}
		if name != "" && !strings.HasPrefix(name, "/") {
			x.add(x.anchors, u.String()+"#"+name, s)
		}
		break
	}
	if depth == 0 {
		x.root = *base // where a $ref the walk did not reach resolves
	}
	res := (*base).String()
	x.resourceOf[s] = res
	if a := s.get("$anchor"); a != nil && a.kind == 's' && draft != draft4 && draft != draft6 && draft != draft7 {
		x.add(x.anchors, res+"#"+a.str, s)
	}
	if !dynamicDraft(draft) {
		if r := s.get("$ref"); r != nil {
			x.baseOf[r] = *base
		}
		return nil
	}
	if a := s.get("$dynamicAnchor"); a != nil && a.kind == 's' {
		x.add(x.anchors, res+"#"+a.str, s)
		x.dynamic[res+"#"+a.str] = true
		x.dynamicNames[a.str] = append(x.dynamicNames[a.str], res)
	}
	if r := s.get("$ref"); r != nil {
		x.baseOf[r] = *base
	}
	if r := s.get("$dynamicRef"); r != nil {
		if s.get("$ref") != nil {
			return genq.Errorf(genq.Invalid, "at %s: $dynamicRef beside $ref is not supported: put one of them in an allOf", path)
		}
		x.baseOf[r] = *base
		x.dynamicRefs[r] = true
		for i := range s.obj {
			if s.obj[i].key == "$dynamicRef" {
				s.obj[i].key = "$ref"
			}
		}
	}
	return nil
}

// refOnly tells a draft where a $ref's siblings, $id included, are
// ignored: there an $id beside $ref sets no base URI.
func refOnly(draft int) bool {
	return draft == draft4 || draft == draft6 || draft == draft7
}

// dynamicDraft tells a draft that has $dynamicRef and $dynamicAnchor:
// 2020-12, which a schema without $schema is read as.
func dynamicDraft(draft int) bool {
	return draft == draft2020 || draft == draftNone
}

// add names v by key in m; a key named twice maps to nil, so that a
// $ref to it is refused rather than guessed.
func (x *ids) add(m map[string]*value, key string, v *value) {
	if old, ok := m[key]; ok && old != v {
		m[key] = nil
		return
	}
	m[key] = v
}

// refTarget is the schema a $ref (or a $dynamicRef) points to: its URI,
// resolved against the base where it stands, names a resource of the
// document, and its fragment a JSON pointer into it or an anchor in it.
func (c *compiler) refTarget(ref *value, path string) (*value, error) {
	word := "$ref"
	if c.ids.dynamicRefs[ref] {
		word = "$dynamicRef"
	}
	if ref.kind != 's' {
		return nil, genq.Errorf(genq.Invalid, "at %s: %s must be a string", path, word)
	}
	base, ok := c.ids.baseOf[ref]
	if !ok {
		if c.ids.nested {
			// A $ref genq's own rewriting made, or one under a keyword
			// that does not hold schemas: where it stands is not known.
			return nil, genq.Errorf(genq.Invalid, "at %s: %s %q is not supported here: a subschema sets its own base URI with $id, and genq cannot tell which applies", path, word, ref.str)
		}
		base = c.ids.root
	}
	u, err := base.Parse(ref.str)
	if err != nil {
		return nil, genq.Errorf(genq.Invalid, "at %s: %s %q is not a URI reference: %v", path, word, ref.str, err)
	}
	name := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	uri := u.String()
	res, ok := c.ids.resources[uri]
	switch {
	case !ok && uri == metaSchema2020:
		return nil, genq.Errorf(genq.Invalid, "at %s: %s %q to the 2020-12 meta-schema is not supported: genq does not hold the meta-schemas and fetches nothing", path, word, ref.str)
	case !ok:
		return nil, genq.Errorf(genq.Invalid, "at %s: %s %q is not supported: it refers to another document (%s), and genq fetches nothing", path, word, ref.str, uri)
	case res == nil:
		return nil, genq.Errorf(genq.Invalid, "at %s: %s %q is ambiguous: two subschemas set the $id %s", path, word, ref.str, uri)
	}
	target, problem := c.fragmentTarget(res, uri, name)
	if target == nil {
		return nil, genq.Errorf(genq.Invalid, "at %s: %s %q %s", path, word, ref.str, problem)
	}
	if c.ids.dynamicRefs[ref] && c.ids.dynamic[uri+"#"+name] {
		return c.dynamicTarget(target, name, path, ref.str)
	}
	return target, nil
}

// fragmentTarget is the schema that name, a URI's fragment, names in the
// resource res (at uri): itself, a JSON pointer's, or an anchor's; or
// nil and why not.
func (c *compiler) fragmentTarget(res *value, uri, name string) (*value, string) {
	switch {
	case name == "":
		return res, ""
	case strings.HasPrefix(name, "/"):
		return pointerTarget(res, name), "points to nothing"
	}
	t, ok := c.ids.anchors[uri+"#"+name]
	if ok && t == nil {
		return nil, fmt.Sprintf("is ambiguous: two subschemas set the anchor %q in %s", name, uri)
	}
	return t, "points to nothing"
}

// pointerTarget follows a JSON pointer ("/$defs/a~1b") from v, nil where
// it leads nowhere.
func pointerTarget(v *value, pointer string) *value {
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for _, tok := range strings.Split(pointer[1:], "/") {
		if v = child(v, unescape.Replace(tok)); v == nil {
			return nil
		}
	}
	return v
}

// dynamicTarget is a $dynamicRef's target where its static target sets
// the $dynamicAnchor name: the schema of that dynamic anchor in the
// outermost resource of the dynamic scope that sets one. Where only one
// resource sets it, that is the static target, whatever the scope.
func (c *compiler) dynamicTarget(static *value, name, path, ref string) (*value, error) {
	if !slices.Contains(c.ids.scoped, name) {
		return static, nil
	}
	for _, r := range c.scope {
		if r == unknownScope {
			return nil, genq.Errorf(genq.Invalid, "at %s: $dynamicRef %q is not supported here: its target depends on the dynamic scope, which genq's rewriting of the schema (allOf, $ref, unevaluated* merged) hides", path, ref)
		}
		if c.ids.dynamic[r+"#"+name] {
			if t := c.ids.anchors[r+"#"+name]; t != nil {
				return t, nil
			}
			return nil, genq.Errorf(genq.Invalid, "at %s: $dynamicRef %q is ambiguous: two subschemas set the anchor %q in %s", path, ref, name, r)
		}
	}
	return static, nil
}

// resourceOf is the resource URI of s, unknownScope where s is a schema
// genq made rather than one of the document's.
func (c *compiler) resourceOf(s *value) string {
	if r, ok := c.ids.resourceOf[s]; ok {
		return r
	}
	return unknownScope
}

// enterScope puts s's resource at the end of the dynamic scope, where a
// $dynamicRef may depend on it, and returns what takes it out again.
func (c *compiler) enterScope(s *value) func() {
	if c.ids == nil || len(c.ids.scoped) == 0 || s.kind != 'o' {
		return func() {}
	}
	r := c.resourceOf(s)
	if n := len(c.scope); n > 0 && c.scope[n-1] == r {
		return func() {}
	}
	c.scope = append(c.scope, r)
	return func() { c.scope = c.scope[:len(c.scope)-1] }
}

// scopeKey is what of the dynamic scope, with the resource extra entered
// ("" for none), the rules compiled in it depend on: for each scoped
// name, the resource its $dynamicRefs resolve to. Rules memoized under
// one key are the same rules wherever the key is the same.
func (c *compiler) scopeKey(extra string) string {
	if c.ids == nil || len(c.ids.scoped) == 0 {
		return ""
	}
	scope := c.scope
	if extra != "" {
		scope = append(slices.Clip(scope), extra)
	}
	var b strings.Builder
	for _, name := range c.ids.scoped {
		for _, r := range scope {
			if r == unknownScope || c.ids.dynamic[r+"#"+name] {
				b.WriteString(name + "=" + r + "\n")
				break
			}
		}
	}
	return b.String()
}

// rootScope is scopeKey where the root's rule is compiled: the root's
// resource alone in scope.
func (c *compiler) rootScope() string {
	saved := c.scope
	c.scope = nil
	defer func() { c.scope = saved }()
	return c.scopeKey(c.resourceOf(c.root))
}
