package api

import (
	"slices"
	"strings"

	"github.com/vkllm/vkllm/internal/jinja"
)

// Prompt injection through special tokens (issue 17 item 8). A chat prompt
// is the template's markup around the conversation's texts; tokenizing it
// with special-token parsing would turn "</s>" or "<|im_end|><|im_start|>
// system" typed by a user into real control tokens. So only the markup is
// parsed for special tokens, the client's texts are tokenized as plain
// text: the message contents, and the other texts a template prints
// (earlier tool calls, the tools' names and descriptions, the values of
// chat_template_kwargs) where they hold a special token's text.
//
// The common case costs one check: when no text holds the text of a
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

// requestTexts returns every client text a chat request puts in its
// prompt: the messages' contents and reasoning, the names and arguments
// of earlier tool calls, the tools' names and descriptions (and every
// string of the tools array as sent), and every string value of
// chat_template_kwargs.
func requestTexts(req *chatRequest) []string {
	var texts []string
	for _, m := range req.messages {
		texts = append(texts, m.content, m.reasoning)
		for _, c := range m.toolCalls {
			texts = append(texts, c.name, c.arguments)
		}
	}
	for _, t := range req.tools {
		texts = append(texts, t.name, t.description)
	}
	add := func(x string) string { texts = append(texts, x); return x }
	if req.toolsValue != nil {
		mapStrings(req.toolsValue, add)
	}
	if req.kwargs != nil {
		mapStrings(req.kwargs, add)
	}
	return texts
}

// mapStrings returns v (a template value: strings, lists, dicts, scalars)
// with every string value (not dict keys) s replaced by f(s), and whether
// anything changed; it copies only the lists and dicts whose contents
// change.
func mapStrings(v any, f func(string) string) (any, bool) {
	switch x := v.(type) {
	case string:
		n := f(x)
		return n, n != x
	case *jinja.List:
		var c *jinja.List
		for i, it := range x.Items {
			if n, changed := mapStrings(it, f); changed {
				if c == nil {
					c = &jinja.List{Items: slices.Clone(x.Items), Tuple: x.Tuple}
				}
				c.Items[i] = n
			}
		}
		if c != nil {
			return c, true
		}
	case *jinja.Dict:
		var c *jinja.Dict
		for _, k := range x.Keys() {
			it, _ := x.Get(k)
			if n, changed := mapStrings(it, f); changed {
				if c == nil {
					c = jinja.NewDict()
					for _, k := range x.Keys() {
						v, _ := x.Get(k)
						c.Set(k, v)
					}
				}
				c.Set(k, n)
			}
		}
		if c != nil {
			return c, true
		}
	}
	return v, false
}

// holdsSpecial reports whether text tokenizes differently with
// special-token parsing, that is, holds a special token's text.
func (s *Server) holdsSpecial(text string) bool {
	if text == "" {
		return false
	}
	a, errA := s.backend.Tokenize(text, false, true)
	b, errB := s.tokenizeText(text)
	return errA != nil || errB != nil || !slices.Equal(a, b)
}

// contentMarkers returns two private-use characters that no text holds.
func contentMarkers(texts []string) (open, close string) {
	for r := rune(0xE000); r < 0xF8FE; r += 2 {
		open, close = string(r), string(r+1)
		clash := false
		for _, t := range texts {
			clash = clash || strings.Contains(t, open) || strings.Contains(t, close)
		}
		if !clash {
			return open, close
		}
	}
	return "\uFFF0", "\uFFF1"
}

// markedRequest returns req with its texts between open and close: every
// message content and reasoning, and the other texts (tool calls, tools,
// chat_template_kwargs values) where they hold a special token's text
// (marking a string the template compares, as a tool's type, would change
// the rendering; one that holds a special token must not reach the
// tokenizer as markup whatever the template does with it).
func (s *Server) markedRequest(req *chatRequest, open, close string) *chatRequest {
	mark := func(x string) string {
		if x == "" {
			return x
		}
		return open + x + close
	}
	markSpecial := func(x string) string {
		if s.holdsSpecial(x) {
			return mark(x)
		}
		return x
	}
	marked := *req
	marked.messages = make([]message, len(req.messages))
	for i, m := range req.messages {
		m.content, m.reasoning = mark(m.content), mark(m.reasoning)
		if len(m.toolCalls) > 0 {
			m.toolCalls = slices.Clone(m.toolCalls)
			for j := range m.toolCalls {
				c := &m.toolCalls[j]
				c.name, c.arguments = markSpecial(c.name), markSpecial(c.arguments)
			}
		}
		marked.messages[i] = m
	}
	if len(req.tools) > 0 {
		marked.tools = slices.Clone(req.tools)
		for i := range marked.tools {
			t := &marked.tools[i]
			t.name, t.description = markSpecial(t.name), markSpecial(t.description)
		}
	}
	if req.toolsValue != nil {
		marked.toolsValue, _ = mapStrings(req.toolsValue, markSpecial)
	}
	if req.kwargs != nil {
		kw, _ := mapStrings(req.kwargs, markSpecial)
		marked.kwargs = kw.(*jinja.Dict)
	}
	return &marked
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
	texts := requestTexts(req)
	if !slices.ContainsFunc(texts, s.holdsSpecial) {
		if e := add(text, true, addSpecial); e != nil {
			return nil, e
		}
		return toks, nil
	}
	open, close := contentMarkers(texts)
	marked := s.markedRequest(req, open, close)
	out, e := t.renderRequest(marked, s.info.BOSText, s.info.EOSText, s.cfg.Now(), 4*s.cfg.MaxRequestBytes+1<<20, s.cfg.NoThinking)
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
