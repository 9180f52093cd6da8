package api

import (
	"bytes"
	"strings"
)

// Harmony is gpt-oss's answer format: a sequence of messages, each a
// header and a body,
//
//	[<|start|>assistant][ to=functions.NAME]<|channel|>CHANNEL[ to=functions.NAME][ [<|constrain|>]json]<|message|>BODY
//
// a body ending at <|end|>, <|call|>, <|return|> or the next <|start|>.
// The prompt ends with <|start|>assistant, so the answer's first header
// starts at <|channel|> or " to=". The analysis channel is reasoning, the
// final and commentary channels are content, and a message to
// functions.NAME is a call with the body as its JSON arguments.

// harmonyBodyEnds are the markers that end a message body.
var harmonyBodyEnds = []string{"<|end|>", "<|call|>", "<|return|>", "<|start|>"}

// harmonyHeaderStarts are the texts a header may begin with (after the
// whitespace between messages).
var harmonyHeaderStarts = []string{"<|start|>", "<|channel|>", " to=", "to=", "assistant"}

// maxHarmonyHeader bounds a header: text that has not reached <|message|>
// by then is not Harmony and is content as it stands.
const maxHarmonyHeader = 256

// harmonyKind is what a message body is.
type harmonyKind int

const (
	harmonyContent   harmonyKind = iota // final or commentary channel
	harmonyReasoning                    // analysis channel
	harmonyCall                         // to=functions.NAME
	harmonyDrop                         // a call that is not parsed (tools off, unknown function)
)

// harmonyParser splits a Harmony answer, fed as it is generated, into its
// reasoning, content and tool calls. Text that does not follow the format
// is content as it stands. A parser serves one answer: add its text in
// order, then finish.
type harmonyParser struct {
	known  []tool // the request's tools; nil: calls are not parsed, their messages dropped
	buf    []byte // a header being read, or the tail of a body that may start a marker
	inBody bool
	raw    bool // the text is not Harmony: all of it is content
	kind   harmonyKind
	name   string // of the call being read
	args   []byte // of the call being read
	calls  []toolCall
}

// newHarmonyParser returns a parser whose calls must name one of known.
func newHarmonyParser(known []tool) *harmonyParser { return &harmonyParser{known: known} }

// add consumes the answer's next text and appends to reasoning and content
// what it now knows to be theirs; text that may still start a marker is
// kept for the next call.
func (p *harmonyParser) add(text []byte, reasoning, content []byte) ([]byte, []byte) {
	p.buf = append(p.buf, text...)
	for len(p.buf) > 0 {
		if p.raw {
			content = append(content, p.buf...)
			p.buf = p.buf[:0]
			break
		}
		if !p.inBody {
			if !p.header() {
				break
			}
			continue
		}
		end, n := -1, 0
		for _, m := range harmonyBodyEnds {
			if i := bytes.Index(p.buf, []byte(m)); i >= 0 && (end < 0 || i < end) {
				end, n = i, len(m)
				if m == "<|start|>" {
					n = 0 // it begins the next header
				}
			}
		}
		if end < 0 {
			keep := markerPrefixLen(p.buf, harmonyBodyEnds)
			reasoning, content = p.body(p.buf[:len(p.buf)-keep], reasoning, content)
			p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
			break
		}
		reasoning, content = p.body(p.buf[:end], reasoning, content)
		p.endBody()
		p.buf = append(p.buf[:0], p.buf[end+n:]...)
	}
	return reasoning, content
}

// finish ends the answer (the model stopped, or its budget ran out) and
// returns the calls: a body cut short counts as far as it went, a call
// whose arguments are not complete JSON is dropped, and a header cut
// short is dropped.
func (p *harmonyParser) finish(reasoning, content []byte) ([]byte, []byte, []toolCall) {
	if p.raw || p.inBody {
		if p.raw {
			content = append(content, p.buf...)
		} else {
			reasoning, content = p.body(p.buf, reasoning, content)
			p.endBody()
		}
	} else if !p.mayBeHeader(p.buf) {
		content = append(content, p.buf...)
	}
	p.buf = p.buf[:0]
	return reasoning, content, p.calls
}

// header reads a complete header from buf and reports whether it did; it
// switches to raw text when buf cannot be one.
func (p *harmonyParser) header() bool {
	i := bytes.Index(p.buf, []byte("<|message|>"))
	if i < 0 {
		if !p.mayBeHeader(p.buf) || len(p.buf) > maxHarmonyHeader {
			p.raw = true
			return true
		}
		return false
	}
	h := string(p.buf[:i])
	if !p.mayBeHeader([]byte(h)) || strings.Contains(h, "<|end|>") {
		p.raw = true
		return true
	}
	p.buf = append(p.buf[:0], p.buf[i+len("<|message|>"):]...)
	p.inBody = true
	p.kind, p.name, p.args = harmonyContent, "", p.args[:0]
	// A header may name its channel twice ("<|channel|>commentary
	// to=assistant<|channel|>analysis"): the last one counts, and a
	// message to=assistant is the assistant's own.
	channel := ""
	if i := strings.LastIndex(h, "<|channel|>"); i >= 0 {
		// LLM-jp 4 writes a space before the channel's name.
		channel, _, _ = strings.Cut(strings.TrimLeft(h[i+len("<|channel|>"):], " "), " ")
		channel, _, _ = strings.Cut(channel, "<")
	}
	if channel == "analysis" {
		p.kind = harmonyReasoning
	}
	if _, r, ok := strings.Cut(h, "to="); ok {
		end := strings.IndexAny(r, " <")
		if end < 0 {
			end = len(r)
		}
		recipient := r[:end]
		if recipient == "assistant" {
			return true
		}
		p.kind = harmonyDrop
		if name, ok := strings.CutPrefix(recipient, "functions."); ok && p.isKnown(name) {
			p.kind, p.name = harmonyCall, name
		}
	}
	return true
}

// mayBeHeader reports whether h (leading whitespace aside) begins as a
// header does, or could once more text comes.
func (p *harmonyParser) mayBeHeader(h []byte) bool {
	h = bytes.TrimLeft(h, " \t\r\n")
	if len(h) == 0 {
		return true
	}
	for _, s := range harmonyHeaderStarts {
		if bytes.HasPrefix(h, []byte(s)) || bytes.HasPrefix([]byte(s), h) {
			return true
		}
	}
	return false
}

func (p *harmonyParser) isKnown(name string) bool {
	for _, t := range p.known {
		if t.name == name {
			return true
		}
	}
	return false
}

// body appends a piece of the current message body where its kind goes.
func (p *harmonyParser) body(b, reasoning, content []byte) ([]byte, []byte) {
	switch p.kind {
	case harmonyReasoning:
		reasoning = append(reasoning, b...)
	case harmonyContent:
		content = append(content, b...)
	case harmonyCall:
		p.args = append(p.args, b...)
	}
	return reasoning, content
}

// endBody closes the current message: a call becomes one when its
// arguments are JSON.
func (p *harmonyParser) endBody() {
	if p.kind == harmonyCall {
		if c, ok := newCall(p.name, string(p.args)); ok {
			p.calls = append(p.calls, c)
		}
	}
	p.inBody, p.kind, p.name, p.args = false, harmonyContent, "", p.args[:0]
}

// markerPrefixLen returns the length of the longest suffix of b that is a
// proper prefix of one of markers.
func markerPrefixLen(b []byte, markers []string) int {
	best := 0
	for _, m := range markers {
		for n := min(len(m)-1, len(b)); n > best; n-- {
			if bytes.HasSuffix(b, []byte(m[:n])) {
				best = n
				break
			}
		}
	}
	return best
}

// parseHarmonyAnswer splits a whole Harmony answer into its reasoning,
// content and calls to known (nil: calls are not parsed).
func parseHarmonyAnswer(text string, known []tool) (reasoning, content string, calls []toolCall) {
	p := newHarmonyParser(known)
	r, c := p.add([]byte(text), nil, nil)
	r, c, calls = p.finish(r, c)
	return string(r), string(c), calls
}

// harmonyStream is one streamed candidate's Harmony answer: the parser,
// the pieces it has just separated and the logprobs of the tokens whose
// text it has not yet given out.
type harmonyStream struct {
	p                  *harmonyParser
	reasoning, content []byte
	lps                []tokenLogprob
}

// newHarmonyStream returns the stream of a candidate of req: calls are
// parsed while pc's tools are active.
func newHarmonyStream(req *chatRequest, pc *preparedChat) *harmonyStream {
	var known []tool
	if pc.toolsActive {
		known = req.tools
	}
	return &harmonyStream{p: newHarmonyParser(known)}
}
