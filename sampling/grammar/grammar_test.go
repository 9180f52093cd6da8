package grammar

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustParseFile(t testing.TB, name string) *Grammar {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(string(src), "")
	if err != nil {
		t.Fatalf("Parse(%s) error: %v", name, err)
	}
	return g
}

func TestGrammarFiles(t *testing.T) {
	tests := []struct {
		file   string
		accept []string
		reject []string
	}{
		{
			file: "json.gbnf",
			accept: []string{
				`{}`, `[]`, `0`, `-0.5e+10`, `"a\u00e9\n"`, `true`, `null`,
				`{"a": [1, 2, {"b": null}], "c": "d"}`,
				` {"key":"value"}`,
				"{\n  \"x\": 1\n}",
				`"日本語"`, `[[[[]]]]`,
			},
			reject: []string{
				``, `{`, `{"a"}`, `{"a":}`, `[1,]`, `01`, `1.`, `"\x"`, `tru`,
				"\"a\nb\"", `{'a': 1}`, `[1 2]`, `{"a":1}}`, `"\u12G4"`,
			},
		},
		{
			file:   "arithmetic.gbnf",
			accept: []string{`1`, `1+2`, `(1 + 2) * 3.5`, `-(4/2)`, "2*3-1\n", `--1`, `((1))`},
			reject: []string{``, `1+`, `(1`, `1 ++ 2`, `1.`, `a`, "1\n\n", `1  + 2`},
		},
		{
			file:   "list.gbnf",
			accept: []string{"- a\n", "- milk\n- eggs\n- ünïcödé ✓\n"},
			reject: []string{"", "- \n", "- a", "* a\n", "- a\n\n"},
		},
		{
			file: "chess.gbnf",
			accept: []string{
				"1. e4 e5\n2. Nf3 Nc6\n",
				"1. d4 d5\n2. c4 dxc4\n3. O-O O-O-O\n10. Qxf7# exd8=Q+\n",
			},
			reject: []string{
				"1. e4 e5\n", "1. e9 e5\n2. a1 a2\n", "1. e4 e5\n0. a1 a2\n",
				"1. e4 e5\n2. Zf3 a2\n", "1. e4  e5\n2. a1 a2\n",
			},
		},
		{
			file: "clike.gbnf",
			accept: []string{
				"",
				"int main() {}",
				"int add(int a, int b) {\n\treturn a + b;\n}\n",
				"void f(){ int x = 3; while (x > 0) { x = x - 1; } if (x == 0) { g(x, 2); } else { return; } }",
			},
			reject: []string{
				"int main()", "main() {}", "int 9x() {}", "int f() { x = ; }",
				"int f() { return 1 }", "int f(int) {}",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			g := mustParseFile(t, tt.file)
			for _, s := range tt.accept {
				if !g.Match(s) {
					t.Errorf("Match(%q) = false, want true", s)
				}
				if !refMatch(g, []byte(s)) {
					t.Errorf("refMatch(%q) = false, want true", s)
				}
			}
			for _, s := range tt.reject {
				if g.Match(s) {
					t.Errorf("Match(%q) = true, want false", s)
				}
				if refMatch(g, []byte(s)) {
					t.Errorf("refMatch(%q) = true, want false", s)
				}
			}
		})
	}
}

func TestParseFeatures(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		root   string
		accept []string
		reject []string
	}{
		{"star", `root ::= "a"*`, "", []string{"", "a", "aaaa"}, []string{"b", "ab"}},
		{"plus", `root ::= [ab]+`, "", []string{"a", "abba"}, []string{"", "abc"}},
		{"optional", `root ::= "x" "y"?`, "", []string{"x", "xy"}, []string{"", "yy", "xyy"}},
		{"exact", `root ::= [0-9]{3}`, "", []string{"123"}, []string{"12", "1234"}},
		{"at least", `root ::= "ab"{2,}`, "", []string{"abab", "ababab"}, []string{"ab", "aba"}},
		{"between", `root ::= [a]{1,3} "!"`, "", []string{"a!", "aaa!"}, []string{"!", "aaaa!"}},
		{"at most", `root ::= "x"{0,2}`, "", []string{"", "x", "xx"}, []string{"xxx"}},
		{"zero", `root ::= "a" "b"{0} "c"`, "", []string{"ac"}, []string{"abc"}},
		{"group repeat", `root ::= ("ab" | "c"){2}`, "", []string{"abab", "abc", "cc"}, []string{"ab", "abcab"}},
		{"negated class", `root ::= [^a-c\n]+`, "", []string{"xyz", "日本"}, []string{"xaz", "a", "\n"}},
		{"any char", `root ::= . . "!"`, "", []string{"ab!", "é✓!", "\n\t!"}, []string{"a!", "abc!"}},
		{"escapes", `root ::= "\x41\u00e9\U0001F600\n\t\r\\\"\]"`, "", []string{"Aé😀\n\t\r\\\"]"}, []string{"A"}},
		{"class escapes", `root ::= [\]\[\-\\^]+`, "", []string{"]", "[", "-", `\`, "^"}, []string{"a"}},
		{"dash at end", `root ::= [a-]+`, "", []string{"a-a"}, []string{"b"}},
		{"unicode range", `root ::= [ぁ-ゟ]+`, "", []string{"ひらがな"}, []string{"カタカナ"}},
		{"comments", "# leading\nroot ::= a # trailing\n# between\na ::= \"x\" # more\n", "", []string{"x"}, []string{""}},
		{"multiline alternatives", "root ::= \"a\" |\n  \"b\"\n", "", []string{"a", "b"}, []string{"ab"}},
		{"multiline group", "root ::= (\n  \"a\"\n  \"b\"\n)\n", "", []string{"ab"}, []string{"a"}},
		{"empty alternative", `root ::= "a" | `, "", []string{"", "a"}, []string{"b"}},
		{"custom root", "start ::= \"s\" r\nr ::= \"r\"\n", "start", []string{"sr"}, []string{"r"}},
		{"forward reference", "root ::= item+\nitem ::= [0-9] \",\"\n", "", []string{"1,2,"}, []string{"1,2"}},
		{"right recursion", "root ::= \"(\" root \")\" | \"\"", "", []string{"", "()", "((()))"}, []string{"(()", ")("}},
		{"nullable chain", "root ::= a b c\na ::= \"a\"?\nb ::= \"b\"*\nc ::= \"c\" | \"\"\n", "", []string{"", "abc", "bbb", "ac"}, []string{"ca", "aa"}},
		{"crlf", "root ::= \"a\"\r\nb ::= \"b\"\r\n", "", []string{"a"}, []string{"b"}},
		{"literal repeat whole", `root ::= "ab"*`, "", []string{"abab"}, []string{"abb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse(tt.src, tt.root)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.src, err)
			}
			for _, s := range tt.accept {
				if got := g.Match(s); !got {
					t.Errorf("Match(%q) = %v, want true", s, got)
				}
			}
			for _, s := range tt.reject {
				if got := g.Match(s); got {
					t.Errorf("Match(%q) = %v, want false", s, got)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		root      string
		line, col int
		msg       string
	}{
		{"undefined rule", "root ::= a b\na ::= \"x\"\n", "", 1, 12, `undefined rule "b"`},
		{"no root", `r ::= "x"`, "", 1, 10, `no rule "root"`},
		{"no custom root", `root ::= "x"`, "start", 1, 13, `no rule "start"`},
		{"missing ::=", "root ::= \"a\"\nb = \"x\"\n", "", 2, 3, "expected ::="},
		{"unterminated literal", "root ::= \"abc\n", "", 2, 1, "unterminated string"},
		{"unterminated class", "\nroot ::= [a-z", "", 2, 10, "unterminated character class"},
		{"unclosed group", "root ::= (\"a\" \"b\"\n", "", 2, 1, "expected )"},
		{"stray close", "root ::= \"a\" )", "", 1, 14, "expected end of line"},
		{"bad escape", `root ::= "\q"`, "", 1, 11, "unknown escape"},
		{"short hex", `root ::= "\x4"`, "", 1, 14, "hex digits"},
		{"beyond unicode", `root ::= "\U00110000"`, "", 1, 11, "beyond U+10FFFF"},
		{"repeat without item", `root ::= *"a"`, "", 1, 10, "expected an item"},
		{"double repeat", `root ::= "a"**`, "", 1, 14, "expected an item"},
		{"reversed braces", `root ::= "a"{3,1}`, "", 1, 13, "maximum below minimum"},
		{"unclosed braces", `root ::= "a"{3`, "", 1, 15, "expected }"},
		{"huge repeat", `root ::= "a"{5000}`, "", 1, 13, "repetition count"},
		{"reversed range", `root ::= [z-a]`, "", 1, 13, "reversed"},
		{"left recursion", "root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n", "", 2, 1, `"expr" is left-recursive`},
		{"indirect left recursion", "root ::= a\na ::= b \"x\"\nb ::= c? a\nc ::= \"c\"\n", "", 2, 1, "left-recursive"},
		{"defined twice", "root ::= \"a\"\nroot ::= \"b\"\n", "", 2, 1, "defined twice"},
		{"token syntax", `root ::= <think>`, "", 1, 10, "token references"},
		{"missing name", `::= "a"`, "", 1, 1, "expected rule name"},
		{"invalid utf8", "root ::= \"\xff\"", "", 1, 11, "invalid UTF-8"},
		{"column counts runes", "root ::= \"日本\" b", "", 1, 15, `undefined rule "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src, tt.root)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error = %v, want a *SyntaxError", tt.src, err)
			}
			if se.Line != tt.line || se.Col != tt.col || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("Parse(%q) error = %v, want %d:%d with %q", tt.src, err, tt.line, tt.col, tt.msg)
			}
		})
	}
}

func readTestdata(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	return string(b), err
}

func TestGrammarString(t *testing.T) {
	g, err := Parse("root ::= item \"-\" item\nitem ::= [^\"\\\\a-c] | \"é\" [\\U0001F600]\n", "")
	if err != nil {
		t.Fatal(err)
	}
	src := g.String()
	g2, err := Parse(src, "")
	if err != nil {
		t.Fatalf("Parse(String()) = %v for\n%s", err, src)
	}
	for _, s := range []string{"x-y", "é😀-z", "a-x", "x-\"", "\\-x", "x-", "é-x"} {
		if got, want := g2.Match(s), g.Match(s); got != want {
			t.Errorf("Parse(String()).Match(%q) = %v, want %v", s, got, want)
		}
	}
}
