package grammar

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// manyKeys returns a JSON object schema whose members are n keys k0...;
// with member "", an array of the names ("required") instead.
func manyKeys(kw string, n int, member string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","` + kw + `":`)
	if member == "" {
		b.WriteByte('[')
	} else {
		b.WriteByte('{')
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d"`, i)
		if member != "" {
			b.WriteString(":" + member)
		}
	}
	if member == "" {
		b.WriteString("]}")
	} else {
		b.WriteString("}}")
	}
	return b.String()
}

// allocatedBytes returns the bytes f allocates.
func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestSchemaCompileLinear checks that compiling a schema costs memory in
// proportion to its size: four times the properties or required names may
// cost about four times the allocation, never the sixteen of a quadratic
// compile (which took 13 s of CPU for 32,000 required names). Allocation
// is a measure of work that does not depend on the machine's speed.
func TestSchemaCompileLinear(t *testing.T) {
	for _, tc := range []struct{ name, kw, member string }{
		{"required", "required", ""},
		{"optional properties", "properties", `{"type":"integer"}`},
		{"required properties", "properties", `{"type":"string"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cost := func(n int) uint64 {
				schema := []byte(manyKeys(tc.kw, n, tc.member))
				if tc.name == "required properties" {
					s := manyKeys(tc.kw, n, tc.member)
					req := manyKeys("required", n, "")
					schema = []byte(s[:len(s)-1] + "," + req[len(`{"type":"object",`):])
				}
				var err error
				b := allocatedBytes(func() { _, err = SchemaToGrammar(schema) })
				if err != nil {
					t.Fatalf("SchemaToGrammar(%d %s) = %v", n, tc.name, err)
				}
				return b
			}
			small, large := cost(MaxSchemaProperties/4), cost(MaxSchemaProperties)
			if ratio := float64(large) / float64(small); ratio > 7 {
				t.Errorf("compiling %d %s allocates %d bytes, %d allocate %d: %.1fx for 4x the size, want linear (<= 7x)",
					MaxSchemaProperties/4, tc.name, small, MaxSchemaProperties, large, ratio)
			}
		})
	}
}

// TestSchemaLimits checks that schemas past the limits are refused with an
// error naming the schema field, not compiled at length.
func TestSchemaLimits(t *testing.T) {
	enum := func(n int) string {
		var vals []string
		for i := range n {
			vals = append(vals, fmt.Sprint(i))
		}
		return `{"enum":[` + strings.Join(vals, ",") + `]}`
	}
	anyOf := func(n int) string {
		var vals []string
		for i := range n {
			vals = append(vals, fmt.Sprintf(`{"const":%d}`, i))
		}
		return `{"anyOf":[` + strings.Join(vals, ",") + `]}`
	}
	var nested strings.Builder // 60 levels of 200 distinct properties each: 12,000 rules
	for i := range 60 {
		nested.WriteString(`{"type":"object","properties":{`)
		for j := range 200 {
			fmt.Fprintf(&nested, `"p%d_%d":{"type":"integer","minimum":%d},`, i, j, j)
		}
		nested.WriteString(`"next":`)
	}
	nested.WriteString(`{"type":"null"}`)
	for range 60 {
		nested.WriteString(`}}`)
	}
	tests := []struct {
		name, schema, path, msg string
	}{
		{"32,000 required names", manyKeys("required", 32000, ""), "#/required", "at most 1000"},
		{"8,000 optional properties", manyKeys("properties", 8000, `{"type":"integer"}`), "#/properties", "at most 1000"},
		{"enum", enum(MaxSchemaAlternatives + 1), "#/enum", "at most 1000"},
		{"anyOf", anyOf(MaxSchemaAlternatives + 1), "#/anyOf", "at most 1000"},
		{"type listed twice", `{"type":["string","string"]}`, "#/type/1", "listed twice"},
		{"too many rules", nested.String(), "", "over 10000 grammar rules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := SchemaToGrammar([]byte(tt.schema))
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("SchemaToGrammar(%.80s...) = %v, want a *SchemaError", tt.schema, err)
			}
			if tt.path != "" && se.Path != tt.path || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("SchemaToGrammar(%.80s...) = %v, want path %s and %q", tt.schema, err, tt.path, tt.msg)
			}
		})
	}
	// At the limits the schemas compile, and the grammar follows them.
	for _, schema := range []string{
		manyKeys("properties", MaxSchemaProperties, `{"type":"integer"}`),
		enum(MaxSchemaAlternatives), anyOf(MaxSchemaAlternatives),
	} {
		src, err := SchemaToGrammar([]byte(schema))
		if err != nil {
			t.Fatalf("SchemaToGrammar(%.80s...) = %v, want a grammar", schema, err)
		}
		g, err := Parse(src, "")
		if err != nil {
			t.Fatalf("Parse(SchemaToGrammar(%.80s...)) = %v", schema, err)
		}
		if !g.Match(`{"k999": 5}`) && !g.Match("999") {
			t.Errorf("grammar of %.80s... matches neither {\"k999\": 5} nor 999", schema)
		}
	}
}

// TestUnsatisfiableGrammars checks that grammars no output can satisfy are
// refused by Parse, where a request's grammar is validated, instead of
// failing at generation time.
func TestUnsatisfiableGrammars(t *testing.T) {
	alts := func(rule string, n int) string {
		var b strings.Builder
		b.WriteString(rule + " ::= ")
		for i := range n {
			if i > 0 {
				b.WriteString(" | ")
			}
			fmt.Fprintf(&b, `"a%d"`, i)
		}
		return b.String() + "\n"
	}
	var rules strings.Builder
	rules.WriteString("root ::= r0\n")
	for i := range maxRules {
		fmt.Fprintf(&rules, "r%d ::= \"x\" r%d?\n", i, i+1)
	}
	fmt.Fprintf(&rules, "r%d ::= \"x\"\n", maxRules)
	tests := []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"surrogate literal", `root ::= "\uD800"`, 1, 11, "surrogate"},
		{"surrogate in class", `root ::= [a\uDC00]`, 1, 12, "surrogate"},
		{"surrogate range", `root ::= [\uD800-\uDFFF]`, 1, 11, "surrogate"},
		{"empty negated class", `root ::= [^\x00-\U0010FFFF]`, 1, 10, "matches no character"},
		{"never completes", "root ::= \"a\" x\nx ::= \"b\" x\n", 1, 1, `"root" matches no text`},
		{"never completes through a cycle", "root ::= x | y\nx ::= y \"a\"\ny ::= \"b\" x\n", 1, 1, "matches no text"},
		{"100,000 alternatives", alts("root", 100000), 0, 0, `rule "root" has over 4096 alternatives`},
		{"ambiguous first step", "root ::= a | b\n" + alts("a", 3000) + alts("b", 3000), 1, 1, "too ambiguous"},
		{"too many rules", rules.String(), 0, 0, "over 65536 rules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src, "")
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%.60q) error = %v, want a *SyntaxError", tt.src, err)
			}
			if tt.line != 0 && (se.Line != tt.line || se.Col != tt.col) || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("Parse(%.60q) error = %v, want %d:%d with %q", tt.src, err, tt.line, tt.col, tt.msg)
			}
		})
	}
	// A class reaching across the surrogates keeps the characters on
	// either side.
	g, err := Parse(`root ::= [\uD7FF-\uE000]`, "")
	if err != nil {
		t.Fatalf("Parse(range across the surrogates) = %v", err)
	}
	if !g.Match("\uD7FF") || !g.Match("\uE000") {
		t.Errorf("range across the surrogates does not match its ends")
	}
}

// TestNullableRepetition checks the repetition of what can be empty, as
// in the pattern ^(a*)*b$: the grammar is not left-recursive (the
// repetition does not grow the matcher's stack) and matches what the
// reference recognizer matches.
func TestNullableRepetition(t *testing.T) {
	tests := []struct {
		src            string
		accept, reject []string
	}{
		{`root ::= ("a"?)*`, []string{"", "a", "aaa"}, []string{"b", "ab"}},
		{`root ::= ("a"*)* "b"`, []string{"b", "ab", "aaab"}, []string{"", "a", "ba"}},
		{`root ::= ("a"* "b"?)+ "c"`, []string{"c", "aac", "abac", "bbc"}, []string{"", "ca", "abca"}},
		{"root ::= x\nx ::= \"a\"? y\ny ::= \"b\" | x\n", []string{"b", "ab", "aab"}, []string{"", "a", "ba"}},
	}
	for _, tt := range tests {
		g, err := Parse(tt.src, "")
		if err != nil {
			t.Errorf("Parse(%q) = %v, want a grammar", tt.src, err)
			continue
		}
		for _, s := range tt.accept {
			if !g.Match(s) || !refMatch(g, []byte(s)) {
				t.Errorf("Parse(%q).Match(%q) = %v (reference %v), want true", tt.src, s, g.Match(s), refMatch(g, []byte(s)))
			}
		}
		for _, s := range tt.reject {
			if g.Match(s) || refMatch(g, []byte(s)) {
				t.Errorf("Parse(%q).Match(%q) = %v (reference %v), want false", tt.src, s, g.Match(s), refMatch(g, []byte(s)))
			}
		}
	}
	src, err := SchemaToGrammar([]byte(`{"type":"string","pattern":"^(a*)*b$"}`))
	if err != nil {
		t.Fatalf(`SchemaToGrammar(pattern "^(a*)*b$") = %v, want a grammar`, err)
	}
	g, err := Parse(src, "")
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{`"b"`: true, `"aaab"`: true, `""`: false, `"ba"`: false} {
		if got := g.Match(s); got != want {
			t.Errorf(`pattern "^(a*)*b$" Match(%s) = %v, want %v`, s, got, want)
		}
	}
}

// TestSchemaErrorNamesCause checks that the message of a schema whose
// grammar is unusable quotes the grammar's real complaint, not a guess.
func TestSchemaErrorNamesCause(t *testing.T) {
	_, err := SchemaToGrammar([]byte(`{"$ref":"#"}`))
	if err == nil || !strings.Contains(err.Error(), "matches no text") {
		t.Errorf(`SchemaToGrammar({"$ref":"#"}) = %v, want it to say the grammar matches no text`, err)
	}
}

// TestDeadEndAmbiguity checks that a grammar that becomes too ambiguous
// after its first step (which Parse checks) fails Accept with an error
// marked ErrDeadEnd.
func TestDeadEndAmbiguity(t *testing.T) {
	var b strings.Builder
	b.WriteString("root ::= \"x\" (a | b)\n")
	for _, r := range []string{"a", "b"} {
		b.WriteString(r + " ::= ")
		for i := range 3000 {
			if i > 0 {
				b.WriteString(" | ")
			}
			fmt.Fprintf(&b, `"%s%d"`, r, i)
		}
		b.WriteString("\n")
	}
	g, err := Parse(b.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := NewMatcher(g, nil).AcceptBytes([]byte("x")); !errors.Is(err, ErrDeadEnd) {
		t.Errorf("AcceptBytes(x) into 6,000 parallel parses = %v, want an error marked ErrDeadEnd", err)
	}
}
