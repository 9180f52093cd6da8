package api

import (
	"bytes"
	"strings"
)

// Reasoning output of thinking models other than gpt-oss and Muse Glimmer
// (whose messages harmony.go parses): the answer starts with the model's
// reasoning between two markers (<think> and </think> for Qwen3, DeepSeek
// R1, GLM, Granite and most others), which llama-server returns as
// message.reasoning_content (streamed as delta.reasoning_content), the rest
// as content. How, as the reference's --reasoning-format and the request's
// reasoning_format say:
//
//   - "auto" (the default) and "deepseek": reasoning goes to
//     reasoning_content, stripped of surrounding whitespace, the content
//     after the end marker without its leading whitespace;
//   - "deepseek-legacy": the same reasoning_content, and the content keeps
//     the whole answer, markers included;
//   - "none": nothing is parsed: the whole answer is content.
//
// The reasoning starts at the answer's start marker (after whitespace) or,
// when the rendered prompt ends with the start marker (the template opened
// it: "forced open"), at the first token. An answer that ends before the
// end marker (max_tokens) is all reasoning.

// Reasoning formats (--reasoning-format, reasoning_format).
const (
	reasoningAuto     = "auto"
	reasoningDeepSeek = "deepseek"
	reasoningLegacy   = "deepseek-legacy"
	reasoningNone     = "none"
)

// ReasoningFormats are the values of --reasoning-format and of the
// request field reasoning_format.
var ReasoningFormats = []string{reasoningAuto, reasoningDeepSeek, reasoningLegacy, reasoningNone}

// thinkPair is a family's reasoning markers.
type thinkPair struct {
	start, end string
	// withStart: a source writes them only if it holds the start marker
	// too, not just the end (Solar Open's <|end|> ends many families'
	// turns).
	withStart bool
	// built reports whether a source builds the markers rather than
	// writing them out (nil: none does).
	built func(src string) bool
	// tokens are the control tokens the markers are made of, rendered
	// in the answers of a template that writes them; nil: start and end.
	tokens []string
}

// writtenBy reports whether the template source src writes the markers.
func (m thinkPair) writtenBy(src string) bool {
	if strings.Contains(src, m.end) && (!m.withStart || strings.Contains(src, m.start)) {
		return true
	}
	return m.built != nil && m.built(src)
}

// renderTokens are the control tokens of the markers.
func (m thinkPair) renderTokens() []string {
	if m.tokens != nil {
		return m.tokens
	}
	return []string{m.start, m.end}
}

// thinkMarkers are the reasoning markers of the families that write them,
// most specific first: a template that writes them uses the first.
var thinkMarkers = []thinkPair{
	{start: gemma4Thought, end: gemma4ChannelEnd, tokens: []string{gemma4Channel, gemma4ChannelEnd}}, // Gemma 4
	{start: "<seed:think>", end: "</seed:think>"},                                                    // Seed-OSS
	{start: "[THINK]", end: "[/THINK]"},                                                              // Magistral
	{start: "◁think▷", end: "◁/think▷"},                                                              // Kimi VL thinking
	{start: "<|START_THINKING|>", end: "<|END_THINKING|>"},                                           // Command R7B
	{start: "<|inner_prefix|>", end: "<|inner_suffix|>"},                                             // Apertus
	{start: "<mm:think>", end: "</mm:think>"},                                                        // MiniMax-M3
	{start: kimiK3Think, end: kimiK3ThinkEnd, tokens: xtmlTokens, // Kimi K3: its macros build them
		built: func(src string) bool { return xtmlSource(src) && strings.Contains(src, "'think'") }},
	{start: "<think" + hyTagSuffix + ">", end: "</think" + hyTagSuffix + ">", // Hunyuan Hy3: built with .format(HYTK)
		built: func(src string) bool {
			return strings.Contains(src, "</think{}>") && strings.Contains(src, hyTagSuffix)
		}},
	{start: "<think>", end: "</think>"},                           // Qwen3, DeepSeek R1, GLM, Granite, ...
	{start: "<|think|>", end: "<|end|>", withStart: true},         // Solar Open
	{start: "<|begin_assistant|>", end: "[BEGIN FINAL RESPONSE]"}, // Apriel 1.6: the prompt opens it with a preamble
}

// Kimi K3's think section, in its XTML tags (toolformats.go).
var kimiK3Think, kimiK3ThinkEnd = xtmlOpen("think"), xtmlClose("think")

// Gemma 4's reasoning is its thought channel: <|channel>thought, the
// reasoning, <channel|>. As the reference's Gemma 4 parser
// (common/parsers/gemma4.cpp) reads an answer, empty <|channel> tokens
// before one are dropped, more thought blocks may follow in the content
// (their reasoning is added to the first's), and a lone <channel|> ends
// the content: what follows it, up to a call, is dropped.
const (
	gemma4Channel    = "<|channel>"
	gemma4ChannelEnd = "<channel|>"
	gemma4Thought    = gemma4Channel + "thought"
)

// thinkPairOf returns the reasoning markers a thinking template's source
// writes (nil when none).
func thinkPairOf(src string) *thinkPair {
	for i := range thinkMarkers {
		if thinkMarkers[i].writtenBy(src) {
			return &thinkMarkers[i]
		}
	}
	return nil
}

// thinkMarkersOf returns the reasoning markers of a thinking template's
// source ("" when it writes none of them).
func thinkMarkersOf(src string) (start, end string) {
	if m := thinkPairOf(src); m != nil {
		return m.start, m.end
	}
	return "", ""
}

// reasoningSplit is how one request's answers are split: the markers, and
// whether the prompt left the reasoning open. A zero value splits nothing.
type reasoningSplit struct {
	start, end string
	forcedOpen bool
	// preamble is plain text the prompt wrote after opening the reasoning
	// (Apriel 1.6's "Here are my reasoning steps:\n"): the reasoning's
	// start, as the reference gives it back.
	preamble string
	legacy   bool     // deepseek-legacy: the content keeps the whole answer
	calls    []string // the markers that start a tool call (toolFamily.markers)
}

// on reports whether answers are split.
func (r reasoningSplit) on() bool { return r.end != "" }

// newReasoningSplit returns the split of answers to a prompt rendered as
// prompt by t under format (one of ReasoningFormats).
func newReasoningSplit(t *chatTemplate, prompt, format string) reasoningSplit {
	if format == reasoningNone || !t.caps.reasoning || t.family.messages() {
		return reasoningSplit{}
	}
	start, end := thinkMarkersOf(t.source)
	if end == "" {
		return reasoningSplit{}
	}
	r := reasoningSplit{start: start, end: end, legacy: format == reasoningLegacy, calls: t.family.markers(),
		forcedOpen: strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), start)}
	if i := strings.LastIndex(prompt, start); !r.forcedOpen && i >= 0 {
		// The prompt opened the reasoning and wrote a line of plain
		// text after the marker.
		tail := strings.TrimLeft(prompt[i+len(start):], " \t\r\n")
		if len(tail) <= 64 && !strings.ContainsAny(tail, "<[") {
			r.forcedOpen, r.preamble = true, tail
		}
	}
	return r
}

// split splits a whole answer into its reasoning and content.
func (r reasoningSplit) split(text string) (reasoning, content string) {
	if !r.on() {
		return "", text
	}
	p := r.parser()
	rb, cb := p.add([]byte(text), nil, nil)
	rb, cb = p.finish(rb, cb)
	if r.legacy {
		return string(rb), text
	}
	return string(rb), string(cb)
}

// parser returns a streaming parser of one answer.
func (r reasoningSplit) parser() *thinkParser {
	p := &thinkParser{start: r.start, end: r.end, calls: r.calls}
	if r.start == gemma4Thought {
		p.lead, p.recur = gemma4Channel, true
	}
	if r.end == "</mm:think>" {
		// MiniMax-M3 writes a turn without reasoning after a bare end
		// marker (its prompt leaves the reasoning neither open nor closed).
		p.bareEnd = true
	}
	if r.forcedOpen {
		p.state = thinkIn
		p.buf = append(p.buf, r.preamble...)
	}
	return p
}

// thinkParser splits an answer, fed as it is generated, into reasoning and
// content; text that may still be a marker or whitespace at an edge the
// reference strips is held for the next call.
type thinkParser struct {
	start, end string
	calls      []string // tool-call markers: one ends a reasoning never closed
	lead       string   // a token that may come, empty, before the start marker (Gemma 4)
	recur      bool     // reasoning blocks may recur in the content until a call (Gemma 4)
	bareEnd    bool     // the answer may open with the end marker alone: no reasoning (MiniMax-M3)
	state      int
	buf        []byte // held text
	said       bool   // some reasoning has been given out
	trim       bool   // the content's leading whitespace is dropped
}

// The parser's states: before the answer's first text (which may open the
// reasoning), in the reasoning, at a tool-call marker in the reasoning
// (held: it is a call if the reasoning never closes, as the reference
// takes it), in the content.
const (
	thinkBegin = iota
	thinkIn
	thinkCall
	thinkOut
	thinkSkip // after a lone end marker (recur): dropped up to a call
)

// add consumes the answer's next text and appends what it now knows to
// reasoning and content.
func (p *thinkParser) add(text, reasoning, content []byte) ([]byte, []byte) {
	p.buf = append(p.buf, text...)
	for {
		switch p.state {
		case thinkBegin:
			t, dropped := p.dropLeads(bytes.TrimLeft(p.buf, " \t\r\n"))
			switch {
			case bytes.HasPrefix(t, []byte(p.start)):
				p.buf = append(p.buf[:0], t[len(p.start):]...)
				p.state, p.said = thinkIn, false
				continue
			case p.bareEnd && bytes.HasPrefix(t, []byte(p.end)):
				p.buf = append(p.buf[:0], t[len(p.end):]...)
				p.state, p.trim = thinkOut, true
				continue
			case len(t) < len(p.start) && strings.HasPrefix(p.start, string(t)),
				p.bareEnd && len(t) < len(p.end) && strings.HasPrefix(p.end, string(t)):
				return reasoning, content // may still open (or close) the reasoning
			case dropped:
				p.state = thinkSkip // a channel that is not a thought
				continue
			}
			p.state = thinkOut
			continue
		case thinkIn:
			if !p.said {
				p.buf = bytes.TrimLeft(p.buf, " \t\r\n")
			}
			i := bytes.Index(p.buf, []byte(p.end))
			if k := firstMarker(p.buf, p.calls); k >= 0 && (i < 0 || k < i) {
				k = len(bytes.TrimRight(p.buf[:k], " \t\r\n"))
				reasoning = p.give(reasoning, p.buf[:k])
				p.buf = append(p.buf[:0], p.buf[k:]...)
				p.state = thinkCall
				continue
			}
			if i >= 0 {
				reasoning = p.give(reasoning, bytes.TrimRight(p.buf[:i], " \t\r\n"))
				p.buf = append(p.buf[:0], p.buf[i+len(p.end):]...)
				p.state, p.trim = thinkOut, true
				continue
			}
			// Keep what may start the end marker or a call, and trailing
			// whitespace (stripped if the reasoning ends there).
			keep := markerPrefixLen(p.buf, append([]string{p.end}, p.calls...))
			body := p.buf[:len(p.buf)-keep]
			ws := len(body) - len(bytes.TrimRight(body, " \t\r\n"))
			keep += ws
			reasoning = p.give(reasoning, p.buf[:len(p.buf)-keep])
			p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
			return reasoning, content
		case thinkCall:
			// The end marker after a call marker: the call was reasoning.
			if i := bytes.Index(p.buf, []byte(p.end)); i >= 0 {
				reasoning = p.give(reasoning, bytes.TrimRight(p.buf[:i], " \t\r\n"))
				p.buf = append(p.buf[:0], p.buf[i+len(p.end):]...)
				p.state, p.trim = thinkOut, true
				continue
			}
			return reasoning, content
		case thinkSkip:
			k := firstMarker(p.buf, p.calls)
			if k < 0 {
				keep := markerPrefixLen(p.buf, p.calls)
				p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
				return reasoning, content
			}
			p.buf = append(p.buf[:0], p.buf[k:]...)
			p.state = thinkOut
			continue
		default: // thinkOut
			if p.trim {
				// The content after the end marker starts at its first
				// non-space.
				if p.buf = bytes.TrimLeft(p.buf, " \t\r\n"); len(p.buf) == 0 {
					return reasoning, content
				}
				p.trim = false
			}
			if p.recur {
				return p.recurring(reasoning, content)
			}
			content = append(content, p.buf...)
			p.buf = p.buf[:0]
			return reasoning, content
		}
	}
}

// dropLeads drops the lead tokens at the start of t that do not open the
// reasoning, reporting whether it dropped any.
func (p *thinkParser) dropLeads(t []byte) ([]byte, bool) {
	dropped := false
	for p.lead != "" && bytes.HasPrefix(t, []byte(p.lead)) && !bytes.HasPrefix(t, []byte(p.start)) {
		rest := t[len(p.lead):]
		if len(rest) < len(p.start)-len(p.lead) && strings.HasPrefix(p.start[len(p.lead):], string(rest)) {
			break // may still be the start marker
		}
		t, dropped = rest, true
	}
	return t, dropped
}

// recurring passes content (recur) up to the next lead token, which may
// open another reasoning block, or lone end marker, which ends the
// content; from a call marker on, the content passes as it comes.
func (p *thinkParser) recurring(reasoning, content []byte) ([]byte, []byte) {
	k := firstMarker(p.buf, p.calls)
	j := firstMarker(p.buf, []string{p.lead, p.end})
	switch {
	case k >= 0 && (j < 0 || k < j):
		p.recur = false
		content = append(content, p.buf...)
		p.buf = p.buf[:0]
		return reasoning, content
	case j >= 0:
		content = append(content, p.buf[:j]...)
		p.buf = append(p.buf[:0], p.buf[j:]...)
		if bytes.HasPrefix(p.buf, []byte(p.end)) {
			p.buf, p.state = p.buf[:copy(p.buf, p.buf[len(p.end):])], thinkSkip
		} else {
			p.state = thinkBegin
		}
		return p.add(nil, reasoning, content)
	}
	keep := markerPrefixLen(p.buf, append([]string{p.lead, p.end}, p.calls...))
	content = append(content, p.buf[:len(p.buf)-keep]...)
	p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
	return reasoning, content
}

// firstMarker returns where the first of markers starts in b, or -1.
func firstMarker(b []byte, markers []string) int {
	first := -1
	for _, m := range markers {
		if i := bytes.Index(b, []byte(m)); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	return first
}

// give appends b to reasoning, noting that reasoning has started.
func (p *thinkParser) give(reasoning, b []byte) []byte {
	if len(b) > 0 {
		p.said = true
	}
	return append(reasoning, b...)
}

// finish ends the answer: held text goes where it belongs (reasoning left
// open is reasoning, stripped).
func (p *thinkParser) finish(reasoning, content []byte) ([]byte, []byte) {
	switch p.state {
	case thinkIn:
		reasoning = p.give(reasoning, bytes.TrimRight(p.buf, " \t\r\n"))
	case thinkBegin, thinkCall, thinkOut:
		content = append(content, p.buf...)
	}
	p.buf = p.buf[:0]
	return reasoning, content
}
