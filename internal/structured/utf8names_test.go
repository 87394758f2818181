package structured

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// badUTF8 are byte sequences that are no UTF-8 (RFC 3629), by kind.
var badUTF8 = []struct{ kind, bytes string }{
	{"overlong of 2 bytes", "\xc0\x80"},
	{"overlong of 2 bytes, C1", "\xc1\xbf"},
	{"overlong of 3 bytes", "\xe0\x80\x80"},
	{"overlong of 3 bytes, top", "\xe0\x9f\xbf"},
	{"surrogate D800", "\xed\xa0\x80"},
	{"surrogate DFFF", "\xed\xbf\xbf"},
	{"overlong of 4 bytes", "\xf0\x80\x80\x80"},
	{"overlong of 4 bytes, top", "\xf0\x8f\xbf\xbf"},
	{"above U+10FFFF", "\xf4\x90\x80\x80"},
	{"F5 lead", "\xf5\x80\x80\x80"},
	{"FF", "\xff"},
	{"lone continuation", "\x80"},
	{"lone continuation, top", "\xbf"},
	{"truncated 2 bytes", "\xc3"},
	{"truncated 3 bytes", "\xe6\x97"},
	{"truncated 4 bytes", "\xf0\x9f\x98"},
	{"lead then ASCII", "\xc3A"},
	{"continuation past its character", "\xc3\xa9\xa9"},
}

// goodNames are names of one to four bytes a character, some a listed
// name's prefix or neighbour in utf8NameRules' properties.
var goodNames = []string{"a", "é", "日本", "日本語", "😀", "ࠀ", "ࠁ", "\ud7fe", "\ud7ff", "\ue000",
	"𐀀", "𐀁", "\U0010FFFE", "\U0010FFFF", "\u2029x", "12", "X_"}

// utf8Listed are properties whose names begin with each lead byte that
// narrows its next byte (E0, ED, F0, F4) and others, so that a name
// leaves the listed names' trie in the middle of a character.
const utf8Listed = `"properties":{"ࠀ":{},"\ud7ff":{},"𐀀":{},"\udbff\udfff":{},"é":{},"日本":{}}`

// utf8NameRules are schemas that take the value 1 under every
// well-formed name, one per way genq writes a name (or, for contains, a
// string other than listed ones), each wrapped as texts of its own.
var utf8NameRules = []struct {
	name, schema string
	wrap         func(name string) string
	refused      []string // well-formed names the rule refuses
}{
	{"other names", `{` + utf8Listed + `}`, asMember, nil},
	{"other names under additionalProperties", `{` + utf8Listed + `,"additionalProperties":{"type":"integer"}}`, asMember, nil},
	{"a map", `{"additionalProperties":{"type":"integer"}}`, asMember, nil},
	{"pattern names", `{"patternProperties":{"X_":{},"[0-9]{2,}":{}}}`, asMember, nil},
	{"pattern names beside listed ones", `{` + utf8Listed + `,"patternProperties":{"X_":{},"é":{}},"additionalProperties":{"type":"integer"}}`, asMember, nil},
	{"pattern names of a closed object", `{` + utf8Listed + `,"patternProperties":{"":{}},"additionalProperties":false}`, asMember, nil},
	{"more patterns than told apart", `{` + utf8Listed + `,"patternProperties":{"a":{},"b":{},"c":{},"d":{},"":{}},"additionalProperties":false}`, asMember, nil},
	{"propertyNames", `{"propertyNames":{"maxLength":8}}`, asMember, nil},
	{"propertyNames beside listed names", `{` + utf8Listed + `,"propertyNames":{"pattern":"^[^~]*$"}}`, asMember, nil},
	{"propertyNames counted past MaxRepeat", `{"propertyNames":{"maxLength":2000}}`, asMember, nil},
	{"propertyNames and patterns", `{"propertyNames":{"minLength":1},"patternProperties":{"[0-9]{2,}":{}}}`, asMember, nil},
	{"strings other than a contains const", `{"type":"array","items":{"type":"string"},"contains":{"enum":["ࠀ","\ud7ff","𐀀","\udbff\udfff"]},"minContains":0,"maxContains":0}`, asItem,
		[]string{"ࠀ", "\ud7ff", "𐀀", "\U0010FFFF"}},
	{"strings", `{"type":"array","items":{"type":"string"}}`, asItem, nil},
	{"strings a negated pattern allows", `{"type":"array","items":{"type":"string","not":{"pattern":"~"}}}`, asItem, nil},
	{"strings of a pattern", `{"type":"array","items":{"type":"string","pattern":"^[^~]*$"}}`, asItem, nil},
}

func asMember(name string) string { return `{"` + name + `":1}` }
func asItem(name string) string   { return `["` + name + `"]` }

// TestNamesAreUTF8: every rule that writes a name (or a string) takes a
// name exactly when it is well-formed UTF-8: each bad sequence alone, and
// inside, before and after characters and listed names' prefixes, is
// refused (unless the prefix makes it a character); every good name is taken. Then every lead byte with every kind
// of next byte, against Go's own reading of UTF-8.
func TestNamesAreUTF8(t *testing.T) {
	var sweep []string
	for lead := 0x80; lead <= 0xFF; lead++ {
		for _, next := range []byte{0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0} {
			for tail := range 3 {
				sweep = append(sweep, string([]byte{byte(lead), next})+strings.Repeat("\x80", tail))
			}
		}
	}
	for _, rule := range utf8NameRules {
		t.Run(rule.name, func(t *testing.T) {
			g, err := Compile([]byte(rule.schema))
			if err != nil {
				t.Fatal(err)
			}
			takes := func(name string) bool { return utf8.ValidString(name) && !slices.Contains(rule.refused, name) }
			for _, name := range goodNames {
				if got, want := matches(g, rule.wrap(name)), takes(name); got != want {
					t.Errorf("the name %q: taken %v, want %v", name, got, want)
				}
			}
			for _, bad := range badUTF8 {
				for _, around := range [][2]string{{"", ""}, {"a", "12"}, {"12", ""}, {"\xe0\xa0", ""}, {"\xed", "\x80"}, {"\xf0", "\x80\x80"}, {"é", ""}, {"日", "本"}} {
					name := around[0] + bad.bytes + around[1]
					// A prefix and a lone continuation may make a character.
					if got, want := matches(g, rule.wrap(name)), takes(name); got != want {
						t.Errorf("%s: the name %q taken %v, want %v", bad.kind, name, got, want)
					}
				}
			}
			for _, seq := range sweep {
				for _, name := range []string{seq, "日" + seq} {
					if got, want := matches(g, rule.wrap(name)), takes(name); got != want {
						t.Errorf("the name %q: taken %v, want %v", name, got, want)
					}
				}
			}
		})
	}
}

// TestMultibyteNamesMatchTheirPatterns: a name of characters beyond ASCII
// holds to the schemas of exactly the patterns it matches, and one that is
// no UTF-8 to none (it is refused, not taken as matching no pattern).
func TestMultibyteNamesMatchTheirPatterns(t *testing.T) {
	patterns := `"[0-9]{2,}":{"type":"integer"},"é":{"type":"string"},"^日本$":{"type":"boolean"}`
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
	}{
		{"told apart", `{"patternProperties":{` + patterns + `},"additionalProperties":{"type":"null"}}`,
			[]string{`{"é":"s"}`, `{"café":"s"}`, `{"日本":true}`, `{"日本12":1}`, `{"😀":null}`, `{"😀99":7}`, `{"ࠀ":null}`},
			[]string{`{"é":1}`, `{"日本":null}`, `{"日本12":true}`, `{"😀":1}`, `{"é12":1}`, `{"é12":"s"}`, `{"日本 ":true}`,
				"{\"\xe0\x80\x8012\":1}", "{\"\xe0\x80\x8012\":null}", "{\"\xc3\xa9\xff\":\"s\"}", "{\"\xed\xa0\x80\":null}"}},
		{"beside listed names", `{"properties":{"é":{"const":"x"},"日本":{}},"patternProperties":{` + patterns + `},"additionalProperties":false}`,
			[]string{`{"é":"x"}`, `{"日本":true}`, `{"éé":"s"}`, `{"日本12":3}`},
			[]string{`{"é":"s"}`, `{"日本":1}`, `{"😀":null}`, `{"日本語":true}`, "{\"\xc3\xa9\xa9\":\"s\"}", "{\"\xe6\x97\xa5\xe6\x9c\":1}"}},
		{"names of a class", `{"propertyNames":{"pattern":"^[à-ÿ]+$"}}`,
			[]string{`{"é":1}`, `{"üé":1}`, `{}`},
			[]string{`{"a":1}`, `{"ā":1}`, "{\"\xc3\":1}", "{\"\xc3\xa9\xc3\":1}", "{\"\xc1\xa9\":1}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			checkTexts(t, g, tc.ok, tc.refused)
		})
	}
}

// TestSeparatorNamesAreOneName: a listed name with U+2028 or U+2029 is
// written with their escapes (as Go writes them); written as themselves,
// the same name is no other name either, nor another string than a
// listed one.
func TestSeparatorNamesAreOneName(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		ok, refused  []string
	}{
		{"a listed name", `{"properties":{"a\u2028b":{"type":"string"},"\u2029":{"type":"string"}}}`,
			[]string{`{"a\u2028b":"s"}`, `{"\u2029":"s"}`, "{\"a\u2029b\":1}", "{\"\u2028\":1}", `{"ab":1}`},
			[]string{`{"a\u2028b":1}`, "{\"a\u2028b\":1}", "{\"a\u2028b\":\"s\"}", "{\"\u2029\":1}"}},
		{"a listed name beside patterns", `{"properties":{"a\u2028":{"type":"string"}},"patternProperties":{"^a":{}}}`,
			[]string{`{"a\u2028":"s"}`, `{"ab":1}`, "{\"a\u2029\":1}"},
			[]string{"{\"a\u2028\":1}", `{"a\u2028":1}`}},
		{"a string other than listed ones", `{"items":{"type":"string"},"contains":{"const":"\u2028"},"minContains":0,"maxContains":0}`,
			[]string{`["a"]`, "[\"\u2029\"]"},
			[]string{"[\"\u2028\"]", `["\u2028"]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			checkTexts(t, g, tc.ok, tc.refused)
		})
	}
}

// TestFormatsRefuseBadUTF8: formats that take characters beyond ASCII,
// alone and beside a negated enum, refuse every sequence that is no UTF-8, alone or
// after a character they take.
func TestFormatsRefuseBadUTF8(t *testing.T) {
	for _, schema := range []string{
		`{"type":"string","format":"iri"}`,
		`{"type":"string","format":"iri-reference"}`,
		`{"type":"string","format":"iri","not":{"enum":["http://é.x/","http://x/"]}}`,
		`{"type":"string","format":"uri-reference","$schema":"https://json-schema.org/draft/2020-12/schema"}`,
	} {
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		for _, bad := range badUTF8 {
			for _, text := range []string{`"` + bad.bytes + `"`, `"http://é.x/` + bad.bytes + `"`, `"a` + bad.bytes + `b"`} {
				if matches(g, text) {
					t.Errorf("%s: %s: took %q", schema, bad.kind, text)
				}
			}
		}
		if !matches(g, `"http://é.x/日本"`) {
			t.Errorf("%s: refused a well-formed IRI", schema)
		}
	}
}
