package api

import (
	"bytes"
	"strings"
)

// The answer of a request with tools, shared by /v1/chat/completions and
// /v1/responses: streamed text is held back while it may still become a
// tool call (toolHold), and a finished candidate's text is split into its
// content and its calls (splitCalls).

// splitCalls splits a finished candidate's text into its content (the text
// before its tool calls, the family's reasoning markup removed, or all of
// it when it holds none) and the calls, as the template's tool family
// writes them; with parallel_tool_calls false only the first call is
// kept. With forced, text that holds no call is the call a forced
// tool_choice was writing when it was cut short (max_tokens): it is
// returned as that call (partialCall), never as content, and cut is true;
// so is a call begun under an "auto" grammar (pc.callGrammar) that did not
// end.
func (req *chatRequest) splitCalls(pc *preparedChat, text string, forced bool) (content string, calls []toolCall, cut bool) {
	prefix, calls := pc.tmpl.family.parse(text, req.tools)
	switch {
	case len(calls) > 0:
		if !req.parallelCall {
			calls = calls[:1]
		}
		return prefix, calls, false
	case forced:
		return "", []toolCall{partialCall(text, req)}, true
	case pc.callGrammar:
		// A call begun under the grammar is one unless the answer ended
		// inside it (max_tokens): the call as far as it was written, as
		// the reference keeps a partial call.
		if tr := pc.tmpl.callTrigger(); tr != "" {
			if i := strings.Index(text, tr); i >= 0 {
				return strings.TrimSpace(text[:i]), []toolCall{partialCall(text[i:], req)}, true
			}
		}
	}
	return prefix, nil, false
}

// splitAnswer splits a finished candidate's text into its reasoning, its
// content and its calls. Harmony answers (gpt-oss) are split by channel:
// analysis is the reasoning, final and commentary the content, messages
// to functions.NAME the calls (with tools active); a content that is
// itself a call in another format (a forced tool_choice writes vkllm's
// JSON form) goes through splitCalls; so are Muse Glimmer's messages
// (toolFamily.messages). Other families split off their reasoning and go
// through splitCalls when tools are active.
func (req *chatRequest) splitAnswer(pc *preparedChat, text string) (reasoning, content string, calls []toolCall, cut bool) {
	if !pc.tmpl.family.messages() {
		reasoning, content = pc.reasoning.split(text)
		content = pc.tmpl.family.unwrap(content)
		if !pc.toolsActive {
			return reasoning, content, nil, false
		}
		content, calls, cut = req.splitCalls(pc, content, pc.forced)
		return reasoning, content, calls, cut
	}
	var known []tool
	if pc.toolsActive {
		known = req.tools
	}
	reasoning, content, calls = parseMessages(pc.tmpl.family, text, known)
	if !pc.toolsActive {
		return reasoning, content, nil, false
	}
	if len(calls) == 0 && pc.forced {
		// A forced call is the grammar's (vkllm's JSON form); otherwise a
		// message family's calls are its messages, as a stream reads them.
		content, calls, cut = req.splitCalls(pc, content, true)
	} else if len(calls) > 0 && !req.parallelCall {
		calls = calls[:1]
	}
	return reasoning, content, calls, cut
}

// toolHold holds back one candidate's streamed text, with the logprobs of
// its tokens, while it may be a tool call, so that a call is never
// streamed as content: at the answer's start while it may still become
// a call (toolFamily.mayStart), and from a call marker of the family on
// (toolFamily.markers) wherever it appears, the content before it
// streaming as it comes; what is held at the end is split by splitCalls.
type toolHold struct {
	family  toolFamily
	forced  bool // hold everything: the answer must be a call
	active  bool // tools are active: calls are looked for
	started bool // some text has passed: the answer's start is behind
	call    bool // a call marker was seen: everything from it on is held
	wrap    unwrapper
	text    strings.Builder
	lps     []tokenLogprob
}

// newToolHold returns the hold of a candidate of pc: it holds while pc's
// tools are active; forced holds the whole answer.
func newToolHold(pc *preparedChat, forced bool) *toolHold {
	return &toolHold{family: pc.tmpl.family, forced: forced, active: pc.toolsActive, wrap: unwrapper{markers: pc.tmpl.family.wrappers()}}
}

// add takes the candidate's next text and logprobs and returns what to
// send now; send is false when there is nothing. Held text is sent, with
// the logprobs held so far, as soon as it can no longer start a call.
func (h *toolHold) add(text []byte, lps []tokenLogprob) (out []byte, outLPs []tokenLogprob, send bool) {
	text = h.wrap.add(text)
	if !h.active {
		return text, lps, len(text) > 0 || len(lps) > 0
	}
	h.text.Write(text)
	h.lps = append(h.lps, lps...)
	held := h.text.String()
	if h.forced || h.call || !h.started && h.family.mayStart(held) {
		return nil, nil, false
	}
	n := h.passable(held)
	if n == 0 {
		return nil, nil, false
	}
	h.started = true
	h.text.Reset()
	h.text.WriteString(held[n:])
	outLPs, h.lps = h.lps, nil
	return []byte(held[:n]), outLPs, true
}

// passable returns how much of held can no longer be part of a call: up
// to the first call marker (noting that a call has started), or else all
// but what may begin one; white space before either waits with it, since
// the content before a call ends without it.
func (h *toolHold) passable(held string) int {
	markers := h.family.holdMarkers()
	end := len(held)
	if k := firstMarker([]byte(held), markers); k >= 0 {
		h.call, end = true, k
	} else {
		end -= markerPrefixLen([]byte(held), markers)
	}
	return len(strings.TrimRight(held[:end], " \t\r\n"))
}

// rest returns what the hold still has once the candidate has finished:
// the logprobs of the held tokens, and the held text when ok (some was
// held, or the answer is forced) for splitCalls. Without tools the text
// is what may have begun a wrapper, to send as content.
func (h *toolHold) rest() (text string, lps []tokenLogprob, ok bool) {
	h.text.Write(h.wrap.flush())
	return h.text.String(), h.lps, h.active && (h.text.Len() > 0 || h.forced)
}

// unwrapper drops a family's wrappers (toolFamily.wrappers) from streamed
// text, holding what may be the start of one.
type unwrapper struct {
	markers []string
	buf     []byte
}

// add returns the text that can pass now.
func (u *unwrapper) add(text []byte) []byte {
	if len(u.markers) == 0 {
		return text
	}
	u.buf = append(u.buf, text...)
	for _, m := range u.markers {
		u.buf = bytes.ReplaceAll(u.buf, []byte(m), nil)
	}
	keep := markerPrefixLen(u.buf, u.markers)
	out := bytes.Clone(u.buf[:len(u.buf)-keep])
	u.buf = append(u.buf[:0], u.buf[len(u.buf)-keep:]...)
	return out
}

// flush returns what is held at the end of the text.
func (u *unwrapper) flush() []byte {
	out := u.buf
	u.buf = nil
	return out
}
