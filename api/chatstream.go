package api

import "github.com/vkllm/vkllm/sampling/grammar"

// answerStream parses one streamed chat completion candidate as it is
// generated, the way a whole answer is split (splitAnswer): a Harmony
// answer (gpt-oss) by channel, a thinking model's into its reasoning and
// the rest, and the rest through the tool hold (toolHold), so that what
// streams as reasoning and content adds up to what the whole answer
// gives, and calls go out at the end.
type answerStream struct {
	req     *chatRequest
	pc      *preparedChat
	harmony *harmonyParser
	think   *thinkParser
	hold    *toolHold
	lps     []tokenLogprob // logprobs of tokens not given out yet
	// inc reads calls as they are written (toolstream.go), nil where they
	// go out whole at the end; sent is what went out of them.
	inc  *grammar.Syntax
	sent []sentCall
}

// streamPart is a piece of a streamed answer: reasoning or content, with
// the logprobs of the tokens behind it.
type streamPart struct {
	reasoning bool
	text      []byte
	lps       []tokenLogprob
	calls     []callDelta // call headers and argument fragments
}

// streamEnd is what a finished candidate has left: its last parts, its
// calls with the logprobs that go with them, whether the calls are a
// forced call cut short, and logprobs of tokens that were only markup.
type streamEnd struct {
	parts   []streamPart
	calls   []toolCall
	callLPs []tokenLogprob
	cut     bool
	restLPs []tokenLogprob
	// sent is what went out of the calls while they were written: their
	// headers and the start of their arguments.
	sent []sentCall
}

// newAnswerStream returns the parser of one streamed candidate of req.
func newAnswerStream(req *chatRequest, pc *preparedChat) *answerStream {
	a := &answerStream{req: req, pc: pc, hold: newToolHold(pc, pc.forced)}
	if pc.toolsActive && pc.callGrammar && !req.logprobs {
		a.inc = streamSyntax(pc.tmpl)
	}
	switch {
	case pc.tmpl.family.messages() && !pc.forced:
		// A forced call is held whole instead, as in other families.
		a.harmony = newHarmonyStream(req, pc).p
	case pc.reasoning.on():
		a.think = pc.reasoning.parser()
	}
	return a
}

// add takes the candidate's next text and logprobs and returns the parts
// to send now.
func (a *answerStream) add(text []byte, lps []tokenLogprob) []streamPart {
	a.lps = append(a.lps, lps...)
	switch {
	case a.harmony != nil:
		r, c := a.harmony.add(text, nil, nil)
		return a.parts(r, c)
	case a.think != nil:
		r, c := a.think.add(text, nil, nil)
		if a.pc.reasoning.legacy {
			c = text // the content keeps the whole answer
		}
		return a.thinkParts(r, c)
	}
	return a.held(text)
}

// end finishes the candidate.
func (a *answerStream) end() streamEnd {
	var e streamEnd
	switch {
	case a.harmony != nil:
		r, c, calls := a.harmony.finish(nil, nil)
		e.parts = a.parts(r, c)
		if len(calls) > 0 && !a.req.parallelCall {
			calls = calls[:1]
		}
		if e.calls = calls; len(calls) > 0 {
			e.callLPs = a.lps
		} else {
			e.restLPs = a.lps // tokens that were only markup (headers, <|end|>)
		}
		a.lps = nil
		return e
	case a.think != nil:
		r, c := a.think.finish(nil, nil)
		if a.pc.reasoning.legacy {
			c = nil // sent whole as it came
		}
		e.parts = a.thinkParts(r, c)
	}
	text, heldLPs, ok := a.hold.rest()
	if ok {
		prefix, calls, cut := a.req.splitCalls(a.pc, text, a.pc.forced)
		if len(a.sent) > 0 {
			if len(calls) == 0 || cut {
				prefix = "" // the held text was the call that went out
			}
			calls, cut = a.withSent(calls, cut)
			e.sent = a.sent
		}
		if prefix != "" || len(calls) == 0 {
			e.parts = append(e.parts, streamPart{text: []byte(prefix), lps: heldLPs})
			heldLPs = nil
		}
		e.calls, e.callLPs, e.cut = calls, heldLPs, cut
	} else if text != "" {
		e.parts = append(e.parts, streamPart{text: []byte(text), lps: heldLPs})
		heldLPs = nil
	}
	e.restLPs, a.lps = a.lps, nil
	return e
}

// parts returns a Harmony candidate's new reasoning and content, the
// logprobs not given out yet with the first.
func (a *answerStream) parts(reasoning, content []byte) []streamPart {
	var out []streamPart
	for k, b := range [][]byte{reasoning, content} {
		if len(b) > 0 {
			out = append(out, streamPart{reasoning: k == 0, text: b, lps: a.lps})
			a.lps = nil
		}
	}
	return out
}

// thinkParts returns a thinking candidate's new reasoning, with the
// logprobs not given out yet, and passes its new content to the hold.
func (a *answerStream) thinkParts(reasoning, content []byte) []streamPart {
	var out []streamPart
	if len(reasoning) > 0 {
		out = append(out, streamPart{reasoning: true, text: reasoning, lps: a.lps})
		a.lps = nil
	}
	if len(content) == 0 {
		return out
	}
	return append(out, a.held(content)...)
}

// held passes content through the tool hold with the logprobs not given
// out yet, and what is written of the calls held.
func (a *answerStream) held(content []byte) []streamPart {
	text, lps, ok := a.hold.add(content, a.lps)
	a.lps = nil
	var out []streamPart
	if ok {
		out = append(out, streamPart{text: text, lps: lps})
	}
	if a.inc != nil && a.hold.text.Len() > 0 {
		calls, _ := partialSyntaxCalls(a.inc, a.hold.text.String())
		if d := callDeltas(&a.sent, calls); len(d) > 0 {
			out = append(out, streamPart{calls: d})
		}
	}
	return out
}

// withSent reconciles a finished candidate's calls with what went out of
// them as they were written: the same ids; and where the answer ended
// inside a call (max_tokens), so that its text parses into none, the calls
// as far as they were written, cut short, as the reference keeps a partial
// call.
func (a *answerStream) withSent(calls []toolCall, cut bool) ([]toolCall, bool) {
	return withSent(a.sent, calls, cut)
}

// withSent is answerStream.withSent for the calls sent.
func withSent(sent []sentCall, calls []toolCall, cut bool) ([]toolCall, bool) {
	if len(calls) == 0 || cut {
		calls = calls[:0]
		for _, s := range sent {
			calls = append(calls, toolCall{id: s.id, name: s.name, arguments: s.args})
		}
		return calls, true
	}
	for k := range min(len(calls), len(sent)) {
		calls[k].id = sent[k].id
	}
	return calls, cut
}
