package api

import (
	"encoding/json"
	"strings"
)

// Gemma 4 writes a call as <|tool_call>call:NAME{ARGS}<tool_call|>, the
// arguments in its own notation: keys bare, strings between <|"|>
// delimiters, numbers, true, false and null as in JSON, and dicts and
// lists as JSON writes them (the reference's common/parsers/gemma4.cpp,
// rules gemma4-value and the rest, and gemma4_to_json in
// common/chat-peg-parser.cpp, which turns them into JSON).
const (
	gemma4CallOpen  = "<|tool_call>"
	gemma4CallClose = "<tool_call|>"
	gemma4Quote     = `<|"|>`
)

// parseGemma4 reads Gemma 4 calls: the text before the first is the
// content, and the calls follow one another (white space between them
// allowed); what follows the last is not part of the answer, as the
// reference's grammar ends there.
func parseGemma4(text string) (string, []toolCall, bool) {
	return successiveCalls(text, gemma4CallOpen, gemma4Call)
}

// gemma4Call reads call:NAME{ARGS}<tool_call|> from the start of s and
// returns the call and the length read.
func gemma4Call(s string) (toolCall, int, bool) {
	body, ok := strings.CutPrefix(s, "call:")
	if !ok {
		return toolCall{}, 0, false
	}
	brace := strings.IndexByte(body, '{')
	if brace <= 0 {
		return toolCall{}, 0, false
	}
	v := gemma4Reader{cursor{s: body, i: brace}}
	var args strings.Builder
	if !v.dict(&args) || !strings.HasPrefix(body[v.i:], gemma4CallClose) {
		return toolCall{}, 0, false
	}
	c, ok := newCall(body[:brace], args.String())
	return c, len("call:") + v.i + len(gemma4CallClose), ok
}

// gemma4Reader reads a Gemma 4 value from s at i, writing it as JSON.
type gemma4Reader struct{ cursor }

// value reads any value.
func (r *gemma4Reader) value(out *strings.Builder) bool {
	switch {
	case strings.HasPrefix(r.s[r.i:], gemma4Quote):
		return r.str(out)
	case r.i < len(r.s) && r.s[r.i] == '{':
		return r.dict(out)
	case r.i < len(r.s) && r.s[r.i] == '[':
		return r.list(out)
	}
	return r.scalar(out)
}

// str reads <|"|>text<|"|>, the text as it is.
func (r *gemma4Reader) str(out *strings.Builder) bool {
	r.i += len(gemma4Quote)
	end := strings.Index(r.s[r.i:], gemma4Quote)
	if end < 0 {
		return false
	}
	out.Write(appendJSONString(nil, r.s[r.i:r.i+end]))
	r.i += end + len(gemma4Quote)
	return true
}

// dict reads {key:value, ...}; a key is the text up to its colon.
func (r *gemma4Reader) dict(out *strings.Builder) bool {
	r.i++ // {
	out.WriteByte('{')
	r.space()
	for n := 0; !r.lit("}"); n++ {
		if n > 0 {
			if !r.lit(",") {
				return false
			}
			r.space()
			out.WriteByte(',')
		}
		k := strings.IndexAny(r.s[r.i:], ":}")
		if k <= 0 || r.s[r.i+k] != ':' {
			return false
		}
		out.Write(appendJSONString(nil, r.s[r.i:r.i+k]))
		out.WriteByte(':')
		r.i += k + 1
		r.space()
		if !r.value(out) {
			return false
		}
		r.space()
	}
	out.WriteByte('}')
	return true
}

// list reads [value, ...].
func (r *gemma4Reader) list(out *strings.Builder) bool {
	r.i++ // [
	out.WriteByte('[')
	r.space()
	for n := 0; !r.lit("]"); n++ {
		if n > 0 {
			if !r.lit(",") {
				return false
			}
			r.space()
			out.WriteByte(',')
		}
		if !r.value(out) {
			return false
		}
		r.space()
	}
	out.WriteByte(']')
	return true
}

// scalar reads a JSON number, true, false or null.
func (r *gemma4Reader) scalar(out *strings.Builder) bool {
	j := r.i
	for j < len(r.s) && strings.IndexByte("+-.0123456789eEtrufalsn", r.s[j]) >= 0 {
		j++
	}
	tok := r.s[r.i:j]
	if tok == "" || !json.Valid([]byte(tok)) {
		return false
	}
	out.WriteString(tok)
	r.i = j
	return true
}
