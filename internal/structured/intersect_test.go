package structured

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"unicode/utf8"
)

// A string's pattern, format and length bounds hold together: the product
// of their automata accepts exactly the strings each accepts.
func TestStringConstraintsTogether(t *testing.T) {
	zodDateTime := `^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z))$`
	zodUUID := `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$`
	for _, tc := range []struct {
		name   string
		schema map[string]any
		checks []func(string) bool
		texts  []string
	}{
		{"pattern and maxLength", map[string]any{"pattern": "^a+b*$", "maxLength": 4},
			[]func(string) bool{re("^a+b*$"), maxLen(4)},
			[]string{"a", "ab", "aabb", "aaabb", "b", "", "abab", "aaaa"}},
		{"pattern and minLength", map[string]any{"pattern": "x", "minLength": 3},
			[]func(string) bool{re("x"), minLen(3)},
			[]string{"x", "xx", "axb", "xyz", "abc", "éxé"}},
		{"zod's datetime: format and pattern", map[string]any{"format": "date-time", "pattern": zodDateTime},
			[]func(string) bool{re(formatRe("date-time")), re(zodDateTime)},
			[]string{"2024-01-31T10:20:30Z", "2024-01-31T10:20:30.5Z", "2024-01-31T10:20:30+01:00", "2024-02-29T10:20:30Z", "2023-02-28T23:59:59Z", "2024-13-01T00:00:00Z"}},
		{"zod's uuid: format and pattern", map[string]any{"format": "uuid", "pattern": zodUUID},
			[]func(string) bool{re(formatRe("uuid")), re(zodUUID)},
			[]string{"123e4567-e89b-42d3-a456-426614174000", "123E4567-E89B-42D3-A456-426614174000", "123e4567-e89b-02d3-a456-426614174000", "00000000-0000-0000-0000-000000000000"}},
		{"format and maxLength", map[string]any{"format": "email", "maxLength": 8},
			[]func(string) bool{re(formatRe("email")), maxLen(8)},
			[]string{"a@b.co", "ab@cd.ef", "abc@de.fg", "nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.schema["type"] = "string"
			schema, _ := json.Marshal(tc.schema)
			g, err := Compile(schema)
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range tc.texts {
				want := true
				for _, check := range tc.checks {
					want = want && check(text)
				}
				enc, _ := json.Marshal(text)
				if got := matches(g, string(enc)); got != want {
					t.Errorf("%s: %v, want %v", enc, got, want)
				}
			}
		})
	}
}

func re(p string) func(string) bool { return regexp.MustCompile(p).MatchString }
func maxLen(n int) func(string) bool {
	return func(s string) bool { return utf8.RuneCountInString(s) <= n }
}
func minLen(n int) func(string) bool {
	return func(s string) bool { return utf8.RuneCountInString(s) >= n }
}

func formatRe(f string) string {
	p, ok := formatPattern(f)
	if !ok {
		panic(fmt.Sprintf("no format %q", f))
	}
	return p
}
