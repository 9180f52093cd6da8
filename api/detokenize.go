package api

import "strings"

// detokenize returns the text of toks for /extras/detokenize: ordinary
// tokens as the backend decodes them, special (control) tokens as their
// text, the text /extras/tokenize reads back as those tokens. Backends
// that follow the reference's detokenizer leave control tokens out, so
// the runs of ordinary tokens between them are decoded separately: a run
// after a special token is decoded with that token in front (so that the
// backend treats it as the middle of a sequence, keeping a leading space
// that only a first token loses) and what the special token alone decodes
// to is taken off again. Ids must be in the vocabulary.
func (s *Server) detokenize(toks []int32) (string, error) {
	var b strings.Builder
	start := 0 // the current run of ordinary tokens: toks[start:i]
	flush := func(end int) error {
		if start >= end {
			return nil
		}
		if start == 0 {
			t, err := s.backend.Detokenize(toks[:end])
			b.WriteString(t)
			return err
		}
		with, err := s.backend.Detokenize(toks[start-1 : end])
		if err != nil {
			return err
		}
		alone, err := s.backend.Detokenize(toks[start-1 : start])
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimPrefix(with, alone))
		return nil
	}
	for i, id := range toks {
		if !s.isSpecial(id) {
			continue
		}
		if err := flush(i); err != nil {
			return "", err
		}
		b.WriteString(s.backend.TokenText(id))
		start = i + 1
	}
	if err := flush(len(toks)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// isSpecial reports whether id is a special token: one that produces no
// text in generated output but has a vocabulary entry.
func (s *Server) isSpecial(id int32) bool {
	return len(s.backend.Piece(id)) == 0 && s.backend.TokenText(id) != ""
}
