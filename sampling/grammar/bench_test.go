package grammar

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// synthVocab returns a deterministic vocabulary of n tokens shaped like a
// real byte-level BPE vocabulary: every byte, common words with and without
// a leading space, numbers, punctuation runs, JSON fragments, and generated
// sub-words (some with accented or CJK letters), ids 0 and 1 empty control
// tokens and id 2 end of generation.
func synthVocab(n int) [][]byte {
	seen := map[string]bool{}
	toks := [][]byte{nil, nil, nil}
	add := func(s string) {
		if len(toks) < n && s != "" && !seen[s] {
			seen[s] = true
			toks = append(toks, []byte(s))
		}
	}
	for b := 0; b < 256; b++ {
		add(string([]byte{byte(b)}))
	}
	words := strings.Fields(`the of and to in is that for it as was with be by on not he this are or his
		from at which but have an they you were her she there been one all we their has would when if so no
		will more can who out said about what up its into them than some could time these two may first
		then do any like my now over such our man me even most made after also did many before must through
		years where much your way well down should because each just those people how too little state good
		very make world still own see men work long get here between both life being under never day same
		another know while last might us great old year off come since against go came right used take three
		name age type value id true false null string number object array items properties required error
		result data message content role user assistant system function arguments parameters tool call`)
	punct := "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
	for _, w := range words {
		for _, v := range []string{w, " " + w, strings.ToUpper(w[:1]) + w[1:], " " + strings.ToUpper(w[:1]) + w[1:], `"` + w + `"`, `"` + w + `":`} {
			add(v)
		}
	}
	for i := 0; i < 1000; i++ {
		add(fmt.Sprint(i))
		add(fmt.Sprint(" ", i))
	}
	for _, a := range punct {
		for _, b := range punct {
			add(string(a) + string(b))
		}
		add(" " + string(a))
	}
	for _, s := range []string{`{"`, `":`, `",`, `"}`, `":"`, `","`, `"},{"`, `[{"`, `"}]`, `{}`, `[]`, `": "`, `", "`,
		`":{"`, `":["`, `":[`, `"]`, `"],"`, "\n", "\n\n", "  ", "    ", "\n  ", "\n    ", "\t", ",\n", "{\n", "}\n", " {", " }",
		`\n`, `\"`, `\\`, `\u00`, ` "`, `":true`, `":false`, `":null`, `":0`, `":1`} {
		add(s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cons := "bcdfghjklmnpqrstvwxyz"
	vows := "aeiou"
	exotic := []string{"é", "ü", "ñ", "ç", "ø", "日", "本", "語", "中", "文", "я", "д", "ж", "λ", "π", "→", "✓", "😀"}
	for len(toks) < n {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteByte(' ')
		}
		syl := 1 + rng.IntN(4)
		for i := 0; i < syl; i++ {
			b.WriteByte(cons[rng.IntN(len(cons))])
			b.WriteByte(vows[rng.IntN(len(vows))])
			if rng.IntN(3) == 0 {
				b.WriteByte(cons[rng.IntN(len(cons))])
			}
		}
		switch rng.IntN(10) {
		case 0:
			b.WriteString(exotic[rng.IntN(len(exotic))])
		case 1:
			e := exotic[rng.IntN(len(exotic))]
			b.WriteString(e[:len(e)-1]) // ends inside a character
		case 2:
			b.WriteString(string(punct[rng.IntN(len(punct))]))
		}
		add(b.String())
	}
	return toks
}

func benchMatcher(b *testing.B, n int, grammar string, prefix string) (*Matcher, []float32) {
	b.Helper()
	toks := synthVocab(n)
	v, err := NewVocab(toks, []int32{2})
	if err != nil {
		b.Fatal(err)
	}
	g, err := Parse(grammar, "")
	if err != nil {
		b.Fatal(err)
	}
	m := NewMatcher(g, v)
	if err := m.AcceptBytes([]byte(prefix)); err != nil {
		b.Fatal(err)
	}
	return m, make([]float32, n)
}

func mustRead(b *testing.B, name string) string {
	b.Helper()
	g := mustParseFile(b, name)
	_ = g
	src, err := readTestdata(name)
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// BenchmarkMask measures one Mask call over a 150k vocabulary with the JSON
// grammar. "cold" drops the automaton each time (a state never seen before:
// the full trie walk with every transition computed); "walk" keeps the
// transitions but drops the per-state mask cache (a revisited state whose
// mask was evicted); "cached" is a state whose mask is cached.
func BenchmarkMask(b *testing.B) {
	const n = 150000
	src := mustRead(b, "json.gbnf")
	for _, pos := range []struct{ name, prefix string }{
		{"in-string", `{"name": "abc`},
		{"value-start", `{"name": `},
		{"after-value", `{"a": [1, 2`},
	} {
		b.Run("cold/"+pos.name, func(b *testing.B) {
			m, logits := benchMatcher(b, n, src, pos.prefix)
			b.ReportMetric(float64(m.v.TrieNodes()), "trie-nodes")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.compact()
				if err := m.Mask(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("walk/"+pos.name, func(b *testing.B) {
			m, logits := benchMatcher(b, n, src, pos.prefix)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range m.masks {
					delete(m.masks, k)
				}
				m.maskFIFO = m.maskFIFO[:0]
				if err := m.Mask(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("cached/"+pos.name, func(b *testing.B) {
			m, logits := benchMatcher(b, n, src, pos.prefix)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.Mask(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGenerateJSON measures Mask+Accept per token while generating a
// JSON document token by token from a 150k vocabulary: the figure a
// decoding step pays.
func BenchmarkGenerateJSON(b *testing.B) {
	const n = 150000
	src := mustRead(b, "json.gbnf")
	toks := synthVocab(n)
	v, err := NewVocab(toks, []int32{2})
	if err != nil {
		b.Fatal(err)
	}
	g, err := Parse(src, "")
	if err != nil {
		b.Fatal(err)
	}
	ids := tokenizeGreedy(b, toks, `{"name": "Alice Smith", "age": 42, "tags": ["alpha", "beta"], "address": {"city": "Paris", "zip": "75001"}, "active": true}`)
	logits := make([]float32, n)
	b.ResetTimer()
	steps := 0
	for i := 0; i < b.N; i++ {
		m := NewMatcher(g, v)
		for _, id := range ids {
			if err := m.Mask(logits); err != nil {
				b.Fatal(err)
			}
			if err := m.Accept(id); err != nil {
				b.Fatal(err)
			}
			steps++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/token")
}

// tokenizeGreedy splits s into the longest matching tokens, left to right.
func tokenizeGreedy(b *testing.B, toks [][]byte, s string) []int32 {
	byText := map[string]int32{}
	maxLen := 0
	for i, t := range toks {
		if len(t) > 0 {
			byText[string(t)] = int32(i)
			maxLen = max(maxLen, len(t))
		}
	}
	var ids []int32
	for len(s) > 0 {
		for l := min(maxLen, len(s)); l > 0; l-- {
			if id, ok := byText[s[:l]]; ok {
				ids = append(ids, id)
				s = s[l:]
				break
			}
			if l == 1 {
				b.Fatalf("no token for %q", s[:1])
			}
		}
	}
	return ids
}

// BenchmarkAllowsAccept measures the check-first path a sampler takes when
// its first draw is allowed: Allows then Accept of one token inside a
// string.
func BenchmarkAllowsAccept(b *testing.B) {
	src := mustRead(b, "json.gbnf")
	m, _ := benchMatcher(b, 150000, src, `{"name": "`)
	toks := synthVocab(150000)
	id := tokenizeGreedy(b, toks, " world")[0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ok, err := m.Allows(id)
		if !ok || err != nil {
			b.Fatal(ok, err)
		}
		if err := m.Accept(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewVocab measures building the trie for a 150k vocabulary (once
// per model).
func BenchmarkNewVocab(b *testing.B) {
	toks := synthVocab(150000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NewVocab(toks, []int32{2}); err != nil {
			b.Fatal(err)
		}
	}
}
