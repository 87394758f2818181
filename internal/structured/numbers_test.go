package structured

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
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
	fractional := [][]bound{
		{{"minimum", "0.5"}, {"maximum", "3.5"}},
		{{"exclusiveMinimum", "-2.5"}, {"exclusiveMaximum", "2"}},
		{{"minimum", "0.5"}},
		{{"maximum", "99.99"}},
		{{"exclusiveMaximum", "99.99"}},
		{{"minimum", "-1.25"}, {"maximum", "-0.125"}},
		{{"exclusiveMinimum", "0.05"}, {"exclusiveMaximum", "0.25"}},
		{{"minimum", "2.25"}, {"maximum", "2.75"}},
		{{"minimum", "2.25"}, {"maximum", "2.25"}},
		{{"exclusiveMinimum", "1.1"}},
		{{"exclusiveMinimum", "-0.001"}, {"maximum", "0.001"}},
		{{"minimum", "1e-20"}},
		{{"exclusiveMaximum", "-1e-20"}},
		{{"maximum", "0.1234567890123456789"}},
		{{"minimum", "0.1234567890123456789"}},
		{{"minimum", "1.5e1"}, {"exclusiveMaximum", "15.5"}},
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
	// fracCandidates are numbers about fractional bounds: the bound, with
	// zeros after it, and values a little above and below it.
	fracCandidates := func(vals []string) []string {
		var out []string
		for _, v := range vals {
			r, _ := new(big.Rat).SetString(v)
			for _, digits := range []int{1, 2, 3, 4, 16} {
				for k := int64(-12); k <= 12; k++ {
					d := new(big.Rat).SetFrac64(k, 1)
					d.Quo(d, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)))
					out = append(out, new(big.Rat).Add(r, d).FloatString(digits))
				}
			}
			exact := strings.TrimRight(r.FloatString(16), "0")
			out = append(out, exact, exact+"0", exact+"00", exact+"1", strings.TrimSuffix(exact, "."))
		}
		for i := 0; i < 200; i++ {
			out = append(out, fmt.Sprintf("%d.%02d", rng.Int64N(240)-120, rng.IntN(100)), fmt.Sprintf("0.%03d", rng.IntN(1000)), fmt.Sprintf("-0.%03d", rng.IntN(1000)))
		}
		return out
	}
	run := func(typ string, bs []bound, strict bool) {
		var parts []string
		var edges []int64
		for _, b := range bs {
			parts = append(parts, fmt.Sprintf("%q:%s", b.key, b.val))
			r, _ := new(big.Rat).SetString(b.val)
			f, _ := r.Float64()
			edges = append(edges, int64(f))
		}
		schema := fmt.Sprintf(`{"type":%q,%s}`, typ, strings.Join(parts, ","))
		g, err := CompileWith([]byte(schema), Options{Strict: strict})
		empty := err != nil && strings.Contains(err.Error(), "no number between them")
		if err != nil && !empty {
			t.Fatalf("%s: %v", schema, err)
		}
		var vals []string
		for _, b := range bs {
			vals = append(vals, b.val)
		}
		for _, text := range append(candidates(append(edges, 0)), fracCandidates(vals)...) {
			if _, frac, ok := strings.Cut(text, "."); ok && len(frac) > maxFracDigits {
				continue
			}
			want := wellFormed(text, typ == "integer", strict)
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
			if empty {
				if want {
					t.Errorf("%s: refused as empty, but %s is inside", schema, text)
				}
				continue
			}
			if got := matches(g, text); got != want {
				t.Errorf("%s on %s: %v, want %v", schema, text, got, want)
			}
		}
	}
	for _, strict := range []bool{false, true} {
		for _, bs := range append(cases, fractional...) {
			run("integer", bs, strict)
			run("number", bs, strict)
		}
	}
}

// wellFormed tells the numbers a bounded grammar writes: no exponent, no
// leading zeros, a fraction only for a number, or for an integer unless
// strict, one of zeros.
func wellFormed(s string, integer, strict bool) bool {
	t := strings.TrimPrefix(s, "-")
	whole, frac, hasFrac := strings.Cut(t, ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" || len(whole) > 1 && whole[0] == '0' {
		return false
	}
	if hasFrac && integer && !strict {
		return frac != "" && strings.Trim(frac, "0") == "" && len(frac) <= maxFracDigits
	}
	if hasFrac && (integer || frac == "" || strings.Trim(frac, "0123456789") != "") {
		return false
	}
	return true
}

func TestNumericBoundErrors(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"number","minimum":0.5,"maximum":0.25}`, "no number between them"},
		{`{"type":"number","exclusiveMinimum":0.5,"maximum":0.5}`, "no number between them"},
		{`{"type":"integer","minimum":3,"maximum":2}`, "no number between them"},
		{`{"type":"integer","exclusiveMinimum":1,"exclusiveMaximum":2}`, "no number between them"},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"number","exclusiveMinimum":true}`, "must be a number"},
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

// TestFractionalMultipleOf: a multipleOf such as 1.5 or 0.0001 takes
// exactly the decimals that are its multiples in exact arithmetic (as the
// suite's cases read it, not as doubles divide), within any bounds, and an
// integer exactly the integers that are; every candidate is checked
// against big.Rat.
func TestFractionalMultipleOf(t *testing.T) {
	cases := []struct {
		typ, multiple, bounds string
	}{
		{"number", "1.5", ""},
		{"number", "0.01", ""},
		{"number", "0.0001", ""},
		{"number", "2.5e-3", ""},
		{"number", "0.75", `,"minimum":-3,"exclusiveMaximum":4.5`},
		{"integer", "1.5", ""},
		{"integer", "1e-8", ""},
		{"integer", "0.4", `,"maximum":20`},
	}
	rng := rand.New(rand.NewPCG(5, 2))
	var candidates []string
	for range 400 {
		whole := rng.IntN(2000) - 1000
		candidates = append(candidates, fmt.Sprint(whole))
		for _, digits := range []int{1, 2, 3, 4, 5} {
			frac := rng.IntN(pow10Int(digits))
			candidates = append(candidates, fmt.Sprintf("%d.%0*d", whole, digits, frac))
		}
	}
	candidates = append(candidates, "0", "-0", "0.0075", "0.00751", "4.5", "35", "12391239123", "7.50000", "0.0025", "1.0")
	for _, tc := range cases {
		schema := fmt.Sprintf(`{"type":%q,"multipleOf":%s%s}`, tc.typ, tc.multiple, tc.bounds)
		g, err := Compile([]byte(schema))
		if err != nil {
			t.Errorf("%s: %v", schema, err)
			continue
		}
		m := mustRat(tc.multiple)
		texts := slices.Clone(candidates)
		for i := int64(-12); i <= 30; i++ {
			texts = append(texts, numberText(new(big.Rat).Mul(m, big.NewRat(i, 1)).FloatString(maxFracDigits)))
		}
		lo, hi := mustRat("-1e30"), mustRat("1e30")
		for _, b := range strings.Split(strings.TrimPrefix(tc.bounds, ","), ",") {
			k, v, _ := strings.Cut(b, ":")
			switch k {
			case `"minimum"`:
				lo = mustRat(v)
			case `"maximum"`:
				hi = mustRat(v)
			case `"exclusiveMaximum"`:
				hi = new(big.Rat).Sub(mustRat(v), mustRat("1e-9"))
			}
		}
		accepted := 0
		for _, text := range texts {
			x := mustRat(text)
			want := new(big.Rat).Quo(x, m).IsInt() && x.Cmp(lo) >= 0 && x.Cmp(hi) <= 0 &&
				(tc.typ == "number" || x.IsInt())
			// genq writes no -0: refusing it is narrower, never wrong.
			if got := matches(g, text); got != want && text != "-0" {
				t.Errorf("%s: %s accepted %v, want %v", schema, text, got, want)
			}
			if want {
				accepted++
			}
		}
		if accepted < 5 {
			t.Errorf("%s: only %d candidates are multiples: the test says too little", schema, accepted)
		}
	}
}

func pow10Int(k int) int {
	n := 1
	for range k {
		n *= 10
	}
	return n
}

// TestMultipleOfMerged: two multipleOfs in an allOf hold together as
// their least common multiple, whole or not.
func TestMultipleOfMerged(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		instances    []string
	}{
		{"whole", `{"allOf": [{"multipleOf": 2}, {"multipleOf": 3}], "type": "integer"}`,
			[]string{`0`, `6`, `12`, `4`, `9`, `-18`, `3`}},
		{"fractional", `{"allOf": [{"multipleOf": 0.5}, {"multipleOf": 0.75}], "type": "number"}`,
			[]string{`1.5`, `3`, `0.75`, `0.5`, `4.5`, `2.25`, `0`}},
	} {
		agreesWithValidator(t, tc.name, tc.schema, tc.instances)
	}
}
