package structured

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// Bounded integers and numbers match exactly the decimal strings inside
// their bounds: every candidate near the bounds is checked against exact
// rational arithmetic.
func TestNumericBounds(t *testing.T) {
	type bound struct {
		key string
		val string
	}
	cases := [][]bound{
		{{"minimum", "0"}, {"maximum", "1"}},
		{{"minimum", "-1"}, {"maximum", "1"}},
		{{"exclusiveMinimum", "0"}},
		{{"exclusiveMaximum", "0"}},
		{{"minimum", "-5"}, {"exclusiveMaximum", "-2"}},
		{{"minimum", "7"}, {"maximum", "7"}},
		{{"minimum", "9"}, {"maximum", "123"}},
		{{"minimum", "123"}, {"maximum", "456"}},
		{{"minimum", "-456"}, {"maximum", "-123"}},
		{{"exclusiveMinimum", "-100"}, {"exclusiveMaximum", "100"}},
		{{"minimum", "-9007199254740991"}, {"maximum", "9007199254740991"}},
		{{"maximum", "99"}},
		{{"minimum", "1000"}},
	}
	intOnly := [][]bound{
		{{"minimum", "0.5"}, {"maximum", "3.5"}},
		{{"exclusiveMinimum", "-2.5"}, {"exclusiveMaximum", "2"}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	candidates := func(edges []int64) []string {
		var out []string
		for _, e := range edges {
			for d := int64(-3); d <= 3; d++ {
				n := e + d
				out = append(out, fmt.Sprint(n), fmt.Sprintf("%d.0", n), fmt.Sprintf("%d.5", n), fmt.Sprintf("%d.001", n), fmt.Sprintf("%d.000", n))
				if n == 0 {
					out = append(out, "-0", "-0.0", "-0.5")
				}
			}
		}
		for i := 0; i < 200; i++ {
			out = append(out, fmt.Sprint(rng.Int64N(4000)-2000), fmt.Sprintf("%d.%d", rng.Int64N(400)-200, rng.IntN(100)))
		}
		return append(out, "01", "1e2", "+1", "--1", "1.", ".5")
	}
	run := func(typ string, bs []bound) {
		var parts []string
		var edges []int64
		for _, b := range bs {
			parts = append(parts, fmt.Sprintf("%q:%s", b.key, b.val))
			r, _ := new(big.Rat).SetString(b.val)
			f, _ := r.Float64()
			edges = append(edges, int64(f))
		}
		schema := fmt.Sprintf(`{"type":%q,%s}`, typ, strings.Join(parts, ","))
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		for _, text := range candidates(append(edges, 0)) {
			want := wellFormed(text, typ == "integer")
			if want {
				x, _ := new(big.Rat).SetString(text)
				for _, b := range bs {
					v, _ := new(big.Rat).SetString(b.val)
					c := x.Cmp(v)
					switch b.key {
					case "minimum":
						want = want && c >= 0
					case "maximum":
						want = want && c <= 0
					case "exclusiveMinimum":
						want = want && c > 0
					case "exclusiveMaximum":
						want = want && c < 0
					}
				}
				if text == "-0" || strings.HasPrefix(text, "-0.") && strings.Trim(text[3:], "0") == "" {
					want = false // never written: zero is "0"
				}
			}
			if got := matches(g, text); got != want {
				t.Errorf("%s on %s: %v, want %v", schema, text, got, want)
			}
		}
	}
	for _, bs := range cases {
		run("integer", bs)
		run("number", bs)
	}
	for _, bs := range intOnly {
		run("integer", bs)
	}
}

// wellFormed tells the numbers a bounded grammar writes: no exponent, no
// leading zeros, a fraction only for a number.
func wellFormed(s string, integer bool) bool {
	t := strings.TrimPrefix(s, "-")
	whole, frac, hasFrac := strings.Cut(t, ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" || len(whole) > 1 && whole[0] == '0' {
		return false
	}
	if hasFrac && (integer || frac == "" || strings.Trim(frac, "0123456789") != "") {
		return false
	}
	return true
}

func TestNumericBoundErrors(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"number","minimum":0.5}`, "minimum 0.5 on a number is not supported"},
		{`{"type":"integer","minimum":3,"maximum":2}`, "no number between them"},
		{`{"type":"integer","exclusiveMinimum":1,"exclusiveMaximum":2}`, "no number between them"},
		{`{"type":"number","exclusiveMinimum":true}`, "must be a number"},
		{`{"type":"integer","minimum":1e20}`, "leaves no number"},
	} {
		_, err := Compile([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.schema, err, tc.want)
		}
	}
	if _, err := Compile([]byte(`{"type":"integer","maximum":1e30,"minimum":-1e30}`)); err != nil {
		t.Errorf("bounds beyond what genq writes: %v", err)
	}
}
