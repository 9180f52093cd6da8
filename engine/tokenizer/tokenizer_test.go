package tokenizer

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/internal/testseed"
)

// TestRoundTrip checks Decode(Encode(s)) == s on every fixture input where
// the reference round-trips: SentencePiece and DeepSeek-Coder always; GPT-2
// and Falcon unless the input has a space before punctuation or an
// apostrophe (the reference's clean-up removes it); WordPiece never
// (it lower-cases and strips accents), so it is left out.
func TestRoundTrip(t *testing.T) {
	dir := fixtures.Dir(t, "vocab")
	for _, v := range []string{"llama-spm", "phi-3", "deepseek-coder", "gpt-2", "falcon"} {
		t.Run(v, func(t *testing.T) {
			tok := loadVocab(t, v)
			inputs, _ := readPairs(t, filepath.Join(dir, "ggml-vocab-"+v+".gguf"))
			for _, in := range inputs {
				if tok.cleanSpaces && strings.ContainsAny(in, "?!.,'") {
					cleaned := false
					for _, p := range []string{" ?", " !", " .", " ,", " '"} {
						cleaned = cleaned || strings.Contains(in, p)
					}
					if cleaned {
						continue
					}
				}
				ids, err := tok.Encode(in, false, false)
				if err != nil {
					t.Fatalf("Encode(%q): %v", in, err)
				}
				got, err := tok.Decode(ids)
				if err != nil || got != in {
					t.Errorf("Decode(Encode(%q)) = %q, %v, want %q", in, got, err, in)
				}
			}
		})
	}
}

// TestCases checks hand-made inputs against ids known independently: the
// published ids of the Llama-2 and GPT-2 vocabularies, and the layout of
// SentencePiece byte tokens (<0xXX> is id 3+XX in Llama-2's vocabulary).
func TestCases(t *testing.T) {
	fixtures.Dir(t, "vocab")
	spm := loadVocab(t, "llama-spm")
	gpt := loadVocab(t, "gpt-2")
	bert := loadVocab(t, "bert-bge")
	for b := 0; b < 256; b++ {
		if got, want := spm.TokenText(int32(3+b)), fmt.Sprintf("<0x%02X>", b); got != want {
			t.Fatalf("TokenText(%d) = %q, want %q", 3+b, got, want)
		}
	}
	byteIDs := func(s string) []int32 {
		var ids []int32
		for _, c := range []byte(s) {
			ids = append(ids, int32(3+int(c)))
		}
		return ids
	}
	id := func(tok *Tokenizer, s string) int32 {
		v, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("TokenID(%q) not found", s)
		}
		return v
	}
	cases := []struct {
		name                     string
		tok                      *Tokenizer
		text                     string
		addSpecial, parseSpecial bool
		want                     []int32
	}{
		{"spm empty", spm, "", false, false, nil},
		{"spm empty with BOS", spm, "", true, false, []int32{1}},
		{"spm hello", spm, "Hello world", true, false, []int32{1, 15043, 3186}},
		{"spm leading space", spm, " Hello", false, false, []int32{29871, 15043}},
		{"spm only spaces", spm, "   ", false, false, []int32{id(spm, "▁▁▁▁")}}, // added prefix + 3
		{"spm special parsed", spm, "<s>Hi</s>", false, true, []int32{1, 6324, 2}},
		{"spm special as text", spm, "</s>", false, false, []int32{1533, 29879, 29958}},
		{"spm invalid byte", spm, "\xff", false, false, []int32{29871, 3 + 0xff}},
		{"spm llama emoji bytes", spm, "🦙", false, false, append([]int32{29871}, byteIDs("🦙")...)},
		{"gpt2 hello", gpt, "Hello world", false, false, []int32{15496, 995}},
		{"gpt2 endoftext parsed", gpt, "<|endoftext|>", false, true, []int32{50256}},
		{"gpt2 endoftext as text", gpt, "<|endoftext|>", false, false, []int32{27, 91, 437, 1659, 5239, 91, 29}},
		{"gpt2 empty", gpt, "", true, false, nil},
		{"gpt2 only whitespace", gpt, " \t\n", false, false, []int32{220, 197, 198}},
		{"gpt2 numbers", gpt, "12345", false, false, []int32{10163, 2231}},
		{"bert hello", bert, "Hello world!", true, false, []int32{101, 7592, 2088, 999, 102}},
		{"bert accents stripped", bert, "café", false, false, []int32{7668}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.tok.Encode(c.text, c.addSpecial, c.parseSpecial)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("Encode(%q, %v, %v) = %v, %v, want %v", c.text, c.addSpecial, c.parseSpecial, got, err, c.want)
			}
		})
	}
}

// TestInvalidUTF8BPE checks that an invalid byte encodes like U+FFFD in
// byte-level BPE, as the reference does, and never panics.
func TestInvalidUTF8BPE(t *testing.T) {
	for _, v := range []string{"gpt-2", "deepseek-coder", "falcon"} {
		tok := loadVocab(t, v)
		for _, s := range []string{"a\xffb", "\xe2\x82", "x\xc3", "\xed\xa0\x80z"} {
			got, err := tok.Encode(s, false, false)
			if err != nil {
				t.Fatalf("%s: Encode(%q): %v", v, s, err)
			}
			var fixed []byte // invalid sequences as U+FFFD, surrogates kept
			for i := 0; i < len(s); {
				r, n := decodeRune(s, i)
				fixed = appendRune(fixed, r)
				i += n
			}
			want, _ := tok.Encode(string(fixed), false, false)
			if !slices.Equal(got, want) {
				t.Errorf("%s: Encode(%q) = %v, want %v (as %q)", v, s, got, want, string(fixed))
			}
		}
	}
}

// TestSpecialInjection checks that control-token text in user content is
// not turned into control tokens unless parseSpecial is set.
func TestSpecialInjection(t *testing.T) {
	tok := loadVocab(t, "phi-3")
	end, ok := tok.TokenID("<|end|>")
	if !ok {
		t.Skip("phi-3 vocabulary has no <|end|>")
	}
	for _, parse := range []bool{false, true} {
		ids, err := tok.Encode("hi<|end|>there", false, parse)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(ids, end); got != parse {
			t.Errorf("Encode(%q, false, %v) contains <|end|> = %v, want %v (ids %v)", "hi<|end|>there", parse, got, parse, ids)
		}
	}
	if !tok.IsEOG(end) {
		t.Errorf("IsEOG(<|end|>) = false, want true")
	}
	// Phi-3 marks its EOS "</s>" user-defined, which Encode matches even
	// without parseSpecial (as the reference); EncodeText matches no
	// special token: the text's ids are those of the plain merge.
	for _, text := range []string{"hi</s>there", "a<|end|><|system|>b</s>"} {
		ids, err := tok.EncodeText(text)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveSPM(tok, text); !slices.Equal(ids, want) {
			t.Errorf("EncodeText(%q) = %v, want %v", text, ids, want)
		}
	}
}

// naiveSPM is the textbook merge loop, quadratic but obviously right:
// repeatedly merge the best adjacent pair (highest SPM score, leftmost on
// ties) over the whole text, then emit tokens or byte fallbacks.
func naiveSPM(t *Tokenizer, text string) []int32 {
	if text == "" {
		return nil
	}
	esc := "\u2581" + strings.ReplaceAll(text, " ", "\u2581")
	var syms []string
	for i := 0; i < len(esc); {
		n := min(utf8Len(esc[i]), len(esc)-i)
		syms = append(syms, esc[i:i+n])
		i += n
	}
	for {
		best, bestScore := -1, float32(0)
		for i := 0; i+1 < len(syms); i++ {
			id, ok := t.ids[syms[i]+syms[i+1]]
			if ok && (best < 0 || t.scores[id] > bestScore) {
				best, bestScore = i, t.scores[id]
			}
		}
		if best < 0 {
			break
		}
		syms = slices.Replace(syms, best, best+2, syms[best]+syms[best+1])
	}
	var out []int32
	for _, s := range syms {
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for _, b := range []byte(s) {
			out = append(out, t.byteToken(b))
		}
	}
	return out
}

// TestSPMAgainstNaive compares the heap-based, word-split SPM merge with the
// naive whole-text loop on random text.
func TestSPMAgainstNaive(t *testing.T) {
	tok := loadVocab(t, "llama-spm")
	rng := testseed.Rand(t, 1)
	alphabet := []string{"a", "b", "e", "n", "t", "th", " ", " ", "  ", ".", ",", "é", "日", "🦙", "\xe2", "\x96", "▁", "\n", "1", "Hello"}
	for i := 0; i < 200; i++ {
		var sb strings.Builder
		for n := rng.IntN(40); n > 0; n-- {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := sb.String()
		got, _ := tok.Encode(s, false, false)
		if want := naiveSPM(tok, s); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, want %v (naive)", s, got, want)
		}
	}
}

// TestLongInputLinear encodes one long word (no spaces) of 256 KiB and of
// 1 MiB and counts the merge queue's sift steps: 4x the input must take
// about 4x the work (n log n gives 4.4x), far from the 16x of a quadratic
// merge. It counts work rather than time so that a loaded machine cannot
// fail it; BenchmarkEncodeLongWord measures the time.
func TestLongInputLinear(t *testing.T) {
	for _, v := range []string{"llama-spm", "gpt-2"} {
		t.Run(v, func(t *testing.T) {
			tok := loadVocab(t, v)
			measure := func(n int) int {
				steps := 0
				siftSteps = &steps
				defer func() { siftSteps = nil }()
				ids, err := tok.Encode(longWord(n), false, false)
				if err != nil || len(ids) == 0 {
					t.Fatalf("Encode(%d bytes) = %d ids, %v", n, len(ids), err)
				}
				if steps == 0 {
					t.Fatalf("Encode(%d bytes) counted no merge work", n)
				}
				return steps
			}
			small, large := measure(1<<18), measure(1<<20)
			t.Logf("sift steps: 256 KiB %d, 1 MiB %d (%.2fx)", small, large, float64(large)/float64(small))
			if large > 5*small {
				t.Errorf("Encode: 1 MiB took %d sift steps, 256 KiB %d: more than 5x for 4x the input", large, small)
			}
		})
	}
}

// longWord returns n bytes of "abcdefghij" repeated: one word, no spaces.
func longWord(n int) string { return strings.Repeat("abcdefghij", n/10) }

// TestDecoderSplitUTF8 feeds byte tokens one at a time: nothing is emitted
// until a character is complete; bytes that cannot start a character pass
// through; Flush returns a trailing partial character.
func TestDecoderSplitUTF8(t *testing.T) {
	tok := loadVocab(t, "llama-spm")
	b := func(c byte) int32 { return int32(3 + int(c)) }
	hello, _ := tok.TokenID("▁Hello")
	cases := []struct {
		name  string
		ids   []int32
		steps []string // Add output after each id
		flush string
	}{
		{"euro", []int32{b(0xe2), b(0x82), b(0xac)}, []string{"", "", "€"}, ""},
		{"llama emoji", []int32{b(0xf0), b(0x9f), b(0xa6), b(0x99)}, []string{"", "", "", "🦙"}, ""},
		{"invalid byte passes", []int32{b(0xff)}, []string{"\xff"}, ""},
		{"cut short then word", []int32{b(0xe2), hello}, []string{"", "\xe2 Hello"}, ""},
		{"trailing partial", []int32{hello, b(0xe2), b(0x82)}, []string{" Hello", "", ""}, "\xe2\x82"},
		{"control not rendered", []int32{1, hello, 2}, []string{"", " Hello", ""}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := tok.NewDecoder()
			for i, id := range c.ids {
				if got := string(d.Add(id)); got != c.steps[i] {
					t.Errorf("Add(%d) = %q, want %q", id, got, c.steps[i])
				}
			}
			if got := string(d.Flush()); got != c.flush {
				t.Errorf("Flush() = %q, want %q", got, c.flush)
			}
		})
	}
}

// TestDecoderMatchesDecode streams every fixture input's ids and checks the
// concatenation equals the pieces joined, each chunk being valid UTF-8
// where the input was.
func TestDecoderMatchesDecode(t *testing.T) {
	dir := fixtures.Dir(t, "vocab")
	for _, v := range []string{"llama-spm", "gpt-2", "deepseek-coder"} {
		tok := loadVocab(t, v)
		inputs, _ := readPairs(t, filepath.Join(dir, "ggml-vocab-"+v+".gguf"))
		for _, in := range inputs {
			ids, _ := tok.Encode(in, false, false)
			d := tok.NewDecoder()
			var all, joined []byte
			for _, id := range ids {
				chunk := d.Add(id)
				if utf8.ValidString(in) && !utf8.Valid(chunk) {
					t.Errorf("%s: Add(%d) = %q, not valid UTF-8", v, id, chunk)
				}
				all = append(all, chunk...)
				joined = append(joined, tok.Piece(id)...)
			}
			all = append(all, d.Flush()...)
			if string(all) != string(joined) {
				t.Errorf("%s: streamed %q, want %q", v, all, joined)
			}
		}
	}
}

// TestDecodeRules checks the reference's detokenizer rules: the first
// token's added space is stripped unless BOS comes first; GPT-2's clean-up
// removes a space before punctuation; out-of-range ids are errors.
func TestDecodeRules(t *testing.T) {
	spm := loadVocab(t, "llama-spm")
	gpt := loadVocab(t, "gpt-2")
	cases := []struct {
		name string
		tok  *Tokenizer
		ids  []int32
		want string
	}{
		{"spm strips first space", spm, []int32{15043, 3186}, "Hello world"},
		{"spm BOS keeps space", spm, []int32{1, 15043, 3186}, " Hello world"},
		{"spm byte fallback", spm, []int32{3 + 0xe2, 3 + 0x82, 3 + 0xac}, "€"},
		{"gpt2 clean-up", gpt, []int32{15496, 837, 995, 5145}, "Hello, world!"},
		{"gpt2 endoftext not rendered", gpt, []int32{15496, 50256}, "Hello"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, err := c.tok.Decode(c.ids); err != nil || got != c.want {
				t.Errorf("Decode(%v) = %q, %v, want %q", c.ids, got, err, c.want)
			}
		})
	}
	if _, err := spm.Decode([]int32{-1}); err == nil {
		t.Errorf("Decode([-1]) error = nil, want an error")
	}
	if _, err := spm.Decode([]int32{int32(spm.VocabSize())}); err == nil {
		t.Errorf("Decode([VocabSize]) error = nil, want an error")
	}
	if p := gpt.Piece(50256); string(p) != "<|endoftext|>" {
		t.Errorf("Piece(50256) = %q, want %q", p, "<|endoftext|>")
	}
	if p := spm.Piece(15043); string(p) != " Hello" {
		t.Errorf("Piece(15043) = %q, want %q", p, " Hello")
	}
}

// TestDecoderAllocs checks that streaming allocates nothing once the
// decoder's buffers have grown.
func TestDecoderAllocs(t *testing.T) {
	tok := loadVocab(t, "llama-spm")
	hello, _ := tok.TokenID("▁Hello")
	ids := []int32{hello, 3 + 0xe2, 3 + 0x82, 3 + 0xac, hello}
	d := tok.NewDecoder()
	for _, id := range ids {
		d.Add(id)
	}
	d.Flush()
	allocs := testing.AllocsPerRun(100, func() {
		for _, id := range ids {
			d.Add(id)
		}
		d.Flush()
	})
	if allocs != 0 {
		t.Errorf("Decoder.Add/Flush allocs = %v, want 0", allocs)
	}
}
