package structured

import (
	"fmt"
	"strings"
	"testing"
)

// TestCountedBounds holds counts past MaxRepeat exactly, through the real
// matcher and Llama 3's masks, on each side of each bound.
func TestCountedBounds(t *testing.T) {
	v, toks, eos := llama3(t)
	str := func(n int, c string) string { return `"` + strings.Repeat(c, n) + `"` }
	arr := func(n int) string {
		if n == 0 {
			return "[]"
		}
		return "[" + strings.Repeat("7,", n-1) + "7]"
	}
	strs := func(n int, s string) string { return "[" + strings.Repeat(`"`+s+`",`, n-1) + `"` + s + `"]` }
	tests := []struct {
		name   string
		schema string
		ok     []string
		bad    []string
	}{
		{"string between", `{"type":"string","minLength":1500,"maxLength":2000}`,
			[]string{str(1500, "a"), str(2000, "a"), str(1700, "é"), str(2000, "ab")[:2001] + `"`},
			[]string{str(1499, "a"), str(2001, "a"), str(1499, "é"), str(2001, "é")}},
		{"string at least", `{"type":"string","minLength":1030}`,
			[]string{str(1030, "x"), str(4000, "x")},
			[]string{str(1029, "x"), str(0, "x")}},
		{"string at most", `{"type":"string","maxLength":1100}`,
			[]string{str(0, "x"), str(1100, "x"), str(1100, `\n`)},
			[]string{str(1101, "x"), str(1101, `\n`)}},
		{"items between", `{"type":"array","items":{"type":"integer"},"minItems":1100,"maxItems":1200}`,
			[]string{arr(1100), arr(1200)},
			[]string{arr(1099), arr(1201)}},
		{"items at most", `{"type":"array","maxItems":2000}`,
			[]string{arr(0), arr(1), arr(2000)},
			[]string{arr(2001)}},
		{"counts within counts", `{"type":"array","minItems":1030,"items":{"type":"string","maxLength":1100}}`,
			[]string{strs(1030, "ab"), "[" + str(1100, "c") + strings.Repeat(`,"d"`, 1029) + "]"},
			[]string{strs(1029, "ab"), "[" + str(1101, "c") + strings.Repeat(`,"d"`, 1029) + "]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			checkFeeds(t, g, v, toks, eos, tc.ok, tc.bad)
		})
	}
}

// TestCountedMasks checks the mask against each token's own advance where
// a count nears its bounds, so that a long token is refused just past max.
func TestCountedMasks(t *testing.T) {
	v, toks, eos := llama3(t)
	g, err := Compile([]byte(`{"type":"string","minLength":1100,"maxLength":1200}`))
	if err != nil {
		t.Fatal(err)
	}
	mask := make([]uint64, (v.Size()+63)/64)
	for _, n := range []int{0, 1098, 1099, 1100, 1150, 1197, 1199, 1200} {
		m := g.NewMatcher()
		if !m.Advance([]byte(`"` + strings.Repeat("z", n))) {
			t.Fatalf("refused a prefix of %d characters", n)
		}
		m.Mask(v, mask)
		bruteForce(t, m, mask, toks, eos, fmt.Sprintf("after %d characters", n))
	}
}

// TestCountLimits refuses by name what counters do not take.
func TestCountLimits(t *testing.T) {
	tests := []struct{ schema, want string }{
		{`{"type":"string","maxLength":1048577}`, "maxLength is 1048577; genq enforces at most 1048576"},
		{`{"type":"array","minItems":2000000}`, "minItems is 2000000; genq enforces at most 1048576"},
		{`{"type":"object","propertyNames":{"maxLength":1048577,"pattern":"^a"}}`, "maxLength is 1048577; genq enforces at most 1048576"},
		{`{"type":"string","format":"date-time","minLength":2000,"maxLength":2000}`, "maxLength is 2000; genq enforces at most 1024 beside a pattern"},
		{`{"type":"array","maxItems":2000,"uniqueItems":true}`, "maxItems is 2000; genq enforces at most 1024 beside uniqueItems"},
		{`{"type":"object","maxProperties":2000}`, "maxProperties is 2000; genq enforces at most 1024"},
	}
	for _, tc := range tests {
		_, err := Compile([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.schema, err, tc.want)
		}
	}
}
