package api

import (
	"slices"
	"strings"
)

// Prompt injection through special tokens (issue 17 item 8). A chat prompt
// is the template's markup around the conversation's texts; tokenizing it
// with special-token parsing would turn "</s>" or "<|im_end|><|im_start|>
// system" typed by a user into real control tokens. So only the markup is
// parsed for special tokens, the message contents are tokenized as plain
// text.
//
// The common case costs one check: when no content holds the text of a
// special token, the whole prompt is tokenized at once, exactly as before.
// Otherwise the conversation is rendered again with each content between
// two marker characters the texts do not hold, and the pieces are
// tokenized one by one: markup with special parsing, contents without.
// (The contents then keep their surrounding whitespace even where the
// template would trim it, and a content the template transforms past its
// markers, as tojson escaping them, is treated as markup.)

// tokenizeText tokenizes a message's text as plain text.
func (s *Server) tokenizeText(text string) ([]int32, error) {
	if tt, ok := s.backend.(TextTokenizer); ok {
		return tt.TokenizeText(text)
	}
	return s.backend.Tokenize(text, false, false)
}

// contentHasSpecial reports whether a text of the conversation tokenizes
// differently with special-token parsing, that is, holds a special token's
// text.
func (s *Server) contentHasSpecial(msgs []message) bool {
	holds := func(text string) bool {
		if text == "" {
			return false
		}
		a, errA := s.backend.Tokenize(text, false, true)
		b, errB := s.tokenizeText(text)
		return errA != nil || errB != nil || !slices.Equal(a, b)
	}
	for _, m := range msgs {
		if holds(m.content) || holds(m.reasoning) {
			return true
		}
	}
	return false
}

// contentMarkers returns two private-use characters that no text of msgs
// holds.
func contentMarkers(msgs []message) (open, close string) {
	for r := rune(0xE000); r < 0xF8FE; r += 2 {
		open, close = string(r), string(r+1)
		clash := false
		for _, m := range msgs {
			for _, t := range []string{m.content, m.reasoning} {
				clash = clash || strings.Contains(t, open) || strings.Contains(t, close)
			}
		}
		if !clash {
			return open, close
		}
	}
	return "\uFFF0", "\uFFF1"
}

// tokenizeChat tokenizes the rendered prompt text of req (rendered with t)
// so that its message contents cannot produce special tokens. With images
// (req.marker set, media.go), each occurrence of the marker is replaced by
// what image appends to the tokens so far (the image's rows).
func (s *Server) tokenizeChat(req *chatRequest, t *chatTemplate, text string, addSpecial bool, image func(toks []int32) ([]int32, *Error)) ([]int32, *Error) {
	var toks []int32
	// add tokenizes piece (with special-token parsing when special, BOS in
	// front when bos), splitting it at the image markers.
	add := func(piece string, special, bos bool) *Error {
		for k, sub := range splitMarker(piece, req.marker) {
			if k > 0 {
				var e *Error
				if toks, e = image(toks); e != nil {
					return e
				}
			}
			if sub == "" && !(bos && k == 0) {
				continue
			}
			var ids []int32
			var err error
			if special {
				ids, err = s.backend.Tokenize(sub, bos && k == 0, true)
			} else {
				ids, err = s.tokenizeText(sub)
			}
			if err != nil {
				return badRequest("messages", "messages: %v", err)
			}
			toks = append(toks, ids...)
		}
		return nil
	}
	if !s.contentHasSpecial(req.messages) {
		if e := add(text, true, addSpecial); e != nil {
			return nil, e
		}
		return toks, nil
	}
	open, close := contentMarkers(req.messages)
	marked := *req
	marked.messages = make([]message, len(req.messages))
	for i, m := range req.messages {
		if m.content != "" {
			m.content = open + m.content + close
		}
		if m.reasoning != "" {
			m.reasoning = open + m.reasoning + close
		}
		marked.messages[i] = m
	}
	out, e := t.renderRequest(&marked, s.info.BOSText, s.info.EOSText, s.cfg.Now(), 4*s.cfg.MaxRequestBytes+1<<20)
	if e != nil {
		return nil, e
	}
	if addSpecial && s.info.AddBOS && s.info.BOSText != "" {
		bos, err := s.backend.Tokenize(s.info.BOSText, false, true)
		if err != nil {
			return nil, badRequest("messages", "messages: %v", err)
		}
		toks = append(toks, bos...)
	}
	for out != "" {
		i := strings.Index(out, open)
		j := strings.Index(out[max(i, 0):], close)
		if i < 0 || j < 0 {
			break
		}
		j += i
		if e := add(out[:i], true, false); e != nil {
			return nil, e
		}
		if e := add(out[i+len(open):j], false, false); e != nil {
			return nil, e
		}
		out = out[j+len(close):]
	}
	if e := add(out, true, false); e != nil {
		return nil, e
	}
	return toks, nil
}

// splitMarker splits s at marker ("" never splits).
func splitMarker(s, marker string) []string {
	if marker == "" {
		return []string{s}
	}
	return strings.Split(s, marker)
}
