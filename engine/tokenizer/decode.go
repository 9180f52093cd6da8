package tokenizer

import (
	"fmt"
	"strings"
)

// tokenToPiece is the reference's token_to_piece with special tokens
// rendered: the bytes token id stands for.
func (t *Tokenizer) tokenToPiece(id int32) []byte {
	a := t.attr[id]
	text := t.text[id]
	switch t.kind {
	case kindSPM, kindWPM:
		switch {
		case a&(attrUnknown|attrControl|attrUserDefined) != 0:
			return []byte(text)
		case a&attrNormal != 0:
			return []byte(strings.ReplaceAll(text, "\u2581", " "))
		case a&attrByte != 0:
			return []byte{parseByteToken(text)}
		}
	case kindBPE:
		switch {
		case a&(attrUnknown|attrControl|attrUserDefined) != 0:
			return []byte(text)
		case a&attrNormal != 0:
			var b []byte
			for i := 0; i < len(text); {
				r, n := decodeRune(text, i)
				i += n
				if c, ok := t.bu.dec[r]; ok {
					b = append(b, c)
					continue
				}
				b = append(b, "[UNK_BYTE_0x"...)
				for _, c := range appendRune(nil, r) {
					b = fmt.Appendf(b, "%02x", c)
				}
				b = append(b, text...)
				b = append(b, ']')
			}
			return b
		}
	}
	return nil
}

// parseByteToken reads XX of "<0xXX>" (0 when malformed, like strtol).
func parseByteToken(s string) byte {
	if len(s) < 5 {
		return 0
	}
	var v byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return v
		}
	}
	return v
}

// Piece returns the raw bytes token id emits, special tokens included as
// their text, with no leading-space stripping; nil for an id out of range.
// The caller must not modify the slice.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return t.pieces[id]
}

// rendered reports whether Decode emits id's piece: control and unknown
// tokens are not rendered.
func (t *Tokenizer) rendered(id int32) bool {
	return t.attr[id]&(attrControl|attrUnknown) == 0
}

// Decode returns the text of ids as the reference's detokenizer produces it
// (special tokens not rendered, not removed): control and unknown tokens
// emit nothing; with add_space_prefix the first token loses one leading
// space (a BOS first uses up that strip, so text after it keeps its space);
// the BPE vocabularies that ask for it get the reference's space clean-up
// before punctuation and contractions. Bytes are returned as the tokens
// spell them: invalid UTF-8 is kept. An id out of range is an error.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	var b []byte
	strip := t.addSpacePrefix
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.pieces) {
			return "", fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(t.pieces))
		}
		if !t.rendered(id) {
			strip = false
			continue
		}
		p := t.pieces[id]
		if strip && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		strip = false
		b = append(b, p...)
	}
	if t.cleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b), nil
}

// cleanSpaces is the reference's clean-up: " ?", " !", " .", " ," lose the
// space; a lone apostrophe between spaces loses both; " 's", " 'm", " 're",
// " 've" lose the space.
func cleanSpaces(t []byte) []byte {
	if len(t) == 0 {
		return t
	}
	n := 1
	for i := 1; i < len(t); i++ {
		x := t[i]
		if t[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			n--
		}
		t[n] = x
		n++
	}
	t = t[:n]
	n = 1
	for i := 1; i < len(t); i++ {
		x := t[i]
		if x == '\'' && i+1 < len(t) && t[i-1] == ' ' && t[i+1] == ' ' {
			n--
			t[i+1] = 0
			t[n] = x
			n++
			i++ // the next space is dropped (written as NUL, then skipped)
			continue
		}
		t[n] = x
		n++
	}
	t = t[:n]
	n = 1
	for i := 1; i < len(t); i++ {
		x := t[i]
		if t[i-1] == ' ' && x == '\'' && i+1 < len(t) {
			x1 := t[i+1]
			if x1 == 's' || x1 == 'm' {
				n--
			} else if i+2 < len(t) {
				x2 := t[i+2]
				if x1 == 'r' && x2 == 'e' || x1 == 'v' && x2 == 'e' {
					n--
				}
			}
		}
		t[n] = x
		n++
	}
	return t[:n]
}

// Decoder turns a stream of generated token ids into text that never ends
// in the middle of a UTF-8 character. It renders what Decode renders
// (control tokens emit nothing) but strips no leading space and applies no
// clean-up: generated text continues a prompt. A Decoder is not safe for
// concurrent use.
type Decoder struct {
	t       *Tokenizer
	pending []byte
	out     []byte
}

// NewDecoder returns an incremental decoder for t.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add appends the bytes of id and returns the complete UTF-8 text now
// available. Bytes that can never start a valid character are passed
// through as they are. The returned slice is valid until the next call.
// An id out of range adds nothing.
func (d *Decoder) Add(id int32) []byte {
	t := d.t
	if id >= 0 && int(id) < len(t.pieces) && t.rendered(id) {
		d.pending = append(d.pending, t.pieces[id]...)
	}
	k := completePrefix(d.pending)
	d.out = append(d.out[:0], d.pending[:k]...)
	d.pending = append(d.pending[:0], d.pending[k:]...)
	return d.out
}

// Flush returns whatever is held back (an incomplete character at the end of
// the stream) and resets the decoder. The returned slice is valid until the
// next call.
func (d *Decoder) Flush() []byte {
	d.out = append(d.out[:0], d.pending...)
	d.pending = d.pending[:0]
	return d.out
}

// Reset drops any held-back bytes.
func (d *Decoder) Reset() { d.pending = d.pending[:0] }

// completePrefix returns the length of b without a trailing incomplete (but
// so far valid) UTF-8 sequence.
func completePrefix(b []byte) int {
	n := len(b)
	for k := 1; k <= 3 && k <= n; k++ {
		c := b[n-k]
		if c&0xc0 == 0x80 {
			continue // continuation byte: look further back for the lead
		}
		if c >= 0xc0 && c < 0xf8 && utf8Len(c) > k {
			return n - k
		}
		return n
	}
	return n
}
