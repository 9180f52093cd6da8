package tokenizer

import (
	"fmt"
	"unicode"
)

// The BPE pre-tokenizers are hand-written splitters, one per regular
// expression the reference applies for a tokenizer.ggml.pre value. The
// reference runs the expressions one after another: each one splits every
// piece left by the previous one into its matches and the unmatched text
// between them. Its GPT-2, Llama-3 and Qwen2 expressions have hand-written
// implementations in the reference too; the others run through std::regex
// (ECMAScript, leftmost match, ordered alternatives) on a "collapsed" text
// where every non-ASCII code point stands for its category. The matchers here
// follow those semantics; see the README for why no regexp engine is used.

// span is a half-open range of code point indexes.
type span struct{ s, e int32 }

// stage splits the pieces of cps into finer pieces, appending them to out.
type stage func(cps []rune, in, out []span) []span

// matcher returns the end of the match of a pattern starting exactly at p
// (within [p, end)), or -1.
type matcher func(cps []rune, p, end int) int

// search turns a matcher into a stage with std::regex_iterator semantics:
// leftmost matches, unmatched gaps kept as pieces.
func search(m matcher) stage {
	return func(cps []rune, in, out []span) []span {
		for _, sp := range in {
			start, end := int(sp.s), int(sp.e)
			gap := start
			for p := start; p < end; {
				e := m(cps, p, end)
				if e <= p {
					p++
					continue
				}
				if p > gap {
					out = append(out, span{int32(gap), int32(p)})
				}
				out = append(out, span{int32(p), int32(e)})
				p, gap = e, e
			}
			if gap < end {
				out = append(out, span{int32(gap), int32(end)})
			}
		}
		return out
	}
}

// class tests one code point.
type class func(r rune) bool

// Classes of the collapsed text: ASCII code points as themselves, others by
// category, whitespace first.
func isL(r rune) bool {
	if r < 0x80 {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return !isWhitespace(r) && unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < 0x80 {
		return r >= '0' && r <= '9'
	}
	return !isWhitespace(r) && unicode.Is(unicode.N, r)
}

func isP(r rune) bool {
	if r < 0x80 {
		return category(r) == catPunct
	}
	return !isWhitespace(r) && category(r) == catPunct
}

func isCR(r rune) bool { return r == '\r' || r == '\n' }

func inSet(set string) class {
	return func(r rune) bool {
		for _, c := range set {
			if c == r {
				return true
			}
		}
		return false
	}
}

func or(a, b class) class { return func(r rune) bool { return a(r) || b(r) } }

// wide adapts a class written against raw code points to the reference's
// std::wregex path, where non-ASCII whitespace is replaced by U+000B first.
func wide(c class) class {
	return func(r rune) bool {
		if r > 0x7f && isWhitespace(r) {
			r = 0x0b
		}
		return c(r)
	}
}

// ranges parses a bracket expression body of single code points and a-b
// ranges (no escapes) into a class.
func ranges(body string) class {
	rs := []rune(body)
	type rg struct{ lo, hi rune }
	var list []rg
	for i := 0; i < len(rs); i++ {
		if i+2 < len(rs) && rs[i+1] == '-' {
			list = append(list, rg{rs[i], rs[i+2]})
			i += 2
			continue
		}
		list = append(list, rg{rs[i], rs[i]})
	}
	return func(r rune) bool {
		for _, x := range list {
			if r >= x.lo && r <= x.hi {
				return true
			}
		}
		return false
	}
}

// run matches X+.
func run(c class) matcher {
	return func(cps []rune, p, end int) int {
		q := p
		for q < end && c(cps[q]) {
			q++
		}
		if q == p {
			return -1
		}
		return q
	}
}

// one matches X.
func one(c class) matcher {
	return func(cps []rune, p, end int) int {
		if c(cps[p]) {
			return p + 1
		}
		return -1
	}
}

// exactly matches X{n}.
func exactly(c class, n int) matcher {
	return func(cps []rune, p, end int) int {
		if p+n > end {
			return -1
		}
		for q := p; q < p+n; q++ {
			if !c(cps[q]) {
				return -1
			}
		}
		return p + n
	}
}

// optWSRun matches \s?X+ (X never contains whitespace).
func optWSRun(c class) matcher {
	r := run(c)
	return func(cps []rune, p, end int) int {
		if isWhitespace(cps[p]) && p+1 < end {
			if e := r(cps, p+1, end); e > 0 {
				return e
			}
		}
		return r(cps, p, end)
	}
}

// trailingWS splits off the trailing whitespace run of each piece: the
// leftmost match of \s+$ (found directly, not by trying every start, which
// would be quadratic in the run's length).
func trailingWS(cps []rune, in, out []span) []span {
	for _, sp := range in {
		q := sp.e
		for q > sp.s && isWhitespace(cps[q-1]) {
			q--
		}
		if q > sp.s && q < sp.e {
			out = append(out, span{sp.s, q}, span{q, sp.e})
			continue
		}
		out = append(out, sp)
	}
	return out
}

// finnish matches " ?[^(\s|.,!?…。，、।۔،)]+" on the wide text.
func finnish() matcher {
	stop := inSet("(|.,!?…。，、।۔،)")
	c := func(r rune) bool { return !isWhitespace(r) && !stop(r) }
	r := run(c)
	return func(cps []rune, p, end int) int {
		if cps[p] == ' ' && p+1 < end {
			if e := r(cps, p+1, end); e > 0 {
				return e
			}
		}
		return r(cps, p, end)
	}
}

// wsTail matches the reference's trailing whitespace alternatives
// \s*[\r\n]+ (when withCR), \s+(?!\S) and \s+ at p.
func wsTail(cps []rune, p, end int, withCR bool) int {
	n, lastCR := 0, -1
	for p+n < end && isWhitespace(cps[p+n]) {
		if isCR(cps[p+n]) {
			lastCR = p + n + 1
		}
		n++
	}
	if withCR && lastCR > 0 {
		return lastCR
	}
	if n > 1 && p+n < end {
		return p + n - 1
	}
	if n > 0 {
		return p + n
	}
	return -1
}

// gpt2 is the reference's custom splitter for
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// where unassigned code points match no alternative (they become single
// pieces).
func gpt2(cps []rune, p, end int) int {
	c := cps[p]
	if c == '\'' && p+1 < end {
		n := cps[p+1]
		if n == 's' || n == 't' || n == 'm' || n == 'd' {
			return p + 2
		}
		if p+2 < end {
			nn := cps[p+2]
			if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
				return p + 3
			}
		}
	}
	get := func(q int) flags {
		if q < end {
			return flagsOf(cps[q])
		}
		return flags{}
	}
	q := p
	f := get(p)
	if c == ' ' {
		f = get(p + 1)
	}
	other := func(f flags) bool {
		return !f.ws && f.cat != catLetter && f.cat != catNumber && f.defined()
	}
	switch {
	case f.cat == catLetter && !f.ws:
		if c == ' ' {
			q++
		}
		for q < end && isL(cps[q]) {
			q++
		}
		return q
	case f.cat == catNumber && !f.ws:
		if c == ' ' {
			q++
		}
		for q < end && isN(cps[q]) {
			q++
		}
		return q
	case other(f):
		if c == ' ' {
			q++
		}
		for q < end && other(flagsOf(cps[q])) {
			q++
		}
		return q
	}
	if e := wsTail(cps, p, end, false); e > 0 {
		return e
	}
	return p + 1
}

// llama3 is the reference's custom splitter for
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (Llama 3 with up to 3 digits, Qwen2 with 1).
func llama3(maxDigits int) matcher {
	return func(cps []rune, p, end int) int {
		c := cps[p]
		if c == '\'' && p+1 < end {
			n := unicode.ToLower(cps[p+1])
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				return p + 2
			}
			if p+2 < end {
				nn := unicode.ToLower(cps[p+2])
				if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
					return p + 3
				}
			}
		}
		f := flagsOf(c)
		letter := func(q int) bool { return q < end && isL(cps[q]) }
		if !(isCR(c) || f.cat == catNumber && !f.ws) {
			if letter(p) || letter(p+1) {
				q := p + 1
				for letter(q) {
					q++
				}
				return q
			}
		}
		if f.cat == catNumber && !f.ws {
			q := p
			for q < end && q-p < maxDigits && isN(cps[q]) {
				q++
			}
			return q
		}
		f2 := f
		if c == ' ' {
			f2 = flags{}
			if p+1 < end {
				f2 = flagsOf(cps[p+1])
			}
		}
		other := func(f flags) bool {
			return !f.ws && f.cat != catLetter && f.cat != catNumber
		}
		if other(f2) && f.defined() && f2.defined() {
			q := p
			if c == ' ' {
				q++
			}
			for q < end {
				g := flagsOf(cps[q])
				if !other(g) || !g.defined() {
					break
				}
				q++
			}
			for q < end && isCR(cps[q]) {
				q++
			}
			return q
		}
		if e := wsTail(cps, p, end, true); e > 0 {
			return e
		}
		return p + 1
	}
}

// caseSplit matches the Tekken and o200k (GPT-4o) expressions on the
// collapsed text, where "upper" is a letter other than a-z and "lower" a
// letter other than A-Z (so non-ASCII letters are both):
//
//	[^\r\n\p{L}\p{N}]?upper*lower+C?|[^\r\n\p{L}\p{N}]?upper+lower*C?|\p{N}{1,maxDigits}|
//	 ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where C, present with contractions, is '[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD].
func caseSplit(contractions bool, maxDigits int) matcher {
	return func(cps []rune, p, end int) int {
		upper := func(q int) bool {
			return q < end && isL(cps[q]) && !(cps[q] >= 'a' && cps[q] <= 'z')
		}
		lower := func(q int) bool {
			return q < end && isL(cps[q]) && !(cps[q] >= 'A' && cps[q] <= 'Z')
		}
		// alt1: upper* lower+ (upper* gives back non-ASCII letters when no
		// lower follows the run).
		alt1 := func(q int) int {
			r := q
			for upper(r) {
				r++
			}
			if lower(r) {
				for lower(r) {
					r++
				}
				return r
			}
			for j := r - 1; j >= q; j-- {
				if lower(j) {
					return j + 1
				}
			}
			return -1
		}
		alt2 := func(q int) int {
			r := q
			for upper(r) {
				r++
			}
			if r == q {
				return -1
			}
			for lower(r) {
				r++
			}
			return r
		}
		c := cps[p]
		prefix := !isCR(c) && !isL(c) && !isN(c)
		for _, alt := range []func(int) int{alt1, alt2} {
			e := -1
			if prefix {
				e = alt(p + 1)
			}
			if e < 0 {
				e = alt(p)
			}
			if e > 0 {
				if contractions {
					e = contraction(cps, e, end)
				}
				return e
			}
		}
		if isN(c) {
			q := p
			for q < end && q-p < maxDigits && isN(cps[q]) {
				q++
			}
			return q
		}
		other := func(r rune) bool { return !isWhitespace(r) && !isL(r) && !isN(r) }
		q := p
		if c == ' ' && p+1 < end && other(cps[p+1]) {
			q++
		}
		if other(cps[q]) {
			for q < end && other(cps[q]) {
				q++
			}
			for q < end && (isCR(cps[q]) || cps[q] == '/') {
				q++
			}
			return q
		}
		return wsTail(cps, p, end, true)
	}
}

// contraction extends a match ending at e over an optional English
// contraction ('s, 't, 're, 've, 'm, 'll, 'd in either case).
func contraction(cps []rune, e, end int) int {
	if e+1 >= end || cps[e] != '\'' {
		return e
	}
	low := func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	a := low(cps[e+1])
	switch a {
	case 's', 't', 'm', 'd':
		return e + 2
	}
	if e+2 < end {
		b := low(cps[e+2])
		if a == 'r' && b == 'e' || a == 'v' && b == 'e' || a == 'l' && b == 'l' {
			return e + 3
		}
	}
	return e
}

// preTokenizer is the pipeline for one tokenizer.ggml.pre value.
type preTokenizer struct {
	stages       []stage
	ignoreMerges bool // a word that is a token is emitted whole (Llama 3, Tekken)
	cleanSpaces  bool // Decode removes spaces before punctuation
	addBOS       bool // the default of add_bos_token
	noBOS        bool // the pre-tokenizer clears the BOS id (chatglm-bpe)
}

// The reference's literal classes. Code points with singleton canonical
// decompositions (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A) are
// escaped so that no normalizing editor can change them.
const (
	deepseekLetters = "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃"
	deepseekPunct   = "!-/:-~！-／：-～‘-‟　-。"
	cjk             = "一-龥ࠀ-一가-퟿"
)

// newPreTokenizer returns the pipeline for pre, or an error for a value the
// reference does not know. An empty pre is the reference's "default".
func newPreTokenizer(pre string) (*preTokenizer, error) {
	asciiDigit := func(r rune) bool { return r >= '0' && r <= '9' }
	gpt2Stage := search(gpt2)
	pt := &preTokenizer{cleanSpaces: true}
	switch pre {
	case "", "default":
		pt.stages = []stage{
			search(run(or(isP, inSet("$+<=>^~|")))),
			gpt2Stage,
			search(run(isN)),
			search(exactly(asciiDigit, 3)),
		}
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2":
		pt.stages = []stage{search(llama3(3))}
		pt.ignoreMerges, pt.addBOS = true, true
	case "dbrx", "smaug-bpe":
		pt.stages = []stage{search(llama3(3))}
	case "chatglm-bpe", "glm4":
		pt.stages = []stage{search(llama3(3))}
		pt.noBOS = true
	case "deepseek-llm":
		pt.stages = []stage{
			search(one(isCR)),
			search(optWSRun(wide(ranges(deepseekLetters)))),
			search(optWSRun(wide(ranges(deepseekPunct)))),
			trailingWS,
			search(run(wide(ranges(cjk)))),
			search(run(isN)),
		}
		pt.cleanSpaces = false
	case "deepseek-coder":
		pt.stages = []stage{
			search(one(isCR)),
			search(optWSRun(isL)),
			search(optWSRun(isP)),
			search(run(wide(ranges(cjk)))),
			search(one(isN)),
		}
		pt.cleanSpaces = false
	case "falcon":
		pt.stages = []stage{
			search(run(or(isP, inSet("$+<=>^~|`")))),
			gpt2Stage,
			search(exactly(asciiDigit, 3)),
		}
	case "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b":
		pt.stages = []stage{search(one(isN)), gpt2Stage}
		pt.cleanSpaces = pre != "command-r" && pre != "smollm"
	case "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
		"jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "gpt-neox", "a.x-4.0", "mellum", "exaone4":
		pt.stages = []stage{gpt2Stage}
	case "qwen2", "deepseek-r1-qwen", "kormo":
		pt.stages = []stage{search(llama3(1))}
		pt.cleanSpaces = false
	case "stablelm2", "megrez":
		pt.stages = []stage{search(llama3(1))}
	case "poro-chat", "bloom", "gpt3-finnish":
		pt.stages = []stage{search(finnish())}
		pt.cleanSpaces = pre != "poro-chat"
	case "viking":
		pt.stages = []stage{search(finnish()), search(one(isN))}
		pt.cleanSpaces = false
	case "tekken":
		pt.stages = []stage{search(caseSplit(false, 1))}
		pt.cleanSpaces, pt.ignoreMerges, pt.addBOS = false, true, true
	case "gpt-4o", "llama4", "minimax-m2":
		pt.stages = []stage{search(caseSplit(true, 3))}
		pt.cleanSpaces = false
	default:
		return nil, fmt.Errorf("tokenizer: key %q: unknown pre-tokenizer %q", keyPre, pre)
	}
	return pt, nil
}

// split runs the pipeline over cps and returns the word spans, using buf
// and tmp as scratch.
func (pt *preTokenizer) split(cps []rune, buf, tmp []span) []span {
	buf = append(buf[:0], span{0, int32(len(cps))})
	if len(cps) == 0 {
		return buf[:0]
	}
	for _, st := range pt.stages {
		tmp = st(cps, buf, tmp[:0])
		buf, tmp = tmp, buf
	}
	return buf
}
