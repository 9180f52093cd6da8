package grammar

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary text to Parse: it must return a grammar or an
// error, never panic or hang, and a grammar it returns must be usable by a
// matcher on arbitrary input. The seed corpus is every grammar in testdata
// plus the files under testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.gbnf"))
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src), "ab\"{1")
	}
	for _, s := range []string{
		`root ::= "a"{2,5} | [^\x00-\x1F]* "\u00e9"`,
		"root ::= (a | b)+\na ::= \"x\"\nb ::= a? \"y\"",
		`root ::= [\]\-]? . "\U0001F600"`,
		"root ::= r\nr ::= r \"x\"",
		`root ::= ("a"* "b"?)+ "c" | [\uD7FF-\uE000] "\uD800"`,
		"root ::= x\nx ::= \"a\"? y\ny ::= \"b\" | x",
	} {
		f.Add(s, "xyé😀")
	}
	f.Fuzz(func(t *testing.T, src, input string) {
		g, err := Parse(src, "")
		if err != nil {
			if _, ok := err.(*SyntaxError); !ok {
				t.Fatalf("Parse error %T %v, want *SyntaxError", err, err)
			}
			return
		}
		m := NewMatcher(g, nil)
		_ = m.AcceptBytes([]byte(input))
		_ = m.IsComplete()
		_ = g.String()
	})
}

// FuzzSchemaToGrammar feeds arbitrary documents to SchemaToGrammar: it must
// return GBNF that parses or a *SchemaError, never panic.
func FuzzSchemaToGrammar(f *testing.F) {
	for _, tt := range generationSchemas {
		f.Add(tt.schema)
	}
	for _, s := range []string{`{"$ref":"#"}`, `{"anyOf":[{"$ref":"#"},{"type":"null"}]}`, `{"$defs":{"value":{"type":"integer"}},"properties":{"v":{"$ref":"#/$defs/value"},"w":{}}}`,
		`{"type":"string","pattern":"^(a|b)*c{2,3}[^x-z]$"}`, `{"type":"integer","minimum":-5e14}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		src, err := SchemaToGrammar([]byte(schema))
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("SchemaToGrammar(%q) error %T %v, want *SchemaError", schema, err, err)
			}
			return
		}
		if _, err := Parse(src, ""); err != nil {
			t.Fatalf("SchemaToGrammar(%q) gave GBNF that does not parse: %v\n%s", schema, err, src)
		}
	})
}
