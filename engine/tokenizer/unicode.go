package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Code point classes as the reference implementation (llama.cpp's unicode.cpp)
// sees them. A code point has one general category (or none when unassigned)
// plus a separate whitespace bit.
const (
	catUndefined uint8 = iota
	catNumber
	catLetter
	catSeparator
	catMark
	catPunct
	catSymbol
	catControl
)

// flags is a code point's category and whitespace bit.
type flags struct {
	cat uint8
	ws  bool
}

func (f flags) defined() bool { return f.cat != catUndefined || f.ws }

// isWhitespace is the reference's whitespace set, which is Unicode's
// White_Space property: 9-13, 32, 0x85, 0xA0, 0x1680, 0x2000-0x200A, 0x2028,
// 0x2029, 0x202F, 0x205F, 0x3000.
func isWhitespace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || (r >= 9 && r <= 13)
	}
	return unicode.Is(unicode.White_Space, r)
}

// category returns the general category of r in the reference's terms.
func category(r rune) uint8 {
	if r < 0x80 {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			return catLetter
		case r >= '0' && r <= '9':
			return catNumber
		case r < 0x20 || r == 0x7f:
			return catControl
		case r == ' ':
			return catSeparator
		}
		switch r {
		case '$', '+', '<', '=', '>', '^', '`', '|', '~':
			return catSymbol
		}
		return catPunct
	}
	switch {
	case unicode.IsLetter(r):
		return catLetter
	case unicode.Is(unicode.N, r):
		return catNumber
	case unicode.Is(unicode.M, r):
		return catMark
	case unicode.Is(unicode.P, r):
		return catPunct
	case unicode.Is(unicode.S, r):
		return catSymbol
	case unicode.Is(unicode.Z, r):
		return catSeparator
	case unicode.Is(unicode.C, r):
		return catControl
	}
	return catUndefined
}

func flagsOf(r rune) flags {
	return flags{cat: category(r), ws: isWhitespace(r)}
}

// decodeRune decodes one code point the way the reference does: it accepts
// overlong forms and surrogates (no validation beyond the bit patterns), and
// an invalid or truncated sequence yields U+FFFD and consumes one byte. A
// decoded value above U+10FFFF is treated as invalid too (the reference would
// fail on it later).
func decodeRune(s string, i int) (rune, int) {
	c := s[i]
	if c < 0x80 {
		return rune(c), 1
	}
	if c&0x40 == 0 {
		return utf8.RuneError, 1
	}
	n := len(s)
	cont := func(j int) bool { return j < n && s[j]&0xc0 == 0x80 }
	if c&0x20 == 0 {
		if !cont(i + 1) {
			return utf8.RuneError, 1
		}
		return rune(c&0x1f)<<6 | rune(s[i+1]&0x3f), 2
	}
	if c&0x10 == 0 {
		if !cont(i+1) || !cont(i+2) {
			return utf8.RuneError, 1
		}
		return rune(c&0x0f)<<12 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), 3
	}
	if c&0x08 == 0 {
		if !cont(i+1) || !cont(i+2) || !cont(i+3) {
			return utf8.RuneError, 1
		}
		r := rune(c&0x07)<<18 | rune(s[i+1]&0x3f)<<12 | rune(s[i+2]&0x3f)<<6 | rune(s[i+3]&0x3f)
		if r > 0x10ffff {
			return utf8.RuneError, 1
		}
		return r, 4
	}
	return utf8.RuneError, 1
}

// appendRune encodes r as UTF-8 without rejecting surrogates, as the
// reference does.
func appendRune(b []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(b, byte(r))
	case r < 0x800:
		return append(b, 0xc0|byte(r>>6), 0x80|byte(r&0x3f))
	case r < 0x10000:
		return append(b, 0xe0|byte(r>>12), 0x80|byte(r>>6&0x3f), 0x80|byte(r&0x3f))
	}
	return append(b, 0xf0|byte(r>>18), 0x80|byte(r>>12&0x3f), 0x80|byte(r>>6&0x3f), 0x80|byte(r&0x3f))
}

// utf8Len is the sequence length announced by a lead byte (the reference's
// unicode_len_utf8): continuation and invalid bytes count as 1.
func utf8Len(c byte) int {
	switch c >> 4 {
	case 12, 13:
		return 2
	case 14:
		return 3
	case 15:
		return 4
	}
	return 1
}

// byteUnicode is GPT-2's reversible byte-to-code-point table: printable
// Latin-1 bytes map to themselves, the other 68 bytes to U+0100 onwards.
type byteUnicode struct {
	enc    [256][2]byte // UTF-8 of the mapped code point (1 or 2 bytes)
	encLen [256]uint8
	dec    map[rune]byte
}

func newByteUnicode() *byteUnicode {
	bu := &byteUnicode{dec: make(map[rune]byte, 256)}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		printable := (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
		if !printable {
			r = rune(256 + n)
			n++
		}
		var buf [4]byte
		l := utf8.EncodeRune(buf[:], r)
		copy(bu.enc[b][:], buf[:l])
		bu.encLen[b] = uint8(l)
		bu.dec[r] = byte(b)
	}
	return bu
}

func (bu *byteUnicode) appendByte(dst []byte, b byte) []byte {
	return append(dst, bu.enc[b][:bu.encLen[b]]...)
}
