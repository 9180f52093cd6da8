package api

import (
	"unicode/utf8"
	"unsafe"
)

func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }

// validPrefixLen returns the length of the longest prefix of b that does not
// end inside an incomplete UTF-8 sequence: a trailing partial character (one
// that may still be completed by later bytes) is held back; bytes that can
// never become valid are passed on (they will be written as U+FFFD).
func validPrefixLen(b []byte) int {
	n := len(b)
	// Look at most 3 bytes back for the start of a multi-byte character.
	for i := n - 1; i >= 0 && i >= n-3; i-- {
		c := b[i]
		if c < 0x80 {
			return n
		}
		if c >= 0xC0 { // leading byte
			want := 0
			switch {
			case c >= 0xF0 && c <= 0xF4:
				want = 4
			case c >= 0xE0:
				want = 3
			case c >= 0xC2:
				want = 2
			default:
				return n
			}
			if n-i < want && utf8.FullRune(b[i:]) == false {
				return i
			}
			return n
		}
	}
	return n
}

// validText replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD, as the JSON encoders do.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

// unsafeString views b as a string for read-only use within the call.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
