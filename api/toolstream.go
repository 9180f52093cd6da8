package api

import (
	"encoding/json"
	"strings"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// Tool calls streamed as they are written: where a call is held to its
// family's grammar (so that, once started, it is sure to be one), a
// streamed answer sends each call's header (id, name) as soon as the name
// is written and then its arguments as they come, compact JSON as the
// whole answer gives them, as llama-server streams a partial call. Families
// whose arguments are JSON in the output take part; the others (parameters
// as tags or in a notation of their own) send their calls whole at the
// end, as do answers with logprobs.

// writtenCall is a call as far as it is written.
type writtenCall struct {
	name string
	args string // the arguments so far, compact JSON
	done bool   // the call is complete
}

// streamSyntax returns the syntax a streamed answer of t reads its calls
// in as they are written, nil where they go out whole at the end.
func streamSyntax(t *chatTemplate) *grammar.Syntax {
	syn := t.syntax
	if syn == nil {
		switch t.format {
		case grammar.ToolFormatHermes:
			if t.family != familyHermes {
				return nil
			}
			syn = &grammar.Syntax{Sep: "\n", Call: append(append([]grammar.Part{grammar.Text("<tool_call>"), grammar.Space},
				jsonListCall...), grammar.Text("</tool_call>"))}
		case grammar.ToolFormatMistral:
			syn = &grammar.Syntax{Open: "[TOOL_CALLS]", List: true, Call: jsonListCall}
		default:
			return nil
		}
	}
	for _, p := range syn.Call {
		if p.Kind == grammar.PartArgs {
			return syn
		}
	}
	return nil
}

// partialSyntaxCalls reads the calls of text (from the first call's
// markup on) written in syn as far as they go. ok is false when the text
// is not in syn.
func partialSyntaxCalls(syn *grammar.Syntax, text string) (calls []writtenCall, ok bool) {
	r := partialReader{cursor: cursor{s: strings.TrimLeft(text, " \t\r\n")}}
	if syn.Open != "" {
		switch {
		case strings.HasPrefix(r.s, syn.Open):
			r.i = len(syn.Open)
		case strings.HasPrefix(syn.Open, r.s):
			return nil, true // the opening is being written
		}
	}
	if syn.List {
		r.space()
		if !r.lit("[") {
			return nil, r.more
		}
	}
	for {
		c, complete, good := r.call(syn)
		if !good {
			return calls, false
		}
		if c.name != "" || complete {
			calls = append(calls, c)
		}
		if !complete {
			return calls, true
		}
		// What follows a call: the next, or the end.
		if syn.List {
			r.space()
			if !r.lit(",") {
				return calls, true
			}
			r.space()
		} else if syn.Sep != "" && !r.lit(syn.Sep) {
			return calls, true
		}
		if rest := r.s[r.i:]; rest == "" || syn.Close != "" && (strings.HasPrefix(rest, syn.Close) || strings.HasPrefix(syn.Close, rest)) {
			return calls, true
		}
	}
}

// partialReader reads a call's text; more is set when the text ends
// before what is read.
type partialReader struct {
	cursor
	more bool
}

// lit reads s if the text goes on with it (more when the text ends inside it).
func (r *partialReader) lit(s string) bool {
	if r.cursor.lit(s) {
		return true
	}
	r.more = strings.HasPrefix(s, r.s[r.i:])
	return false
}

// call reads one call: complete when all of it is there, good false when
// the text is not a call of syn.
func (r *partialReader) call(syn *grammar.Syntax) (c writtenCall, complete, good bool) {
	for k, p := range syn.Call {
		switch p.Kind {
		case grammar.PartText:
			if !r.lit(p.Text) {
				return c, false, r.more
			}
		case grammar.PartSpace:
			r.space()
		case grammar.PartIndex:
			for r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' {
				r.i++
			}
		case grammar.PartName:
			// Up to the literal that follows the name.
			next := ""
			if k+1 < len(syn.Call) && syn.Call[k+1].Kind == grammar.PartText {
				next = syn.Call[k+1].Text
			}
			j := -1
			if next != "" {
				j = strings.Index(r.s[r.i:], next)
			}
			if j < 0 {
				return c, false, true
			}
			c.name = r.s[r.i : r.i+j]
			r.i += j
		case grammar.PartNameJSON:
			end, ok := jsonValueEnd(r.s[r.i:])
			if !ok {
				return c, false, true
			}
			var name string
			if json.Unmarshal([]byte(r.s[r.i:r.i+end]), &name) != nil {
				return c, false, false
			}
			c.name = name
			r.i += end
		case grammar.PartArgs:
			end, ok := jsonValueEnd(r.s[r.i:])
			if !ok {
				c.args = compactJSONPrefix(r.s[r.i:])
				return c, false, true
			}
			c.args = compactJSONPrefix(r.s[r.i : r.i+end])
			r.i += end
		default:
			return c, false, false
		}
	}
	c.done = true
	return c, true, true
}

// jsonValueEnd returns where the JSON value s starts with ends (white
// space before it skipped), false when s ends first.
func jsonValueEnd(s string) (int, bool) {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
		i++
	}
	if i == len(s) {
		return 0, false
	}
	scalar := strings.IndexByte("{[\"", s[i]) < 0
	depth := 0
	var q jsonQuoting
	for ; i < len(s); i++ {
		c := s[i]
		wasIn := q.in
		if q.step(c) || wasIn {
			if wasIn && !q.in && depth == 0 {
				return i + 1, true // a string ends
			}
			continue
		}
		switch {
		case scalar && strings.IndexByte(" \t\r\n,:}]", c) >= 0:
			return i, true // a number, true, false or null ends
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// compactJSONPrefix drops the white space outside strings of a JSON text
// (or the start of one), as json.Compact writes a whole value.
func compactJSONPrefix(s string) string {
	var b strings.Builder
	var q jsonQuoting
	for i := 0; i < len(s); i++ {
		c := s[i]
		wasIn := q.in
		if !q.step(c) && !wasIn && strings.IndexByte(" \t\r\n", c) >= 0 {
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// jsonQuoting follows JSON text byte by byte: whether it is inside a string.
type jsonQuoting struct{ in, esc bool }

// step takes the next byte and reports whether it opens a string or is
// inside one (its closing quote is not: in is then false again, and the
// caller sees it was in before).
func (q *jsonQuoting) step(c byte) bool {
	switch {
	case !q.in:
		q.in = c == '"'
		return q.in
	case q.esc:
		q.esc = false
	case c == '\\':
		q.esc = true
	case c == '"':
		q.in = false
		return false
	}
	return true
}

// sentCall is what a stream has sent of a call.
type sentCall struct {
	id, name string
	args     string
}

// callDeltas returns the headers and argument fragments of calls not sent
// yet, noting them in sent.
func callDeltas(sent *[]sentCall, calls []writtenCall) []callDelta {
	var out []callDelta
	for k, c := range calls {
		if k == len(*sent) {
			*sent = append(*sent, sentCall{id: newCallID(), name: c.name})
			out = append(out, callDelta{index: k, id: (*sent)[k].id, name: c.name, header: true})
		}
		s := &(*sent)[k]
		if len(c.args) > len(s.args) && strings.HasPrefix(c.args, s.args) {
			out = append(out, callDelta{index: k, args: c.args[len(s.args):]})
			s.args = c.args
		}
	}
	return out
}

// callDelta is a piece of a streamed call: its header, or more of its
// arguments.
type callDelta struct {
	index    int
	header   bool
	id, name string
	args     string
}
