package grammar

import (
	"math"
	"strconv"
	"strings"
)

// Numeric bounds of JSON Schemas (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum). A bound is read exactly from its JSON text, so that
// zod's int bounds (±9007199254740991, beyond a float64's exact integers
// for their neighbours) and decimal bounds (0.1) mean what they say. The
// grammars are built digit by digit (digitRange, natRange and the fraction
// sets below), so their size grows with the number of digits of the
// bounds, never with the width of the range.

// decimal is an exact decimal number: the sign, the integer part of the
// magnitude and the digits after the point without trailing zeros. Zero is
// never negative.
type decimal struct {
	neg  bool
	ip   uint64
	frac string
}

// maxFracDigits bounds the fraction digits a bound keeps; longer fractions
// are rounded inward (the range only shrinks).
const maxFracDigits = 30

// maxMagnitude is the largest integer part of a bound: 2^63, so that both
// ends of int64 are bounds.
const maxMagnitude = 1 << 63

// numBound is one end of a numeric range.
type numBound struct {
	set  bool
	v    decimal
	excl bool
}

// parseDecimal reads the JSON number text s exactly. ok is false when its
// integer part exceeds maxMagnitude (the bound is beyond the ranges the
// grammars write). up says which way to round a fraction longer than
// maxFracDigits: toward +Inf (true) or -Inf, and exact reports that no
// rounding happened.
func parseDecimal(s string, up bool) (d decimal, exact, ok bool) {
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		es := s[i+1:]
		e, err := strconv.Atoi(strings.TrimPrefix(es, "+"))
		switch {
		case strings.HasPrefix(es, "-") && (err != nil || e < -1000):
			// A fraction that rounds to zero, or to one unit of its
			// last kept digit.
			exp = -1000
		case err != nil || e > 1000:
			return d, false, false
		default:
			exp = e
		}
		s = s[:i]
	}
	digits, point := s, len(s)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		digits, point = s[:i]+s[i+1:], i
	}
	point += exp
	var ip, frac string
	switch {
	case point <= 0:
		ip, frac = "", strings.Repeat("0", -point)+digits
	case point >= len(digits):
		ip = digits + strings.Repeat("0", point-len(digits))
	default:
		ip, frac = digits[:point], digits[point:]
	}
	ip = strings.TrimLeft(ip, "0")
	frac = strings.TrimRight(frac, "0")
	if len(ip) > 19 {
		return d, false, false
	}
	if ip != "" {
		n, err := strconv.ParseUint(ip, 10, 64)
		if err != nil || n > maxMagnitude {
			return d, false, false
		}
		d.ip = n
	}
	exact = true
	if len(frac) > maxFracDigits {
		exact = false
		frac = frac[:maxFracDigits]
		// Truncation moves the magnitude toward zero: toward -Inf for a
		// positive number, +Inf for a negative one. The other way takes a
		// unit of the last digit.
		if up != d.neg {
			var carry bool
			frac, carry = incDigits(frac)
			if carry {
				d.ip++
			}
		}
		frac = strings.TrimRight(frac, "0")
	}
	d.frac = frac
	if d.ip == 0 && d.frac == "" {
		d.neg = false
	}
	return d, exact, d.ip <= maxMagnitude
}

// incDigits adds one unit of the last digit to the digit string s, reporting
// a carry out of its first digit.
func incDigits(s string) (string, bool) {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b), false
		}
		b[i] = '0'
	}
	return string(b), true
}

// cmpMag compares the magnitudes of a and b.
func cmpMag(a, b decimal) int {
	switch {
	case a.ip < b.ip:
		return -1
	case a.ip > b.ip:
		return 1
	}
	return cmpFrac(a.frac, b.frac)
}

// cmpFrac compares two fraction digit strings as the decimals 0.a and 0.b.
func cmpFrac(a, b string) int {
	n := max(len(a), len(b))
	a += strings.Repeat("0", n-len(a))
	b += strings.Repeat("0", n-len(b))
	return strings.Compare(a, b)
}

// cmpDecimal compares a and b.
func cmpDecimal(a, b decimal) int {
	switch {
	case a.neg && !b.neg:
		return -1
	case !a.neg && b.neg:
		return 1
	case a.neg:
		return -cmpMag(a, b)
	}
	return cmpMag(a, b)
}

// schemaBounds reads the four bound keywords of s into the tightest lower
// and upper bound; given reports whether s has any. A bound beyond ±2^63 on
// the side that does not restrict the grammars (a minimum below it, a
// maximum above it: zod's float64 limits) is dropped; on the other side it
// is an error.
func schemaBounds(s *jsonValue, path string) (lo, hi numBound, given bool, err error) {
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v := s.get(k)
		if v == nil {
			continue
		}
		if v.kind != jsonNumber {
			return lo, hi, false, schemaErr(pathJoin(path, k), "%s must be a number", k)
		}
		given = true
		lower := strings.HasSuffix(k, "inimum")
		d, exact, ok := parseDecimal(string(v.num), lower)
		if !ok {
			if strings.HasPrefix(string(v.num), "-") == lower {
				continue
			}
			return lo, hi, false, schemaErr(pathJoin(path, k), "%s %s is out of the supported range: bounds must lie within ±2^63", k, v.num)
		}
		// A rounded bound lies strictly inside the original one.
		b := numBound{set: true, v: d, excl: strings.HasPrefix(k, "exclusive") && exact}
		if lower {
			if c := cmpDecimal(b.v, lo.v); !lo.set || c > 0 || c == 0 && b.excl {
				lo = b
			}
		} else if c := cmpDecimal(b.v, hi.v); !hi.set || c < 0 || c == 0 && b.excl {
			hi = b
		}
	}
	return lo, hi, given, nil
}

// emptyRange reports whether no number lies between lo and hi.
func emptyRange(lo, hi numBound) bool {
	if !lo.set || !hi.set {
		return false
	}
	c := cmpDecimal(lo.v, hi.v)
	return c > 0 || c == 0 && (lo.excl || hi.excl)
}

func (c *schemaConverter) number(s *jsonValue, path string) (string, error) {
	lo, hi, given, err := schemaBounds(s, path)
	if err != nil {
		return "", err
	}
	if !given {
		return c.prim("number"), nil
	}
	if emptyRange(lo, hi) {
		return "", schemaErr(path, "number range is empty")
	}
	return "(" + strings.Join(decimalRange(lo, hi), " | ") + ") " + c.prim("space"), nil
}

// decimalRange returns alternatives for the decimals without exponent
// between lo and hi (unset: unbounded; the range not empty): the
// non-negative ones, then "-" and the magnitudes of the negative ones.
func decimalRange(lo, hi numBound) []string {
	var alts []string
	if !hi.set || !hi.v.neg {
		plo := numBound{set: true}
		if lo.set && !lo.v.neg {
			plo = lo
		}
		alts = append(alts, magnitudeRange(plo, hi)...)
	}
	if !lo.set || lo.v.neg {
		// x = -m with m > 0: m above |hi| when hi < 0, below |lo|.
		mlo := numBound{set: true, excl: true}
		if hi.set && hi.v.neg {
			mlo = numBound{set: true, v: decimal{ip: hi.v.ip, frac: hi.v.frac}, excl: hi.excl}
		}
		var mhi numBound
		if lo.set {
			mhi = numBound{set: true, v: decimal{ip: lo.v.ip, frac: lo.v.frac}, excl: lo.excl}
		}
		for _, a := range magnitudeRange(mlo, mhi) {
			alts = append(alts, `"-" `+a)
		}
	}
	return alts
}

// magnitudeRange returns alternatives for the non-negative decimals I.F
// between lo (set) and hi (unset: unbounded), both non-negative: the
// integer part decides, except at the integer parts of the bounds, where
// the fraction is compared digit by digit.
func magnitudeRange(lo, hi numBound) []string {
	if emptyRange(lo, hi) {
		return nil
	}
	lit := func(v uint64) string { return gbnfLiteral(strconv.FormatUint(v, 10)) }
	if hi.set && lo.v.ip == hi.v.ip {
		f, ok := fracExpr(fracBetween(lo.v.frac, lo.excl, hi.v.frac, hi.excl))
		if !ok {
			return nil
		}
		return []string{strings.TrimSpace(lit(lo.v.ip) + " " + f)}
	}
	var alts []string
	if f, ok := fracExpr(fracAtLeast(lo.v.frac, lo.excl)); ok {
		alts = append(alts, strings.TrimSpace(lit(lo.v.ip)+" "+f))
	}
	const anyFrac = `("." [0-9]{1,16})?`
	switch {
	case !hi.set:
		alts = append(alts, "("+natRange(lo.v.ip+1, nil)+") "+anyFrac)
	case lo.v.ip+1 < hi.v.ip:
		h := hi.v.ip - 1
		alts = append(alts, "("+natRange(lo.v.ip+1, &h)+") "+anyFrac)
	}
	if hi.set {
		if f, ok := fracExpr(fracAtMost(hi.v.frac, hi.excl)); ok {
			alts = append(alts, strings.TrimSpace(lit(hi.v.ip)+" "+f))
		}
	}
	return alts
}

// digitSet is a set of fraction digit strings S (the digits after the
// point, read as 0.S): the non-empty ones match one of alts, and empty says
// whether the empty string (no fraction, 0) belongs to it.
type digitSet struct {
	alts  []string
	empty bool
}

// Tails of fraction digit strings. Each is bounded, so that a generated
// fraction has at most about 2*maxFracDigits digits.
const (
	anyDigits     = `[0-9]{0,15}`
	nonzeroDigits = `"0"{0,15} [1-9] [0-9]{0,15}`
)

// fracExpr writes a fraction part for ds: "." and a digit string, optional
// when ds holds the empty string. ok is false when ds is empty.
func fracExpr(ds digitSet) (expr string, ok bool) {
	if len(ds.alts) == 0 {
		return "", ds.empty
	}
	e := `"." (` + strings.Join(ds.alts, " | ") + ")"
	if ds.empty {
		return "(" + e + ")?", true
	}
	return e, true
}

// prefixed returns the digit strings d+S for S in ds ("" when there is none).
func prefixed(d byte, ds digitSet) string {
	l := gbnfLiteral(string(d))
	switch {
	case len(ds.alts) == 0 && !ds.empty:
		return ""
	case len(ds.alts) == 0:
		return l
	case ds.empty:
		return l + " (" + strings.Join(ds.alts, " | ") + ")?"
	}
	return l + " (" + strings.Join(ds.alts, " | ") + ")"
}

// digitClass returns the character class of the digits a to b.
func digitClass(a, b byte) string {
	if a == b {
		return "[" + string(a) + "]"
	}
	return "[" + string(a) + "-" + string(b) + "]"
}

// fracAtLeast returns the S with 0.S >= 0.f (> when excl).
func fracAtLeast(f string, excl bool) digitSet {
	if f == "" {
		if excl {
			return digitSet{alts: []string{nonzeroDigits}}
		}
		return digitSet{alts: []string{"[0-9]{1,16}"}, empty: true}
	}
	var ds digitSet
	if d := f[0]; d < '9' {
		ds.alts = append(ds.alts, digitClass(d+1, '9')+" "+anyDigits)
	}
	if p := prefixed(f[0], fracAtLeast(f[1:], excl)); p != "" {
		ds.alts = append(ds.alts, p)
	}
	return ds
}

// fracAtMost returns the S with 0.S <= 0.f (< when excl).
func fracAtMost(f string, excl bool) digitSet {
	if f == "" {
		if excl {
			return digitSet{}
		}
		return digitSet{alts: []string{`"0"{1,16}`}, empty: true}
	}
	// f has a non-zero digit (trailing zeros are trimmed): 0 < 0.f.
	ds := digitSet{empty: true}
	if d := f[0]; d > '0' {
		ds.alts = append(ds.alts, digitClass('0', d-1)+" "+anyDigits)
	}
	if p := prefixed(f[0], fracAtMost(f[1:], excl)); p != "" {
		ds.alts = append(ds.alts, p)
	}
	return ds
}

// fracBetween returns the S with 0.a <= 0.S <= 0.b (strict at an
// exclusive end).
func fracBetween(a string, aExcl bool, b string, bExcl bool) digitSet {
	switch c := cmpFrac(a, b); {
	case c > 0:
		return digitSet{}
	case c == 0:
		if aExcl || bExcl {
			return digitSet{}
		}
		if a == "" {
			return digitSet{alts: []string{`"0"{1,16}`}, empty: true}
		}
		return digitSet{alts: []string{gbnfLiteral(a) + ` "0"{0,15}`}}
	}
	// 0.a < 0.b, so b has a first digit.
	a1, ar := byte('0'), ""
	if a != "" {
		a1, ar = a[0], a[1:]
	}
	b1, br := b[0], b[1:]
	ds := digitSet{empty: a == "" && !aExcl}
	add := func(s string) {
		if s != "" {
			ds.alts = append(ds.alts, s)
		}
	}
	if a1 == b1 {
		add(prefixed(a1, fracBetween(ar, aExcl, br, bExcl)))
		return ds
	}
	add(prefixed(a1, fracAtLeast(ar, aExcl)))
	if a1+1 < b1 {
		add(digitClass(a1+1, b1-1) + " " + anyDigits)
	}
	add(prefixed(b1, fracAtMost(br, bExcl)))
	return ds
}

func (c *schemaConverter) integer(s *jsonValue, name, path string) (string, error) {
	lo, hi, given, err := schemaBounds(s, path)
	if err != nil {
		return "", err
	}
	if !given {
		return c.prim("integer"), nil
	}
	var lp, hp *int64
	if lo.set {
		n, ok := ceilInt(lo)
		if !ok {
			return "", schemaErr(path, "integer range is empty: no int64 is above the minimum")
		}
		lp = &n
	}
	if hi.set {
		n, ok := floorInt(hi)
		if !ok {
			return "", schemaErr(path, "integer range is empty: no int64 is below the maximum")
		}
		hp = &n
	}
	if lp != nil && hp != nil && *lp > *hp {
		return "", schemaErr(path, "integer range [%d, %d] is empty", *lp, *hp)
	}
	return "(" + intRange(lp, hp) + ") " + c.prim("space"), nil
}

// ceilInt returns the least int64 that lower bound b admits; ok is false
// when there is none.
func ceilInt(b numBound) (int64, bool) {
	m := b.v.ip // at most 2^63
	up := b.v.frac != "" || b.excl
	if b.v.neg {
		// -m.f rounds up to -m; exclusive -m excludes it.
		if b.v.frac == "" && b.excl {
			m--
		}
		return negate(m), true
	}
	if up {
		m++
	}
	if m > math.MaxInt64 {
		return 0, false
	}
	return int64(m), true
}

// floorInt returns the greatest int64 that upper bound b admits; ok is
// false when there is none.
func floorInt(b numBound) (int64, bool) {
	m := b.v.ip
	if !b.v.neg {
		if b.v.frac == "" && b.excl {
			return int64(min(m, math.MaxInt64+1) - 1), true
		}
		return int64(min(m, math.MaxInt64)), true
	}
	if b.v.frac != "" || b.excl {
		m++
	}
	if m > maxMagnitude {
		return 0, false
	}
	return negate(m), true
}

// negate returns -m for a magnitude m <= 2^63.
func negate(m uint64) int64 {
	if m == maxMagnitude {
		return math.MinInt64
	}
	return -int64(m)
}

// maxIntDigits bounds unbounded integers, as integral-part does.
const maxIntDigits = 16

// intRange returns a GBNF expression for the decimal integers in [lo, hi]
// (nil: unbounded), without leading zeros and without "-0".
func intRange(lo, hi *int64) string {
	var alts []string
	// Negative part: "-" followed by magnitudes in [max(1,-hi), -lo].
	if lo == nil || *lo < 0 {
		magLo := uint64(1)
		if hi != nil && *hi < 0 {
			magLo = negMag(*hi)
		}
		var magHi *uint64
		if lo != nil {
			m := negMag(*lo)
			magHi = &m
		}
		alts = append(alts, `"-" (`+natRange(magLo, magHi)+`)`)
	}
	// Non-negative part: [max(0,lo), hi].
	if hi == nil || *hi >= 0 {
		from := uint64(0)
		if lo != nil && *lo > 0 {
			from = uint64(*lo)
		}
		var to *uint64
		if hi != nil {
			h := uint64(*hi)
			to = &h
		}
		alts = append(alts, natRange(from, to))
	}
	return strings.Join(alts, " | ")
}

// negMag returns -v for v < 0 as an unsigned magnitude (math.MinInt64
// included).
func negMag(v int64) uint64 { return uint64(-(v + 1)) + 1 }

// natRange returns a GBNF expression for the natural numbers in [lo, hi]
// (hi nil: up to maxIntDigits digits, or lo's digits when it has more).
func natRange(lo uint64, hi *uint64) string {
	los := strconv.FormatUint(lo, 10)
	var alts []string
	if hi == nil {
		alts = append(alts, digitRange(los, strings.Repeat("9", len(los))))
		if len(los) < maxIntDigits {
			alts = append(alts, "[1-9] [0-9]"+repeatSuffix(len(los), maxIntDigits-1))
		}
		return strings.Join(alts, " | ")
	}
	his := strconv.FormatUint(*hi, 10)
	for n := len(los); n <= len(his); n++ {
		a, b := "1"+strings.Repeat("0", n-1), strings.Repeat("9", n)
		if n == 1 {
			a = "0"
		}
		if n == len(los) {
			a = los
		}
		if n == len(his) {
			b = his
		}
		alts = append(alts, digitRange(a, b))
	}
	return strings.Join(alts, " | ")
}
