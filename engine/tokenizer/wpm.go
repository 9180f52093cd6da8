package tokenizer

import (
	"unicode"

	"golang.org/x/text/unicode/norm"
)

func (t *Tokenizer) encodeWPM(out []int32, text string, frags []fragment) []int32 {
	for _, fr := range frags {
		if fr.tok != null {
			out = append(out, fr.tok)
			continue
		}
		for _, w := range wpmWords(text[fr.s:fr.e]) {
			out = t.wpmWord(out, w)
		}
	}
	return out
}

// nfdFirst is the reference's NFD table: a code point maps to the first code
// point of its canonical decomposition (so accents are dropped).
func nfdFirst(r rune) rune {
	if r < 0xc0 {
		return r
	}
	var buf [4]byte
	d := norm.NFD.Append(nil, appendRune(buf[:0], r)...)
	if len(d) == 0 {
		return r
	}
	f, _ := decodeRune(string(d), 0)
	return f
}

func isChinese(r rune) bool {
	return r >= 0x4e00 && r <= 0x9fff || r >= 0x3400 && r <= 0x4dbf ||
		r >= 0x20000 && r <= 0x2a6df || r >= 0x2a700 && r <= 0x2b73f ||
		r >= 0x2b740 && r <= 0x2b81f || r >= 0x2b920 && r <= 0x2ceaf ||
		r >= 0xf900 && r <= 0xfaff || r >= 0x2f800 && r <= 0x2fa1f
}

// wpmWords normalizes (NFD first code point, lower case) and splits on
// whitespace, punctuation, ASCII symbols and CJK ideographs, dropping
// control characters.
func wpmWords(s string) []string {
	var words []string
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		i += n
		r = nfdFirst(r)
		if isWhitespace(r) {
			flush()
			continue
		}
		cat := category(r)
		if r == 0 || r == 0xfffd || cat == catControl {
			continue
		}
		lr := unicode.ToLower(r)
		if cat == catPunct || r < 0x7f && cat == catSymbol || isChinese(r) {
			flush()
			words = append(words, string(appendRune(nil, lr)))
			continue
		}
		cur = appendRune(cur, lr)
	}
	flush()
	return words
}

// wpmWord emits the longest-match-first pieces of "▁"+word, or UNK when any
// position has no match.
func (t *Tokenizer) wpmWord(out []int32, word string) []int32 {
	w := "\u2581" + word
	n := len(w)
	mark := len(out)
	for i := 0; i < n; i++ {
		match := false
		for j := min(n, i+t.maxLen+1); j > i; j-- {
			if id, ok := t.ids[w[i:j]]; ok {
				out = append(out, id)
				match = true
				i = j - 1
				break
			}
		}
		if !match {
			out = out[:mark]
			break
		}
	}
	if len(out) == mark && t.unk != null {
		out = append(out, t.unk)
	}
	return out
}
