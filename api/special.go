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
// so that its message contents cannot produce special tokens.
func (s *Server) tokenizeChat(req *chatRequest, t *chatTemplate, text string, addSpecial bool) ([]int32, *Error) {
	if !s.contentHasSpecial(req.messages) {
		toks, err := s.backend.Tokenize(text, addSpecial, true)
		if err != nil {
			return nil, badRequest("messages", "messages: %v", err)
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
	var toks []int32
	if addSpecial && s.info.AddBOS && s.info.BOSText != "" {
		bos, err := s.backend.Tokenize(s.info.BOSText, false, true)
		if err != nil {
			return nil, badRequest("messages", "messages: %v", err)
		}
		toks = append(toks, bos...)
	}
	add := func(piece string, special bool) error {
		if piece == "" {
			return nil
		}
		var ids []int32
		var err error
		if special {
			ids, err = s.backend.Tokenize(piece, false, true)
		} else {
			ids, err = s.tokenizeText(piece)
		}
		toks = append(toks, ids...)
		return err
	}
	for out != "" {
		i := strings.Index(out, open)
		j := strings.Index(out[max(i, 0):], close)
		if i < 0 || j < 0 {
			break
		}
		j += i
		if err := add(out[:i], true); err != nil {
			return nil, badRequest("messages", "messages: %v", err)
		}
		if err := add(out[i+len(open):j], false); err != nil {
			return nil, badRequest("messages", "messages: %v", err)
		}
		out = out[j+len(close):]
	}
	if err := add(out, true); err != nil {
		return nil, badRequest("messages", "messages: %v", err)
	}
	return toks, nil
}
