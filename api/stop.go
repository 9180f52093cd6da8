package api

import (
	"strings"
)

// textStream turns generated token bytes into text pieces that are safe to
// send: never inside a UTF-8 character, never part of a stop sequence.
// Text that might be the start of a stop sequence is held back until it is
// clear that it is not.
type textStream struct {
	stops []string
	buf   []byte // all generated text so far (stop text excluded once found)
	sent  int    // bytes of buf already released
	done  bool   // a stop sequence was found
}

// add appends token bytes and returns the newly releasable text (a slice of
// the stream's buffer, valid until the next call) and whether a stop
// sequence ended the text.
func (s *textStream) add(piece []byte) ([]byte, bool) {
	if s.done {
		return nil, true
	}
	from := len(s.buf)
	s.buf = append(s.buf, piece...)
	// Search where a new stop could start: the longest stop may begin up to
	// len(stop)-1 bytes before the new piece.
	for _, st := range s.stops {
		start := from - len(st) + 1
		if start < s.sent {
			start = s.sent
		}
		if start < 0 {
			start = 0
		}
		if start > len(s.buf) {
			continue
		}
		if i := strings.Index(string(s.buf[start:]), st); i >= 0 {
			end := start + i
			s.buf = s.buf[:end]
			s.done = true
		}
	}
	if s.done {
		out := s.buf[s.sent:]
		s.sent = len(s.buf)
		return out, true
	}
	safe := len(s.buf)
	for _, st := range s.stops {
		// Hold back the longest suffix of buf that is a prefix of st.
		for k := min(len(st)-1, len(s.buf)-s.sent); k > 0; k-- {
			if string(s.buf[len(s.buf)-k:]) == st[:k] {
				safe = min(safe, len(s.buf)-k)
				break
			}
		}
	}
	safe = s.sent + validPrefixLen(s.buf[s.sent:safe])
	out := s.buf[s.sent:safe]
	s.sent = safe
	return out, false
}

// flush releases whatever is held back at the end of generation.
func (s *textStream) flush() []byte {
	out := s.buf[s.sent:]
	s.sent = len(s.buf)
	return out
}

// text returns all released text.
func (s *textStream) text() string { return string(s.buf[:s.sent]) }
