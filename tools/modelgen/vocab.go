package modelgen

import (
	"fmt"
	"sort"
	"strings"
)

// corpus is the text the built-in vocabularies are trained on. It is ours,
// written for this purpose: plain English prose, some code and numbers, so
// that the merges cover what tests type.
const corpus = `The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox runs into the forest.
Once upon a time there was a small village by the river. The people of the village were farmers and fishermen.
Every morning they went to the fields and to the water, and every evening they came home to eat and to sleep.
What is the capital of France? The capital of France is Paris. What is two plus two? Two plus two is four.
Hello, world! How are you today? I am fine, thank you. Tell me a story about a dragon and a knight.
The weather is nice today. It is sunny and warm, with a light wind from the west.
func main() { fmt.Println("hello") } for i := 0; i < 10; i++ { sum += i } return sum
def add(a, b): return a + b  # numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 3.14
The assistant answers the question of the user. The user asks, and the assistant replies with a helpful answer.
Write a short poem about the sea. The sea is blue and deep, the waves are high, the wind is cold.
In the beginning the universe was created. This has made a lot of people very angry and been widely regarded as a bad move.
She said that they would come back tomorrow, but nobody believed her, because they never came back before.
A model reads tokens and predicts the next token. Language models learn from text and produce text.
{"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}} [1, 2, 3] true false null`

// Special tokens of the built-in vocabularies, in id order after the
// learned ones.
var bpeSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// byteToUnicode is GPT-2's reversible map from bytes to printable runes.
func byteToUnicode() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// pretokenize splits text into words the way GPT-2 style tokenizers roughly
// do: a word keeps its leading space; runs of letters, digits, and other
// characters are separate.
func pretokenize(text string) []string {
	var words []string
	var cur strings.Builder
	class := func(r rune) int {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			return 1
		case r >= '0' && r <= '9':
			return 2
		case r == ' ' || r == '\n':
			return 3
		}
		return 4
	}
	prev := 0
	for _, r := range text {
		c := class(r)
		if cur.Len() > 0 && !(c == prev || (prev == 3 && c != 3 && cur.String() == " ")) {
			words = append(words, cur.String())
			cur.Reset()
		}
		cur.WriteRune(r)
		prev = c
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

// learnMerges runs byte-pair-encoding training over the corpus words, each a
// sequence of symbols, and returns up to n merges in the order learned. Ties
// are broken by the pair's text so that the result is deterministic.
func learnMerges(words [][]string, n int) [][2]string {
	type pair struct{ a, b string }
	var merges [][2]string
	for len(merges) < n {
		counts := map[pair]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w); i++ {
				counts[pair{w[i], w[i+1]}]++
			}
		}
		best, bestN := pair{}, 0
		for p, c := range counts {
			if c > bestN || (c == bestN && p.a+"\x00"+p.b < best.a+"\x00"+best.b) {
				best, bestN = p, c
			}
		}
		if bestN == 0 {
			break
		}
		merges = append(merges, [2]string{best.a, best.b})
		for wi, w := range words {
			out := w[:0:0]
			for i := 0; i < len(w); i++ {
				if i+1 < len(w) && w[i] == best.a && w[i+1] == best.b {
					out = append(out, best.a+best.b)
					i++
				} else {
					out = append(out, w[i])
				}
			}
			words[wi] = out
		}
	}
	return merges
}

// Vocab is a built-in tokenizer vocabulary in GGUF form.
type Vocab struct {
	Model     string // tokenizer.ggml.model
	Pre       string // tokenizer.ggml.pre
	Tokens    []string
	Scores    []float32 // SPM only
	Types     []int32
	Merges    []string // BPE only
	BOS, EOS  int32
	UNK       int32 // -1 when absent
	AddBOS    bool
	EOT       int32 // -1 when absent
	Template  string
	AddPrefix bool
}

// Token types of llama.cpp's vocabulary.
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// chatMLTemplate is a ChatML Jinja template for the BPE vocabulary, which has
// the <|im_start|> and <|im_end|> tokens.
const chatMLTemplate = `{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`

// BPEVocab returns a byte-level BPE vocabulary of about size tokens (at least
// 256 bytes + 3 specials) trained on the built-in corpus.
func BPEVocab(size int) (*Vocab, error) {
	if size < 256+len(bpeSpecials) {
		return nil, fmt.Errorf("modelgen: BPE vocabulary size %d below the minimum %d", size, 256+len(bpeSpecials))
	}
	b2u := byteToUnicode()
	enc := func(s string) []string {
		out := make([]string, 0, len(s))
		for i := 0; i < len(s); i++ {
			out = append(out, string(b2u[s[i]]))
		}
		return out
	}
	var words [][]string
	for _, w := range pretokenize(corpus) {
		words = append(words, enc(w))
	}
	v := &Vocab{Model: "gpt2", Pre: "gpt-2", UNK: -1, Template: chatMLTemplate}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, string(b2u[b]))
		v.Types = append(v.Types, tokenNormal)
	}
	seen := map[string]bool{}
	for _, t := range v.Tokens {
		seen[t] = true
	}
	for _, m := range learnMerges(words, size-256-len(bpeSpecials)) {
		tok := m[0] + m[1]
		v.Merges = append(v.Merges, m[0]+" "+m[1])
		if !seen[tok] {
			seen[tok] = true
			v.Tokens = append(v.Tokens, tok)
			v.Types = append(v.Types, tokenNormal)
		}
	}
	for _, s := range bpeSpecials {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, tokenControl)
	}
	n := int32(len(v.Tokens))
	// <|endoftext|> is both BOS and EOS (as in GPT-2 and Qwen); <|im_end|>
	// ends a chat turn.
	v.BOS, v.EOS, v.EOT = n-3, n-3, n-1
	return v, nil
}

// addWords adds normal tokens to a BPE vocabulary (before its special
// tokens, whose ids it moves up), each the last merge of its first byte
// and the rest.
func (v *Vocab) addWords(words []string) error {
	b2u := byteToUnicode()
	ids := map[string]bool{}
	for _, t := range v.Tokens {
		ids[t] = true
	}
	n := len(bpeSpecials)
	specials := append([]string(nil), v.Tokens[len(v.Tokens)-n:]...)
	types := append([]int32(nil), v.Types[len(v.Types)-n:]...)
	v.Tokens, v.Types = v.Tokens[:len(v.Tokens)-n], v.Types[:len(v.Types)-n]
	for _, w := range words {
		if len(w) < 2 {
			return fmt.Errorf("modelgen: word %q: want at least two bytes", w)
		}
		var enc []string
		for i := 0; i < len(w); i++ {
			enc = append(enc, string(b2u[w[i]]))
		}
		first, rest := enc[0], strings.Join(enc[1:], "")
		if !ids[rest] {
			return fmt.Errorf("modelgen: word %q: its tail %q is not a token", w, rest)
		}
		if tok := first + rest; !ids[tok] {
			ids[tok] = true
			v.Merges = append(v.Merges, first+" "+rest)
			v.Tokens = append(v.Tokens, tok)
			v.Types = append(v.Types, tokenNormal)
		}
	}
	v.Tokens, v.Types = append(v.Tokens, specials...), append(v.Types, types...)
	m := int32(len(v.Tokens))
	v.BOS, v.EOS, v.EOT = m-3, m-3, m-1
	return nil
}

// SPMVocab returns a SentencePiece-style vocabulary of about size tokens:
// <unk>, <s>, </s>, the 256 byte-fallback tokens, the corpus's characters,
// then merged pieces scored by the order they were learned.
func SPMVocab(size int) (*Vocab, error) {
	v := &Vocab{Model: "llama", Pre: "default", UNK: 0, BOS: 1, EOS: 2, EOT: -1, AddBOS: true, AddPrefix: true}
	v.Tokens = []string{"<unk>", "<s>", "</s>"}
	v.Types = []int32{tokenUnknown, tokenControl, tokenControl}
	v.Scores = []float32{0, 0, 0}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("<0x%02X>", b))
		v.Types = append(v.Types, tokenByte)
		v.Scores = append(v.Scores, 0)
	}
	text := "▁" + strings.ReplaceAll(strings.ReplaceAll(corpus, "\n", " "), " ", "▁")
	var words [][]string
	chars := map[string]bool{}
	for _, w := range strings.Split(text, "▁") {
		if w == "" {
			continue
		}
		var syms []string
		for _, r := range "▁" + w {
			syms = append(syms, string(r))
			chars[string(r)] = true
		}
		words = append(words, syms)
	}
	charList := make([]string, 0, len(chars))
	for c := range chars {
		charList = append(charList, c)
	}
	sort.Strings(charList)
	if size < len(v.Tokens)+len(charList) {
		return nil, fmt.Errorf("modelgen: SPM vocabulary size %d below the minimum %d", size, len(v.Tokens)+len(charList))
	}
	seen := map[string]bool{}
	for _, t := range v.Tokens {
		seen[t] = true
	}
	for _, c := range charList {
		seen[c] = true
		v.Tokens = append(v.Tokens, c)
		v.Types = append(v.Types, tokenNormal)
		v.Scores = append(v.Scores, -1e4) // single characters merge last
	}
	for i, m := range learnMerges(words, size-len(v.Tokens)) {
		tok := m[0] + m[1]
		if seen[tok] {
			continue
		}
		seen[tok] = true
		v.Tokens = append(v.Tokens, tok)
		v.Types = append(v.Types, tokenNormal)
		v.Scores = append(v.Scores, -float32(i))
	}
	return v, nil
}

// WPMVocab returns a WordPiece vocabulary for BERT models: [PAD], [UNK],
// [CLS], [SEP], [MASK], the corpus's characters and "##" continuations,
// then whole words of the corpus.
func WPMVocab(size int) (*Vocab, error) {
	v := &Vocab{Model: "bert", Pre: "default", UNK: 1, BOS: 2, EOS: 3, EOT: -1, AddBOS: true}
	v.Tokens = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	v.Types = []int32{tokenControl, tokenUnknown, tokenControl, tokenControl, tokenControl}
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] && len(v.Tokens) < size {
			seen[t] = true
			v.Tokens = append(v.Tokens, t)
			v.Types = append(v.Types, tokenNormal)
		}
	}
	lower := strings.ToLower(corpus)
	var chars []string
	for _, r := range lower {
		if r != ' ' && r != '\n' {
			chars = append(chars, string(r))
		}
	}
	sort.Strings(chars)
	for _, c := range chars {
		add(c)
	}
	for _, c := range chars {
		add("##" + c)
	}
	if len(v.Tokens) >= size {
		return nil, fmt.Errorf("modelgen: WPM vocabulary size %d too small for the corpus characters", size)
	}
	for _, w := range strings.Fields(lower) {
		add(strings.Trim(w, ".,!?:;\"'(){}[]#"))
	}
	return v, nil
}

// set writes the vocabulary's tokenizer.* keys.
func (v *Vocab) set(w interface{ MustSet(string, any) }) {
	w.MustSet("tokenizer.ggml.model", v.Model)
	w.MustSet("tokenizer.ggml.pre", v.Pre)
	w.MustSet("tokenizer.ggml.tokens", v.Tokens)
	w.MustSet("tokenizer.ggml.token_type", v.Types)
	if v.Scores != nil {
		w.MustSet("tokenizer.ggml.scores", v.Scores)
	}
	if v.Merges != nil {
		w.MustSet("tokenizer.ggml.merges", v.Merges)
	}
	w.MustSet("tokenizer.ggml.bos_token_id", uint32(v.BOS))
	w.MustSet("tokenizer.ggml.eos_token_id", uint32(v.EOS))
	if v.UNK >= 0 {
		w.MustSet("tokenizer.ggml.unknown_token_id", uint32(v.UNK))
	}
	if v.EOT >= 0 {
		w.MustSet("tokenizer.ggml.eot_token_id", uint32(v.EOT))
	}
	if v.Model == "bert" {
		w.MustSet("tokenizer.ggml.seperator_token_id", uint32(v.EOS))
		w.MustSet("tokenizer.ggml.cls_token_id", uint32(v.BOS))
		w.MustSet("tokenizer.ggml.padding_token_id", uint32(0))
		w.MustSet("tokenizer.ggml.mask_token_id", uint32(4))
	}
	w.MustSet("tokenizer.ggml.add_bos_token", v.AddBOS)
	w.MustSet("tokenizer.ggml.add_eos_token", v.Model == "bert")
	if v.Model == "llama" {
		w.MustSet("tokenizer.ggml.add_space_prefix", v.AddPrefix)
	}
	if v.Template != "" {
		w.MustSet("tokenizer.chat_template", v.Template)
	}
}
