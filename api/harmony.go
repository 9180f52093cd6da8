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
//
// Muse Glimmer writes its answer as such messages too (museDialect):
//
//	[<|start|>assistant] to=RECIPIENT<|message|>BODY
//
// a body ending at <|eot|> (the turn's end), <|eom|> (another message
// follows) or the next <|start|>. A message to=self is reasoning, to=user
// content, and one to a function a call, its body ATEM invoke markup
// (<atem:function_calls><atem:invoke name="NAME"><atem:parameter
// name="K">V</atem:parameter>...). Markup in a message to self or user
// is that message's text, never a call. Its reasoning being a message of
// its own, the answer is read here rather than split at think markers
// (reasoning.go).

// harmonyBodyEnds are the markers that end a message body.
var harmonyBodyEnds = []string{"<|end|>", "<|call|>", "<|return|>", "<|start|>"}

// harmonyHeaderStarts are the texts a header may begin with (after the
// whitespace between messages).
var harmonyHeaderStarts = []string{"<|start|>", "<|channel|>", " to=", "to=", "assistant"}

// messageDialect is what tells apart the message formats harmonyParser
// reads.
type messageDialect struct {
	bodyEnds   []string // the markers that end a body (<|start|> begins the next header)
	notHeader  string   // a marker that shows text before <|message|> is no header
	callPrefix string   // before a function's name in a recipient
	self, user string   // the recipients of reasoning and of content ("": none)
	invokes    bool     // a call's body is ATEM invoke markup, not JSON arguments
}

var (
	harmonyDialect = messageDialect{bodyEnds: harmonyBodyEnds, notHeader: "<|end|>", callPrefix: "functions."}
	museDialect    = messageDialect{bodyEnds: []string{"<|eot|>", "<|eom|>", "<|start|>"}, notHeader: "<|eot|>", self: "self", user: "user", invokes: true}
)

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
	d      messageDialect
	known  []tool // the request's tools; nil: calls are not parsed, their messages dropped
	buf    []byte // a header being read, or the tail of a body that may start a marker
	inBody bool
	raw    bool // the text is not Harmony: all of it is content
	kind   harmonyKind
	name   string // of the call being read
	args   []byte // of the call being read
	calls  []toolCall
}

// newHarmonyParser returns a parser of gpt-oss's answers whose calls must
// name one of known.
func newHarmonyParser(known []tool) *harmonyParser { return newMessageParser(familyHarmony, known) }

// newMessageParser returns a parser of the answers of f (one whose
// answers are messages: toolFamily.messages) whose calls must name one
// of known.
func newMessageParser(f toolFamily, known []tool) *harmonyParser {
	d := harmonyDialect
	if f == familyMuse {
		d = museDialect
	}
	return &harmonyParser{d: d, known: known}
}

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
		for _, m := range p.d.bodyEnds {
			if i := bytes.Index(p.buf, []byte(m)); i >= 0 && (end < 0 || i < end) {
				end, n = i, len(m)
				if m == "<|start|>" {
					n = 0 // it begins the next header
				}
			}
		}
		if end < 0 {
			keep := markerPrefixLen(p.buf, p.d.bodyEnds)
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
	// A whole header begins as a header does (an empty one names nothing):
	// otherwise the text is not Harmony.
	if !startsHeader(h) || strings.Contains(h, p.d.notHeader) {
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
		switch {
		case recipient == "assistant", p.d.user != "" && recipient == p.d.user:
			return true
		case p.d.self != "" && recipient == p.d.self:
			p.kind = harmonyReasoning
			return true
		}
		p.kind = harmonyDrop
		if name, ok := strings.CutPrefix(recipient, p.d.callPrefix); ok && p.isKnown(name) {
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

// startsHeader reports whether h, a whole header, begins as one does.
func startsHeader(h string) bool {
	h = strings.TrimLeft(h, " \t\r\n")
	for _, s := range harmonyHeaderStarts {
		if strings.HasPrefix(h, s) {
			return true
		}
	}
	return false
}

// allKnown reports whether every one of calls names a known function.
func (p *harmonyParser) allKnown(calls []toolCall) bool {
	for _, c := range calls {
		if !p.isKnown(c.name) {
			return false
		}
	}
	return true
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
// arguments are JSON (Muse: invoke markup of known functions).
func (p *harmonyParser) endBody() {
	switch {
	case p.kind != harmonyCall:
	case p.d.invokes:
		if _, calls, ok := parseInvokes(string(p.args), []string{"<atem:function_calls>"}, "atem:", p.known); ok && p.allKnown(calls) {
			p.calls = append(p.calls, calls...)
		}
	default:
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
	return parseMessages(familyHarmony, text, known)
}

// parseMessages splits a whole answer of f (toolFamily.messages) into its
// reasoning, content and calls to known (nil: calls are not parsed).
func parseMessages(f toolFamily, text string, known []tool) (reasoning, content string, calls []toolCall) {
	p := newMessageParser(f, known)
	r, c := p.add([]byte(text), nil, nil)
	r, c, calls = p.finish(r, c)
	return string(r), string(c), calls
}

// harmonyStream is one streamed candidate's Harmony (or Muse Glimmer)
// answer: the parser, the pieces it has just separated and the logprobs
// of the tokens whose text it has not yet given out.
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
	return &harmonyStream{p: newMessageParser(pc.tmpl.family, known)}
}
