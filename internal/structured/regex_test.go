package structured

import (
	"strconv"
	"strings"
	"testing"
)

// TestPropertyEscapes: ECMAScript's Unicode property escapes take the
// characters of their general category or script, as Go's Unicode tables
// say, in and out of classes; what Go's tables cannot say the same way is
// refused by name.
func TestPropertyEscapes(t *testing.T) {
	for _, tc := range []struct {
		pattern     string
		ok, refused []string
	}{
		{`^\p{Letter}+$`, []string{"Hello", "π", "Ünïcödé", "漢字"}, []string{"123", "a1", "", "a b"}},
		{`^\p{L}\p{Nd}$`, []string{"a1", "ж٣"}, []string{"1a", "aa", "a"}},
		{`^\P{Lu}$`, []string{"a", "1", " ", "π"}, []string{"A", "Π", "ab"}},
		{`^\p{gc=Uppercase_Letter}+$`, []string{"ABC", "ΠΣ"}, []string{"Abc", "πσ"}},
		{`^\p{Script=Greek}+$`, []string{"πλ", "Ω"}, []string{"pi", "π1"}},
		{`^[\p{Nd}_]+$`, []string{"12_٣", "_"}, []string{"a", "1a"}},
		{`^[^\p{L}]+$`, []string{"12 !", "٣"}, []string{"a", "1a", "π"}},
		{`\\p{L}`, []string{`\p{L}`, `x\p{L}y`}, []string{"p{L}", "a"}},
	} {
		schema := `{"type":"string","pattern":` + strconv.Quote(tc.pattern) + `}`
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Errorf("%s: %v", tc.pattern, err)
			continue
		}
		var ok, refused []string
		for _, s := range tc.ok {
			ok = append(ok, strconv.Quote(s))
		}
		for _, s := range tc.refused {
			refused = append(refused, strconv.Quote(s))
		}
		t.Run(tc.pattern, func(t *testing.T) { checkTexts(t, g, ok, refused) })
	}
	for _, tc := range []struct{ pattern, want string }{
		{`^\p{Alphabetic}$`, `\p{Alphabetic} is not supported`},
		{`^\P{Other}$`, `\P{Other} is not supported`},
		{`^\p{Cn}$`, `\p{Cn} is not supported`},
		{`^\p{Script_Extensions=Greek}$`, `\p{Script_Extensions=Greek} is not supported`},
		{`^\p{Script=Elvish}$`, `no script "Elvish"`},
		{`^\pL$`, `property in braces`},
	} {
		_, err := Compile([]byte(`{"type":"string","pattern":` + strconv.Quote(tc.pattern) + `}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.pattern, err, tc.want)
		}
	}
}
