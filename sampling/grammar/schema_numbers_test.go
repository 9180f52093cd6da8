package grammar

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/testseed"
)

// ratOf parses a JSON number exactly.
func ratOf(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("big.Rat.SetString(%q) failed", s)
	}
	return r
}

// ratBounds is the independent expectation of a schema's range: its four
// bound keywords as exact rationals.
type ratBounds struct {
	min, exMin, max, exMax *big.Rat
}

func (b ratBounds) contains(x *big.Rat) bool {
	return (b.min == nil || x.Cmp(b.min) >= 0) && (b.exMin == nil || x.Cmp(b.exMin) > 0) &&
		(b.max == nil || x.Cmp(b.max) <= 0) && (b.exMax == nil || x.Cmp(b.exMax) < 0)
}

// schemaGrammar converts schema and parses the result.
func schemaGrammar(t *testing.T, schema string) (*Grammar, string) {
	t.Helper()
	src, err := SchemaToGrammar([]byte(schema))
	if err != nil {
		t.Fatalf("SchemaToGrammar(%s) = %v", schema, err)
	}
	g, err := Parse(src, "")
	if err != nil {
		t.Fatalf("Parse(SchemaToGrammar(%s)) = %v\n%s", schema, err, src)
	}
	return g, src
}

// TestZodIntBounds checks the bounds zod's .int() writes into every
// integer schema: the extremes and random integers of every magnitude
// match exactly when they lie in range, generated numbers validate, and
// the grammar stays small.
func TestZodIntBounds(t *testing.T) {
	const schema = `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`
	g, src := schemaGrammar(t, schema)
	// Digit-range construction: a few alternatives per digit count.
	if len(src) > 4096 {
		t.Errorf("grammar of %s is %d bytes, want at most 4096:\n%s", schema, len(src), src)
	}
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"9007199254740991", true}, {"-9007199254740991", true}, {"0", true}, {"-1", true},
		{"9007199254740990", true}, {"8999999999999999", true}, {"1000000000000000", true},
		{"9007199254740992", false}, {"-9007199254740992", false}, {"9100000000000000", false},
		{"10000000000000000", false}, {"-0", false}, {"01", false}, {"1.5", false}, {"1e3", false},
	} {
		if got := g.Match(tt.s); got != tt.want {
			t.Errorf("%s: Match(%s) = %v, want %v", schema, tt.s, got, tt.want)
		}
	}
	rng := testseed.Rand(t, 1)
	lim := big.NewRat(9007199254740991, 1)
	for range 2000 {
		n := rng.Int64N(int64(math.Pow10(1 + rng.IntN(18))))
		if rng.IntN(2) == 0 {
			n = -n
		}
		x := big.NewRat(n, 1)
		want := x.Cmp(lim) <= 0 && x.Cmp(new(big.Rat).Neg(lim)) >= 0
		if got := g.Match(strconv.FormatInt(n, 10)); got != want {
			t.Fatalf("%s: Match(%d) = %v, want %v", schema, n, got, want)
		}
	}
	v, err := genVocab()
	if err != nil {
		t.Fatal(err)
	}
	sch := compileSchema(t, schema)
	for range 20 {
		doc := generate(t, g, v, rng)
		if err := validate(sch, doc); err != nil {
			t.Errorf("generated %s does not validate against %s: %v", doc, schema, err)
		}
	}
}

// TestInt64Bounds checks bounds at the ends of int64, and that bounds
// beyond it are dropped where they do not restrict the range (float64's
// limits, which zod writes for z.number()) and refused where they would.
func TestInt64Bounds(t *testing.T) {
	tests := []struct {
		schema         string
		accept, reject []string
	}{
		{`{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}`,
			[]string{"-9223372036854775808", "9223372036854775807", "0", "-1"},
			[]string{"-9223372036854775809", "9223372036854775808", "-0"}},
		{`{"type":"integer","exclusiveMinimum":-9223372036854775808,"exclusiveMaximum":9223372036854775807}`,
			[]string{"-9223372036854775807", "9223372036854775806"},
			[]string{"-9223372036854775808", "9223372036854775807"}},
		{`{"type":"integer","minimum":-1.7976931348623157e308,"maximum":1.7976931348623157e308}`,
			[]string{"0", "-5", "123456789012345"},
			[]string{"1.5", "-0"}},
		{`{"type":"number","minimum":-3.4028234663852886e38,"maximum":3.4028234663852886e38}`,
			[]string{"0", "-5.25", "123456789012345.5"},
			[]string{"-0", "1e5"}},
		{`{"type":"integer","minimum":9223372036854775806.5}`,
			[]string{"9223372036854775807"},
			[]string{"9223372036854775806"}},
		{`{"type":"number","exclusiveMinimum":0,"maximum":1e-20}`,
			[]string{"0.00000000000000000001", "0.000000000000000000005"},
			[]string{"0", "0.0", "0.0000000000000001", "0.00000000000000000002", "1"}},
		{`{"type":"number","minimum":-9223372036854775808,"maximum":9223372036854775808}`,
			[]string{"-9223372036854775808", "9223372036854775808.0", "-9223372036854775807.5", "0"},
			[]string{"-9223372036854775808.1", "9223372036854775809", "-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			g, src := schemaGrammar(t, tt.schema)
			for _, s := range tt.accept {
				if !g.Match(s) {
					t.Errorf("Match(%s) = false, want true\n%s", s, src)
				}
			}
			for _, s := range tt.reject {
				if g.Match(s) {
					t.Errorf("Match(%s) = true, want false\n%s", s, src)
				}
			}
		})
	}
}

// randDecimal returns a random decimal number text: a magnitude class up
// to 1e18, up to 5 fraction digits, either sign.
func randDecimal(rng *rand.Rand, fracDigits int) string {
	var ip uint64
	if k := rng.IntN(19); k > 0 {
		ip = rng.Uint64N(uint64(math.Pow10(rng.IntN(k) + 1)))
	}
	s := strconv.FormatUint(ip, 10)
	if n := rng.IntN(fracDigits + 1); n > 0 {
		f := make([]byte, n)
		for i := range f {
			f[i] = byte('0' + rng.IntN(10))
		}
		s += "." + string(f)
	}
	if rng.IntN(2) == 0 {
		s = "-" + s
	}
	return s
}

// ratText writes x as a JSON number without exponent: an integer when it
// is one, otherwise with enough fraction digits to be exact (x has a
// finite decimal expansion of at most 12 digits here).
func ratText(x *big.Rat) string {
	if x.IsInt() {
		return x.Num().String()
	}
	s := x.FloatString(12)
	return strings.TrimRight(s, "0")
}

// TestRandomBounds converts integer and number schemas with random decimal
// bounds (random kinds, exclusivity, magnitudes, fraction digits) and
// checks the grammar against exact rational comparison: it matches the
// bounds, their neighbours and random numbers exactly when they lie in
// range, an empty range is an error, and generated numbers lie in range.
func TestRandomBounds(t *testing.T) {
	rng := testseed.Rand(t, 2)
	v, err := genVocab()
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}
	tiny := []*big.Rat{big.NewRat(0, 1), big.NewRat(1, 1), big.NewRat(1, 10), big.NewRat(1, 1000), big.NewRat(1, 100000)}
	for iter := range 300 {
		typ := "number"
		if iter%3 == 0 {
			typ = "integer"
		}
		var rb ratBounds
		var parts []string
		var bounds []*big.Rat
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				continue
			}
			s := randDecimal(rng, 4)
			parts = append(parts, fmt.Sprintf("%q:%s", k, s))
			r := ratOf(t, s)
			bounds = append(bounds, r)
			switch k {
			case "minimum":
				rb.min = r
			case "exclusiveMinimum":
				rb.exMin = r
			case "maximum":
				rb.max = r
			case "exclusiveMaximum":
				rb.exMax = r
			}
		}
		schema := fmt.Sprintf(`{"type":%q%s}`, typ, strings.Join(append([]string{""}, parts...), ","))
		// Probes: the bounds, their neighbours, random numbers.
		var probes []*big.Rat
		for _, b := range bounds {
			for _, d := range tiny {
				probes = append(probes, new(big.Rat).Add(b, d), new(big.Rat).Sub(b, d))
			}
		}
		for range 40 {
			s := randDecimal(rng, 4)
			if len(strings.TrimLeft(s, "-")) > 15 {
				continue // unbounded sides hold up to 16 integral digits
			}
			probes = append(probes, ratOf(t, s))
		}
		if typ == "integer" {
			for i, p := range probes {
				probes[i] = new(big.Rat).SetInt(new(big.Int).Quo(p.Num(), p.Denom()))
			}
		}
		empty := true
		for _, p := range probes {
			empty = empty && !rb.contains(p)
		}
		src, err := SchemaToGrammar([]byte(schema))
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) || !strings.Contains(se.Msg, "empty") {
				t.Fatalf("SchemaToGrammar(%s) = %v, want a grammar or an empty range", schema, err)
			}
			if !empty {
				t.Fatalf("SchemaToGrammar(%s) = %v, but the range holds probes", schema, err)
			}
			continue
		}
		g, err := Parse(src, "")
		if err != nil {
			t.Fatalf("Parse(SchemaToGrammar(%s)) = %v", schema, err)
		}
		for _, p := range probes {
			s := ratText(p)
			if got, want := g.Match(s), rb.contains(p); got != want {
				t.Fatalf("%s: Match(%s) = %v, want %v\n%s", schema, s, got, want, src)
			}
		}
		for range 3 {
			doc := strings.TrimSpace(generateN(t, g, v, rng, 40))
			x, ok := new(big.Rat).SetString(doc)
			if !ok || !rb.contains(x) || typ == "integer" && !x.IsInt() {
				t.Fatalf("%s: generated %q, want a %s in range", schema, doc, typ)
			}
		}
	}
}

// TestParseDecimal checks exact reading and inward rounding of bounds.
func TestParseDecimal(t *testing.T) {
	tests := []struct {
		s         string
		up        bool
		want      decimal
		exact, ok bool
	}{
		{"0", false, decimal{}, true, true},
		{"-0.0", false, decimal{}, true, true},
		{"12.50", false, decimal{ip: 12, frac: "5"}, true, true},
		{"-1.5e2", false, decimal{neg: true, ip: 150}, true, true},
		{"25e-3", true, decimal{frac: "025"}, true, true},
		{"9223372036854775807", false, decimal{ip: math.MaxInt64}, true, true},
		{"9223372036854775809", false, decimal{}, false, false},
		{"1e19", false, decimal{}, false, false},
		{"9223372036854775808", false, decimal{ip: 1 << 63}, true, true},
		{"0.1234567890123456789012345678901", false, decimal{frac: "12345678901234567890123456789"}, false, true},
		{"0.1234567890123456789012345678901", true, decimal{frac: "123456789012345678901234567891"}, false, true},
		{"-0.1234567890123456789012345678901", true, decimal{neg: true, frac: "12345678901234567890123456789"}, false, true},
		{"0.9999999999999999999999999999999", true, decimal{ip: 1}, false, true},
		{"1e-5000", false, decimal{}, false, true},
		{"1e-5000", true, decimal{frac: "000000000000000000000000000001"}, false, true},
	}
	for _, tt := range tests {
		got, exact, ok := parseDecimal(tt.s, tt.up)
		if ok != tt.ok || ok && (got != tt.want || exact != tt.exact) {
			t.Errorf("parseDecimal(%s, %v) = %+v, %v, %v, want %+v, %v, %v", tt.s, tt.up, got, exact, ok, tt.want, tt.exact, tt.ok)
		}
	}
}
