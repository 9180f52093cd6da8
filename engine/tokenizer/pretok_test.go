package tokenizer

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/testseed"
)

// ws is the reference's \s (Unicode White_Space) as a Go regexp class body;
// Go's own \s is ASCII-only and lacks \v.
const ws = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

// goPipelines are the reference's expressions per pre-tokenizer, rewritten
// for Go's regexp (RE2, leftmost-first like ECMAScript): \s spelled out,
// (?=[\p{L}])[^a-z] as the class [^\P{L}a-z], and \s+(?!\S) dropped, which
// is exact on inputs whose whitespace runs are single characters (there the
// look-ahead alternative never matches before the plain \s+ does).
func goPipelines() map[string][]string {
	S := "[" + ws + "]"
	notSLN := `[^` + ws + `\p{L}\p{N}]`
	contr := `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	gpt2 := `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?` + notSLN + `+|` + S + `+`
	llama3 := func(digits string) string {
		return `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}` + digits +
			`| ?` + notSLN + `+[\r\n]*|` + S + `*[\r\n]+|` + S + `+`
	}
	return map[string][]string{
		"gpt-2":          {gpt2},
		"llama3":         {llama3("{1,3}")},
		"qwen2":          {llama3("")},
		"default":        {`[\p{P}\$\+<=>\^~\|]+`, gpt2, `\p{N}+`, `[0-9][0-9][0-9]`},
		"falcon":         {`[\p{P}\$\+<=>\^~\|` + "`" + `]+`, gpt2, `[0-9][0-9][0-9]`},
		"starcoder":      {`\p{N}`, gpt2},
		"deepseek-coder": {`[\r\n]`, S + `?\p{L}+`, S + `?\p{P}+`, widePrefix + `[一-龥ࠀ-一가-퟿]+`, `\p{N}`},
		"deepseek-llm": {`[\r\n]`, widePrefix + S + `?[` + deepseekLetters + `]+`, widePrefix + S + `?[!-/:-~！-／：-～‘-‟　-。]+`,
			S + `+$`, widePrefix + `[一-龥ࠀ-一가-퟿]+`, `\p{N}+`},
		"tekken": {`[^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*|\p{N}| ?` +
			notSLN + `+[\r\n/]*|` + S + `*[\r\n]+|` + S + `+`},
		"gpt-4o": {`[^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+` + contr + `?|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*` + contr +
			`?|\p{N}{1,3}| ?` + notSLN + `+[\r\n/]*|` + S + `*[\r\n]+|` + S + `+`},
		"bloom": {widePrefix + ` ?[^(` + ws + `|.,!?…。，、।۔،)]+`},
	}
}

// widePrefix marks an expression the reference runs with std::wregex on code
// points after replacing non-ASCII whitespace with U+000B (its literal
// classes may contain such whitespace, which then no longer matches).
const widePrefix = "W:"

// goSplit applies the expressions in turn, keeping unmatched gaps.
func goSplit(exprs []string, s string) []string {
	pieces := []string{s}
	for _, e := range exprs {
		isWide := strings.HasPrefix(e, widePrefix)
		re := regexp.MustCompile(strings.TrimPrefix(e, widePrefix))
		var next []string
		for _, p := range pieces {
			at := 0
			subject, toOrig := p, func(i int) int { return i }
			if isWide {
				subject, toOrig = mapWide(p)
			}
			for _, m := range re.FindAllStringIndex(subject, -1) {
				m = []int{toOrig(m[0]), toOrig(m[1])}
				if m[0] > at {
					next = append(next, p[at:m[0]])
				}
				next = append(next, p[m[0]:m[1]])
				at = m[1]
			}
			if at < len(p) {
				next = append(next, p[at:])
			}
		}
		pieces = next
	}
	return pieces
}

// mapWide replaces non-ASCII whitespace with "\v" and returns a function
// from offsets in the result to offsets in s.
func mapWide(s string) (string, func(int) int) {
	var b strings.Builder
	orig := map[int]int{}
	for i, r := range s {
		orig[b.Len()] = i
		if r > 0x7f && isWhitespace(r) {
			r = '\v'
		}
		b.WriteRune(r)
	}
	orig[b.Len()] = len(s)
	return b.String(), func(i int) int { return orig[i] }
}

func ourSplit(t *testing.T, pre, s string) []string {
	t.Helper()
	pt, err := newPreTokenizer(pre)
	if err != nil {
		t.Fatal(err)
	}
	cps := []rune(s)
	var out []string
	for _, sp := range pt.split(cps, nil, nil) {
		out = append(out, string(cps[sp.s:sp.e]))
	}
	return out
}

// TestPreTokenizersAgainstRegexp compares each hand-written pipeline with
// Go's regexp engine running the reference's expressions on random text.
func TestPreTokenizersAgainstRegexp(t *testing.T) {
	rng := testseed.Rand(t, 2)
	atoms := []string{"a", "z", "A", "Z", "hello", "World", "HTTPServer", "é", "É", "ß", "日本", "한", "ŉ", "ǅ",
		"0", "7", "123", "4567", "٣", "½", "Ⅻ", ".", ",", "'", "'s", "'S", "'ll", "'RE", "'d", "!", "?", "(", ")", "…",
		"。", "$", "+", "~", "`", "€", "/", "\u0301", "\u200d", "🦙", "\x7f", "\u0378", "_", "-", "＠", "Ａ"}
	spaces := []string{" ", "\t", "\n", "\r", "\u3000", "\u00a0", "\u2009", "\v"}
	for name, exprs := range goPipelines() {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < 400; i++ {
				var sb strings.Builder
				lastSpace := false
				for n := rng.IntN(14); n > 0; n-- {
					if !lastSpace && rng.IntN(3) == 0 {
						sb.WriteString(spaces[rng.IntN(len(spaces))])
						lastSpace = true
						continue
					}
					sb.WriteString(atoms[rng.IntN(len(atoms))])
					lastSpace = false
				}
				s := sb.String()
				got, want := ourSplit(t, name, s), goSplit(exprs, s)
				if !slices.Equal(got, want) {
					t.Fatalf("split(%q) = %q, want %q", s, got, want)
				}
			}
		})
	}
}

// TestPreTokenizerWhitespaceRuns checks \s+(?!\S) by hand: a run before a
// non-space leaves its last space to the next word; a run at the end stays
// whole; Llama 3 keeps newlines with the run before them.
func TestPreTokenizerWhitespaceRuns(t *testing.T) {
	cases := []struct {
		pre, in string
		want    []string
	}{
		{"gpt-2", "a   b", []string{"a", "  ", " b"}},
		{"gpt-2", "a   ", []string{"a", "   "}},
		{"gpt-2", "a \t b", []string{"a", " \t", " b"}},
		{"gpt-2", "x  !", []string{"x", " ", " !"}},
		{"llama3", "a  \n  b", []string{"a", "  \n", " ", " b"}},
		{"llama3", "12345 x", []string{"123", "45", " x"}},
		{"llama3", "don'T stop", []string{"don", "'T", " stop"}},
		{"qwen2", "12 ab", []string{"1", "2", " ab"}},
		{"tekken", "HTTPServer  /x", []string{"HTTPServer", " ", " /", "x"}},
		{"tekken", "helloWorld", []string{"hello", "World"}},
		{"gpt-4o", "I'LL don't  HTTPServer's 12345", []string{"I'LL", " don't", " ", " HTTPServer's", " ", "123", "45"}},
		{"deepseek-llm", "ab  ", []string{"ab", "  "}},
	}
	for _, c := range cases {
		if got := ourSplit(t, c.pre, c.in); !slices.Equal(got, c.want) {
			t.Errorf("split[%s](%q) = %q, want %q", c.pre, c.in, got, c.want)
		}
	}
}

// TestUnknownPre checks that an unknown pre-tokenizer is an error naming
// the key and the value.
func TestUnknownPre(t *testing.T) {
	_, err := newPreTokenizer("no-such-pre")
	if err == nil || !strings.Contains(err.Error(), keyPre) || !strings.Contains(err.Error(), "no-such-pre") {
		t.Errorf("newPreTokenizer(%q) error = %v, want one naming %s and the value", "no-such-pre", err, keyPre)
	}
}

// BenchmarkPreTokenizeGPT2 measures the hand-written GPT-2 splitter and
// Go's regexp on the same text with the same expression minus the
// look-ahead (a lower bound for any engine that has look-ahead).
func BenchmarkPreTokenizeGPT2(b *testing.B) {
	text := benchText(b)
	cps := []rune(text)
	b.Run("handwritten", func(b *testing.B) {
		pt, _ := newPreTokenizer("gpt-2")
		var buf, tmp []span
		b.SetBytes(int64(len(text)))
		for i := 0; i < b.N; i++ {
			buf = pt.split(cps, buf, tmp)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		re := regexp.MustCompile(goPipelines()["gpt-2"][0])
		b.SetBytes(int64(len(text)))
		for i := 0; i < b.N; i++ {
			re.FindAllStringIndex(text, -1)
		}
	})
}
