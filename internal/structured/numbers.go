package structured

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
)

// Numeric bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum)
// compile to the decimal strings inside them, digit by digit: zod writes
// the safe-integer bounds into every integer it describes, and tool
// schemas bound their numbers often. Integers take any bound (a fractional
// one rounds inward). Numbers take any bound too: the integer part is
// compared as a range of integers, and where it equals a bound's, the
// fraction is compared with the bound's fraction digit by digit (a digit
// above it, any digits after; the same digit, the next one compared). A
// bounded number is written without an exponent.

// maxMagnitude is the largest integer part the grammar writes.
var maxMagnitude = uint64(math.Pow10(maxIntDigits)) - 1

// numBound is one side of a range: unbounded, or a value that the range
// holds or excludes.
type numBound struct {
	set       bool
	value     *big.Rat
	inclusive bool
}

// numericRange reads the bounds of s. whole says the value is an integer,
// so a fractional bound rounds inward and every bound is made inclusive.
func numericRange(s *value, path string, whole bool) (lo, hi numBound, err error) {
	limit := new(big.Rat).SetUint64(maxMagnitude + 1)
	read := func(key string, upper, exclusive bool) error {
		v := s.get(key)
		if v == nil {
			return nil
		}
		if v.kind != 'n' {
			return genq.Errorf(genq.Invalid, "at %s: %s must be a number (a boolean is draft 4's form, read where $schema is draft 4 or absent)", path, key)
		}
		r, ok := v.rat()
		if !ok {
			return genq.Errorf(genq.Invalid, "at %s: %s is not a number", path, key)
		}
		b := numBound{set: true, value: r, inclusive: !exclusive}
		if !r.IsInt() && whole {
			// An integer inside a fractional bound is inside the whole
			// one next to it, inclusively.
			q := floor(r)
			if !upper {
				q.Add(q, big.NewRat(1, 1))
			}
			b = numBound{set: true, value: q, inclusive: true}
		}
		abs := new(big.Rat).Abs(b.value)
		switch {
		case abs.Cmp(limit) >= 0 && (b.value.Sign() > 0) == upper:
			return nil // beyond what the grammar writes: no bound
		case abs.Cmp(limit) >= 0:
			return genq.Errorf(genq.Invalid, "at %s: %s %s leaves no number genq can write (at most %d digits)", path, key, v.num, maxIntDigits)
		}
		if upper {
			hi = tighter(hi, b, true)
		} else {
			lo = tighter(lo, b, false)
		}
		return nil
	}
	for _, k := range []struct {
		key              string
		upper, exclusive bool
	}{{"minimum", false, false}, {"exclusiveMinimum", false, true}, {"maximum", true, false}, {"exclusiveMaximum", true, true}} {
		if err := read(k.key, k.upper, k.exclusive); err != nil {
			return lo, hi, err
		}
	}
	one := big.NewRat(1, 1)
	if whole { // whole bounds of an integer are inclusive
		if lo.set && !lo.inclusive {
			lo = numBound{set: true, value: new(big.Rat).Add(lo.value, one), inclusive: true}
		}
		if hi.set && !hi.inclusive {
			hi = numBound{set: true, value: new(big.Rat).Sub(hi.value, one), inclusive: true}
		}
	}
	if lo.set && hi.set {
		if c := lo.value.Cmp(hi.value); c > 0 || c == 0 && !(lo.inclusive && hi.inclusive) {
			return lo, hi, genq.Errorf(genq.Invalid, "at %s: the bounds leave no number between them: it can never be satisfied", path)
		}
	}
	return lo, hi, nil
}

// floor is the largest integer not above r.
func floor(r *big.Rat) *big.Rat {
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: rounds down for a positive denominator
	return new(big.Rat).SetInt(q)
}

// tighter is the stricter of two bounds on one side.
func tighter(a, b numBound, upper bool) numBound {
	if !a.set {
		return b
	}
	switch c := b.value.Cmp(a.value); {
	case c == 0:
		a.inclusive = a.inclusive && b.inclusive
		return a
	case (c < 0) == upper:
		return b
	}
	return a
}

// hasBounds tells whether s bounds its numbers.
func hasBounds(s *value) bool {
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if s.get(k) != nil {
			return true
		}
	}
	return false
}

// bounded compiles a bounded integer (whole) or number.
func (c *compiler) bounded(s *value, path string, whole bool) (grammar.Frag, error) {
	lo, hi, err := numericRange(s, path, whole)
	if err != nil {
		return grammar.Frag{}, err
	}
	return c.boundedNumber(lo, hi, !whole)
}

// boundedNumber matches the integers, or with fraction the numbers,
// inside lo and hi.
func (c *compiler) boundedNumber(lo, hi numBound, fraction bool) (grammar.Frag, error) {
	b := c.b
	var alts []grammar.Frag
	neg := func(r *big.Rat) *big.Rat { return new(big.Rat).Neg(r) }
	// x >= 0: the magnitude's bounds are x's own, from 0 when x has none
	// below zero.
	if !hi.set || hi.value.Sign() > 0 || hi.value.Sign() == 0 && hi.inclusive {
		mlo := numBound{set: true, value: new(big.Rat), inclusive: true}
		if lo.set && lo.value.Sign() >= 0 {
			mlo = lo
		}
		f, err := c.magnitude(mlo, hi, fraction)
		if err != nil {
			return grammar.Frag{}, err
		}
		alts = append(alts, f)
	}
	// x < 0: the magnitude -x has x's bounds swapped and negated, and is
	// never zero, so "-0" is never written.
	if !lo.set || lo.value.Sign() < 0 {
		mlo := numBound{set: true, value: new(big.Rat), inclusive: false}
		if hi.set && hi.value.Sign() < 0 {
			mlo = numBound{set: true, value: neg(hi.value), inclusive: hi.inclusive}
		}
		var mhi numBound
		if lo.set {
			mhi = numBound{set: true, value: neg(lo.value), inclusive: lo.inclusive}
		}
		f, err := c.magnitude(mlo, mhi, fraction)
		if err != nil {
			return grammar.Frag{}, err
		}
		alts = append(alts, b.Seq(b.Lit("-"), f))
	}
	return b.Alt(alts...), nil
}

// splitBound is a non-negative bound's integer part and its fraction's
// digits ("" for a whole value): exactly, trailing zeros cut, where they
// are at most maxFracDigits+1; else the first maxFracDigits+1 of them,
// which compare with every fraction the grammar writes as the whole would
// (no written fraction equals the bound, and where its digits are the
// bound's first ones it is below).
func splitBound(r *big.Rat) (uint64, string) {
	q := floor(r)
	whole := q.Num().Uint64()
	rest := new(big.Rat).Sub(r, q)
	if rest.Sign() == 0 {
		return whole, ""
	}
	scaled := new(big.Rat).Mul(rest, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(maxFracDigits+1), nil)))
	t := new(big.Int).Quo(scaled.Num(), scaled.Denom()).String()
	digits := strings.Repeat("0", maxFracDigits+1-len(t)) + t
	if scaled.IsInt() {
		digits = strings.TrimRight(digits, "0")
	}
	return whole, digits
}

// magnitude matches the non-negative values between lo (set) and hi, as
// an integer part and, with fraction, an optional fraction.
func (c *compiler) magnitude(lo, hi numBound, fraction bool) (grammar.Frag, error) {
	b := c.b
	if !fraction { // an integer's bounds are whole
		bottom, top := lo.value.Num().Uint64(), maxMagnitude
		if !lo.inclusive {
			bottom++
		}
		if hi.set {
			top = hi.value.Num().Uint64()
			if !hi.inclusive {
				if top == 0 {
					return b.Alt(), nil
				}
				top--
			}
		}
		return c.intRange(bottom, top), nil
	}
	bottom, loFrac := splitBound(lo.value)
	top, hiFrac := maxMagnitude, ""
	if hi.set {
		top, hiFrac = splitBound(hi.value)
	}
	if hi.set && bottom == top {
		f, err := c.intersect([]func() (grammar.Frag, error){
			func() (grammar.Frag, error) { return c.fracAbove(loFrac, lo.inclusive), nil },
			func() (grammar.Frag, error) { return c.fracBelow(hiFrac, hi.inclusive), nil },
		})
		return b.Seq(c.intRange(bottom, bottom), f), err
	}
	anyFrac := b.Opt(b.Seq(b.Lit("."), c.digits(1, maxFracDigits)))
	alts := []grammar.Frag{b.Seq(c.intRange(bottom, bottom), c.fracAbove(loFrac, lo.inclusive))}
	switch {
	case !hi.set && bottom < top:
		alts = append(alts, b.Seq(c.intRange(bottom+1, top), anyFrac))
	case hi.set && bottom+1 <= top-1:
		alts = append(alts, b.Seq(c.intRange(bottom+1, top-1), anyFrac))
	}
	if hi.set {
		alts = append(alts, b.Seq(c.intRange(top, top), c.fracBelow(hiFrac, hi.inclusive)))
	}
	return b.Alt(alts...), nil
}

// fracAbove matches the fractions (none, or a dot and digits) of the
// values whose fraction is above the digits bound, or equal where
// inclusive.
func (c *compiler) fracAbove(bound string, inclusive bool) grammar.Frag {
	b := c.b
	// some: at most n digits, one of them above zero.
	some := func(n int) grammar.Frag {
		return b.Seq(b.Repeat(0, n-1, func() grammar.Frag { return b.Lit("0") }), b.Ranges('1', '9'), c.digits(0, n-1))
	}
	if bound == "" {
		if inclusive {
			return b.Opt(b.Seq(b.Lit("."), c.digits(1, maxFracDigits)))
		}
		return b.Seq(b.Lit("."), some(maxFracDigits))
	}
	dot := b.Lit(".")
	end := b.Node()
	at := dot.End
	for i := 0; i < len(bound) && i < maxFracDigits; i++ {
		if bound[i] < '9' { // a digit above the bound's: any digits after
			rest := c.digits(0, maxFracDigits-i-1)
			b.ByteEdge(at, bound[i]+1, '9', rest.Start)
			b.Eps(rest.End, end)
		}
		next := b.Node()
		b.ByteEdge(at, bound[i], bound[i], next)
		at = next
	}
	if len(bound) <= maxFracDigits { // every digit the bound's
		left := maxFracDigits - len(bound)
		switch {
		case inclusive:
			rest := c.digits(0, left)
			b.Eps(at, rest.Start)
			b.Eps(rest.End, end)
		case left > 0:
			rest := some(left)
			b.Eps(at, rest.Start)
			b.Eps(rest.End, end)
		}
	}
	return grammar.Frag{Start: dot.Start, End: end}
}

// fracBelow matches the fractions (none, or a dot and digits) of the
// values whose fraction is below the digits bound, or equal where
// inclusive.
func (c *compiler) fracBelow(bound string, inclusive bool) grammar.Frag {
	b := c.b
	zeros := func(n int) grammar.Frag { return b.Repeat(0, n, func() grammar.Frag { return b.Lit("0") }) }
	if bound == "" {
		if inclusive {
			return b.Opt(b.Seq(b.Lit("."), b.Repeat(1, maxFracDigits, func() grammar.Frag { return b.Lit("0") })))
		}
		return b.Alt()
	}
	start, end := b.Node(), b.Node()
	b.Eps(start, end) // no fraction: below any fraction above zero
	dot := b.Lit(".")
	b.Eps(start, dot.Start)
	at := dot.End
	for i := 0; i < len(bound) && i < maxFracDigits; i++ {
		if i > 0 { // the digits so far, then nothing: below the bound
			b.Eps(at, end)
		}
		if bound[i] > '0' { // a digit below the bound's: any digits after
			rest := c.digits(0, maxFracDigits-i-1)
			b.ByteEdge(at, '0', bound[i]-1, rest.Start)
			b.Eps(rest.End, end)
		}
		next := b.Node()
		b.ByteEdge(at, bound[i], bound[i], next)
		at = next
	}
	if len(bound) > maxFracDigits { // as many digits as written, all the bound's: below it
		b.Eps(at, end)
	}
	if inclusive && len(bound) <= maxFracDigits { // every digit the bound's, zeros after
		rest := zeros(maxFracDigits - len(bound))
		b.Eps(at, rest.Start)
		b.Eps(rest.End, end)
	}
	return grammar.Frag{Start: start, End: end}
}

// intRange matches the decimal integers from lo to hi, without leading
// zeros.
func (c *compiler) intRange(lo, hi uint64) grammar.Frag {
	b := c.b
	if lo > hi {
		return b.Alt()
	}
	var alts []grammar.Frag
	for n := len(strconv.FormatUint(lo, 10)); n <= len(strconv.FormatUint(hi, 10)); n++ {
		first, last := uint64(0), uint64(math.Pow10(n))-1
		if n > 1 {
			first = uint64(math.Pow10(n - 1))
		}
		from, to := max(lo, first), min(hi, last)
		if from > to {
			continue
		}
		alts = append(alts, c.digitRange(pad(from, n), pad(to, n)))
	}
	return b.Alt(alts...)
}

func pad(n uint64, width int) string {
	s := strconv.FormatUint(n, 10)
	return strings.Repeat("0", width-len(s)) + s
}

// digitRange matches the digit strings of lo's length from lo to hi.
func (c *compiler) digitRange(lo, hi string) grammar.Frag {
	b := c.b
	switch {
	case lo == "":
		return b.Empty()
	case lo == hi:
		return b.Lit(lo)
	case lo[0] == hi[0]:
		return b.Seq(b.Lit(lo[:1]), c.digitRange(lo[1:], hi[1:]))
	}
	rest := len(lo) - 1
	if strings.Trim(lo[1:], "0") == "" && strings.Trim(hi[1:], "9") == "" {
		return b.Seq(b.Ranges(lo[0], hi[0]), c.digits(rest, rest))
	}
	alts := []grammar.Frag{b.Seq(b.Lit(lo[:1]), c.digitRange(lo[1:], strings.Repeat("9", rest)))}
	if lo[0]+1 <= hi[0]-1 {
		alts = append(alts, b.Seq(b.Ranges(lo[0]+1, hi[0]-1), c.digits(rest, rest)))
	}
	alts = append(alts, b.Seq(b.Lit(hi[:1]), c.digitRange(strings.Repeat("0", rest), hi[1:])))
	return b.Alt(alts...)
}

// literal matches the JSON texts equal to v: the same members (in any
// order, unless strict or more than maxAnyOrder), whitespace between
// tokens as anywhere in an answer, and numbers by value (numberValue).
func (c *compiler) literal(v *value) grammar.Frag {
	b := c.b
	switch v.kind {
	case 'o', 'a':
		if v.kind == 'o' && !c.strict && len(v.obj) > 1 && len(v.obj) <= maxAnyOrder {
			return c.literalObject(v)
		}
		open, closing, n := "{", "}", len(v.obj)
		if v.kind == 'a' {
			open, closing, n = "[", "]", len(v.arr)
		}
		if n == 0 {
			return b.Seq(b.Lit(open), c.ws(), b.Lit(closing))
		}
		parts := []grammar.Frag{b.Lit(open), c.ws()}
		for i := range n {
			if i > 0 {
				parts = append(parts, c.ws(), b.Lit(","), c.ws())
			}
			if v.kind == 'a' {
				parts = append(parts, c.literal(v.arr[i]))
				continue
			}
			var key bytes.Buffer
			writeString(&key, v.obj[i].key)
			parts = append(parts, b.Lit(key.String()), c.ws(), b.Lit(":"), c.ws(), c.literal(v.obj[i].val))
		}
		return b.Seq(append(parts, c.ws(), b.Lit(closing))...)
	case 'n':
		return c.numberValue(v.num)
	}
	var buf bytes.Buffer
	v.encode(&buf)
	return b.Lit(buf.String())
}

// literalObject matches the object v with its members in any order.
func (c *compiler) literalObject(v *value) grammar.Frag {
	b := c.b
	rules := make([]int32, len(v.obj))
	for i, m := range v.obj {
		var key bytes.Buffer
		writeString(&key, m.key)
		rules[i] = b.NewRule("literal member " + key.String())
		b.Define(rules[i], b.Seq(b.Lit(key.String()), c.ws(), b.Lit(":"), c.ws(), c.literal(m.val)))
	}
	ch := newMemberChain(c, 0, -1)
	whole := uint64(1)<<len(rules) - 1
	ch.anyOrder(rules, func(set uint64) bool { return set == whole })
	return ch.close()
}

// numberValue matches the number n's value in its shortest form: -2 for
// -2.0, 1.5 for 1.50, and, unless strict, with zeros after it as well
// (-2.0, 1.50): JSON Schema compares numbers by value. A strict schema's
// answer keeps the shortest form, as a typed client (Go's encoding/json,
// Pydantic's strict int) reads 1.0 as no integer.
func (c *compiler) numberValue(n json.Number) grammar.Frag {
	text := numberText(n.String())
	if c.strict {
		return c.b.Lit(text)
	}
	if strings.ContainsAny(text, ".eE") {
		if strings.Contains(text, ".") && !strings.ContainsAny(text, "eE") {
			return c.b.Seq(c.b.Lit(text), c.zeros(maxFracDigits-1))
		}
		return c.b.Lit(text)
	}
	return c.wholeFraction(c.b.Lit(text))
}

// wholeFraction is f, an integer, followed, unless strict, by an optional
// fraction of zeros: JSON Schema's integer is any number with no
// fraction, 1.0 as well as 1, from draft 6 on; draft 4's is written
// without one.
func (c *compiler) wholeFraction(f grammar.Frag) grammar.Frag {
	if c.strict || c.draft == draft4 {
		return f
	}
	return c.b.Seq(f, c.b.Opt(c.b.Seq(c.b.Lit(".0"), c.zeros(maxFracDigits-1))))
}

// zeros matches up to n zeros.
func (c *compiler) zeros(n int) grammar.Frag {
	return c.b.Repeat(0, n, func() grammar.Frag { return c.b.Lit("0") })
}

// numberText is the number n's shortest form (n itself where it has more
// fraction digits than an answer may write).
func numberText(n string) string {
	r, ok := new(big.Rat).SetString(n)
	if !ok {
		return n
	}
	if r.IsInt() {
		return r.Num().String()
	}
	for digits := 1; digits <= maxFracDigits; digits++ {
		if text := r.FloatString(digits); mustRat(text).Cmp(r) == 0 {
			return text
		}
	}
	return n
}

func mustRat(s string) *big.Rat {
	r, _ := new(big.Rat).SetString(s)
	return r
}

// maxMultipleOf bounds multipleOf: the automaton has a state for each
// remainder at each of an integer's digits.
const maxMultipleOf = 1000

// multiple compiles a number (an integer where whole) that is a multiple
// of s's multipleOf, within s's bounds: an automaton of the remainder
// modulo the multipleOf's digits, taken with the bounds' automaton where
// there are bounds. multipleOf m is read exactly, as p/10^k for whole p
// up to maxMultipleOf (1.5 is 15/10): an integer n is a multiple where
// p/gcd(p, 10^k) divides it; a decimal x where x·10^k is whole and p
// divides it, which is what the suite's cases say (0.0075 is a multiple
// of 0.0001, though not in doubles). Where m is whole and the type is
// number, only its whole multiples are written: narrower, but sound.
// fraction tells that the automaton writes its own fraction, so that the
// caller adds none.
func (c *compiler) multiple(s *value, path string, whole bool) (f grammar.Frag, fraction bool, err error) {
	mv := s.get("multipleOf")
	r, ok := mv.rat()
	if mv.kind != 'n' || !ok || r.Sign() <= 0 {
		return grammar.Frag{}, false, genq.Errorf(genq.Invalid, "at %s: multipleOf must be a number above 0", path)
	}
	p, k, ok := decimalParts(r)
	if ok && whole {
		p, k = new(big.Int).Quo(p, new(big.Int).GCD(nil, nil, p, pow10(k))), 0
	}
	if !ok || !p.IsInt64() || p.Int64() > maxMultipleOf {
		return grammar.Frag{}, false, genq.Errorf(genq.Invalid, "at %s: multipleOf %s is not supported: genq enforces multipleOf p/10^k with p whole up to %d and k up to %d (for integers, p/gcd(p, 10^k) up to %d)", path, mv.num, maxMultipleOf, maxFracDigits, maxMultipleOf)
	}
	m := int(p.Int64())
	build := func() (grammar.Frag, error) { return c.multipleOf(m), nil }
	if k > 0 {
		build = func() (grammar.Frag, error) { return c.decimalMultipleOf(m, k), nil }
	}
	if !hasBounds(s) {
		f, err := build()
		return f, k > 0, err
	}
	f, err = c.intersect([]func() (grammar.Frag, error){func() (grammar.Frag, error) { return c.bounded(s, path, k == 0) }, build})
	if err != nil {
		return grammar.Frag{}, false, genq.WrapError(genq.ErrorCode(err), err, "at "+path+": "+genq.ErrorMessage(err))
	}
	return f, k > 0, nil
}

// fractionalMultiple tells whether s's multipleOf has multiples with a
// fraction among the numbers (whole: integers) multiple writes.
func fractionalMultiple(s *value, whole bool) bool {
	r, ok := s.get("multipleOf").rat()
	if whole || !ok {
		return false
	}
	_, k, ok := decimalParts(r)
	return ok && k > 0
}

// decimalParts reads r as p/10^k, p whole and k the least that makes it
// so, up to maxFracDigits; ok is false where r has no such form (1/3).
func decimalParts(r *big.Rat) (p *big.Int, k int, ok bool) {
	for k := 0; k <= maxFracDigits; k++ {
		x := new(big.Rat).Mul(r, new(big.Rat).SetInt(pow10(k)))
		if x.IsInt() {
			return x.Num(), k, true
		}
	}
	return nil, 0, false
}

func pow10(k int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil)
}

// decimalMultipleOf matches the decimals x, without exponent, that are
// multiples of m/10^k: x·10^k whole (at most k fraction digits, then
// zeros) and a multiple of m. The remainder modulo m of the digits read,
// the point skipped, is carried digit by digit; a number that ends j
// fraction digits short of k has its remainder times 10^j.
func (c *compiler) decimalMultipleOf(m, k int) grammar.Frag {
	b := c.b
	start, end := b.Node(), b.Node()
	minus := b.Opt(b.Lit("-"))
	b.Eps(start, minus.Start)
	pow := make([]int, k+1) // pow[j] = 10^j mod m
	pow[0] = 1 % m
	for j := 1; j <= k; j++ {
		pow[j] = pow[j-1] * 10 % m
	}
	// table[p][r] is the node after p digits with remainder r: the
	// integer part's up to maxIntDigits, then the fraction's, k at most.
	table := map[[2]int]int32{}
	state := func(p, r, frac int) int32 {
		key := [2]int{p*(k+2) + frac, r}
		if n, ok := table[key]; ok {
			return n
		}
		n := b.Node()
		table[key] = n
		if r*pow[k-frac]%m == 0 {
			b.Eps(n, end)
		}
		return n
	}
	point := map[int]int32{} // after the integer part with remainder r and "."
	afterPoint := func(r int) int32 {
		if n, ok := point[r]; ok {
			return n
		}
		n := b.Node()
		point[r] = n
		for d := range 10 {
			b.ByteEdge(n, byte('0'+d), byte('0'+d), state(0, (10*r+d)%m, 1))
		}
		return n
	}
	zero := state(0, 0, 0)
	b.ByteEdge(minus.End, '0', '0', zero)
	for d := 1; d <= 9; d++ {
		b.ByteEdge(minus.End, byte('0'+d), byte('0'+d), state(1, d%m, 0))
	}
	for p := 1; p < maxIntDigits; p++ {
		for r := range m {
			if n, ok := table[[2]int{p * (k + 2), r}]; ok {
				for d := range 10 {
					b.ByteEdge(n, byte('0'+d), byte('0'+d), state(p+1, (10*r+d)%m, 0))
				}
			}
		}
	}
	for p := 0; p <= maxIntDigits; p++ {
		for r := range m {
			if n, ok := table[[2]int{p * (k + 2), r}]; ok {
				b.ByteEdge(n, '.', '.', afterPoint(r))
			}
		}
	}
	for frac := 1; frac < k; frac++ {
		for r := range m {
			if n, ok := table[[2]int{frac, r}]; ok {
				for d := range 10 {
					b.ByteEdge(n, byte('0'+d), byte('0'+d), state(0, (10*r+d)%m, frac+1))
				}
			}
		}
	}
	if n, ok := table[[2]int{k, 0}]; ok && k < maxFracDigits {
		zeros := c.zeros(maxFracDigits - k) // the same value, written longer
		b.Eps(n, zeros.Start)
		b.Eps(zeros.End, end)
	}
	return grammar.Frag{Start: start, End: end}
}

// multipleOf matches the decimal integers that are multiples of m: 0, or
// an optional minus, a digit 1 to 9 and up to maxIntDigits-1 more, the
// remainder modulo m carried digit by digit.
func (c *compiler) multipleOf(m int) grammar.Frag {
	b := c.b
	start, end := b.Node(), b.Node()
	zero := b.Lit("0")
	b.Eps(start, zero.Start)
	b.Eps(zero.End, end)
	minus := b.Opt(b.Lit("-"))
	b.Eps(start, minus.Start)
	states := make([][]int32, maxIntDigits+1) // states[p][r]: p digits read, remainder r
	state := func(p, r int) int32 {
		if states[p] == nil {
			states[p] = make([]int32, m)
			for i := range states[p] {
				states[p][i] = -1
			}
		}
		if states[p][r] < 0 {
			states[p][r] = b.Node()
			if r == 0 {
				b.Eps(states[p][r], end)
			}
		}
		return states[p][r]
	}
	for d := 1; d <= 9; d++ {
		b.ByteEdge(minus.End, byte('0'+d), byte('0'+d), state(1, d%m))
	}
	for p := 1; p < maxIntDigits; p++ {
		for r := range m {
			if states[p] == nil || states[p][r] < 0 {
				continue
			}
			for d := range 10 {
				b.ByteEdge(states[p][r], byte('0'+d), byte('0'+d), state(p+1, (10*r+d)%m))
			}
		}
	}
	return grammar.Frag{Start: start, End: end}
}
