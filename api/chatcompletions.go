package api

import (
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/sampling/grammar"
)

type chatLogprobEntry struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
	// TopLogprobs is always present: [] when none were asked (API-NOTES).
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatLogprobs struct {
	Content []chatLogprobEntry `json:"content"`
}

func bytesOf(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

func toChatLogprobs(lps []tokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: []chatLogprobEntry{}}
	for _, lp := range lps {
		e := chatLogprobEntry{Token: lp.text, Logprob: lp.logprob, Bytes: bytesOf(lp.text), TopLogprobs: []chatTopLogprob{}}
		for _, t := range lp.top {
			e.TopLogprobs = append(e.TopLogprobs, chatTopLogprob{Token: t.text, Logprob: t.logprob, Bytes: bytesOf(t.text)})
		}
		out.Content = append(out.Content, e)
	}
	return out
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// ReasoningContent is the model's reasoning, apart from the content
	// (gpt-oss's analysis channel), as the reference answers it.
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatMessage   `json:"message"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type chatBody struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
	Timings *timings     `json:"timings,omitempty"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is the next piece of the reasoning.
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs,omitempty"`
	FinishReason *string       `json:"finish_reason"`
}

type chatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *usage            `json:"usage,omitempty"`
	Timings *timings          `json:"timings,omitempty"`
}

// preparedChat is a validated chat request ready to generate.
type preparedChat struct {
	prompt      []int32
	tmpl        *chatTemplate
	toolsActive bool
	// thinkMarks are the template's reasoning markers that answers show
	// as text where they are control tokens (Command R7B, Gemma 4, Kimi
	// K3's tag tokens, Muse Glimmer's message headers), with or without
	// tools, for the reasoning split (or, with reasoning_format none, in
	// the content as the reference shows them). Another family's marker
	// tokens stay unrendered.
	thinkMarks []string
	// forced: tool_choice "required" or a named function; the answer is
	// a call (a partial one when the budget ran out), never content.
	forced  bool
	factory constraintFactory
	media   []*engine.Media // the prompt's images (media.go)
	// reasoning splits a thinking model's answers (reasoning.go).
	reasoning reasoningSplit
	// callGrammar: calls are held to the tool grammar (from their start,
	// or from their first marker under "auto"), so a call once begun is
	// one and may stream as it is written (toolstream.go).
	callGrammar bool
}

func (s *Server) prepareChat(req *chatRequest) (*preparedChat, *Error) {
	if e := s.checkImageInput(req); e != nil {
		return nil, e
	}
	text, t, e := s.chatPrompt(req)
	if e != nil {
		return nil, e
	}
	pc := &preparedChat{tmpl: t, toolsActive: len(req.tools) > 0 && req.toolChoice != toolChoiceNone}
	format := req.reasoningFormat
	if format == "" {
		format = s.cfg.ReasoningFormat
	}
	pc.reasoning = newReasoningSplit(t, text, format)
	if t.caps.reasoning {
		pc.thinkMarks = t.thinkTokens()
	}
	pc.forced = pc.toolsActive && (req.toolChoice == toolChoiceRequired || req.toolChoice == toolChoiceNamed)
	src, root, param := req.grammar, req.grammarRoot, "grammar"
	lazy := false
	trigger := t.callTrigger()
	autoSyntax := t.syntax != nil && trigger != "" && !t.family.messages()
	if pc.toolsActive && (req.toolChoice != toolChoiceAuto || t.family.constrainsAuto() || autoSyntax) {
		// Calls are grammar-constrained: from the start when a call is
		// required, from the family's trigger on for "auto" (where the
		// grammar writes the family's own syntax), as the reference's
		// lazy grammars.
		opts := grammar.ToolCallOptions{Format: t.format, Syntax: t.syntax, Parallel: req.parallelCall, Compact: pc.forced,
			Budget: req.compile}
		switch {
		case t.syntax != nil:
			opts.Function = req.toolName
			if t.family == familyHarmony {
				opts.Parallel = false // a call ends the message (<|call|>)
			}
			if pc.forced && pc.reasoning.on() {
				// A required call may follow the model's reasoning.
				opts.ReasoningStart, opts.ReasoningEnd, opts.ReasoningOpen = pc.reasoning.start, pc.reasoning.end, pc.reasoning.forcedOpen
				if t.family == familySolarOpen {
					opts.ReasoningEnd += "<|begin|>assistant" // its calls are a turn of their own
				}
			}
			if pc.forced && t.family == familyKimiK3 {
				// Kimi K3's prompt opens its think or its response
				// section, and its calls follow the response's end: the
				// text up to there (reasoning, content) is free.
				opts.ReasoningStart, opts.ReasoningEnd, opts.ReasoningOpen = "", xtmlClose("response"), true
			}
		case req.toolChoice == toolChoiceNamed || t.format == grammar.ToolFormatGeneric:
			// The generic prompt asks for {"tool_call": ...}: one call.
			opts.Function = req.toolName
			opts.Parallel = false
		}
		g, err := grammar.ToolCallGrammar(toolFunctions(req.tools), opts)
		if err != nil {
			if cancelled(req.compile) {
				return nil, errCompileCancelled
			}
			return nil, badRequest("tools", "tools: %v", err)
		}
		src, root, param = g, "root", "tools"
		req.grammarParam = "tools"
		lazy = req.toolChoice == toolChoiceAuto
		pc.callGrammar = true
	}
	if !lazy {
		f, e := s.grammarConstraint(req.compile, src, root, param)
		if e != nil {
			return nil, e
		}
		pc.factory = f
	} else {
		matcher, e := s.grammarMatchers(req.compile, src, root, param)
		if e != nil {
			return nil, e
		}
		trigger := []byte(trigger)
		pc.factory = func() (sampling.Constraint, error) {
			return &lazyConstraint{trigger: trigger, piece: func(id int32) []byte { return s.piece(id, true, pc.thinkMarks) },
				newMatcher: matcher}, nil
		}
	}
	// Tokenizing decodes the images (mediaPrompt), the costliest step:
	// it comes after every other check of the request.
	addSpecial := !(s.info.BOSText != "" && strings.HasPrefix(text, s.info.BOSText))
	var toks []int32
	if req.marker != "" {
		toks, pc.media, e = s.mediaPrompt(req, t, text, addSpecial)
	} else {
		toks, e = s.tokenizeChat(req, t, text, addSpecial, nil)
	}
	if e != nil {
		return nil, e
	}
	if e := s.checkPrompt("messages", len(toks)); e != nil {
		return nil, e
	}
	pc.prompt = toks
	return pc, nil
}

func (s *Server) handleChat(ctx *fasthttp.RequestCtx) handlerResult {
	body := ctx.PostBody()
	vb, stop := s.validationBudget(ctx)
	defer stop()
	req, e := decodeChat(vb, body)
	if e == nil && req.stream && req.bestOf > req.n {
		e = badRequest("best_of", "best_of: %d > n (%d) cannot be streamed", req.bestOf, req.n)
	}
	if e == nil {
		// Before prepareChat, which decodes images: cheap checks first.
		e = s.resolveLogitBias(&req.params)
	}
	var pc *preparedChat
	if e == nil {
		pc, e = s.prepareChat(req)
	}
	if e == nil {
		e = s.checkWork(req.genRequest, []int{len(pc.prompt)}, "max_tokens")
	}
	stream := (req != nil && req.stream) || (req == nil && streamRequested(body))
	id := newID("chatcmpl-")
	ctx.SetUserValue(requestIDKey, id)
	created := s.cfg.Now().Unix()
	seqs := 0
	if req != nil {
		seqs = req.bestOf
	}
	stop() // validation is over: serve watches the connection from here
	return s.serve(ctx, "chat", stream, e, seqs,
		func(gctx contextT, cancel func(), sse *sseWriter) (int, int) {
			return s.streamChat(gctx, cancel, sse, req, pc, id, created)
		},
		func(gctx contextT) handlerResult { return s.chatWhole(ctx, gctx, req, pc, id, created) })
}

// chatWhole generates every choice of a non-streamed chat completion and
// writes the body.
func (s *Server) chatWhole(ctx *fasthttp.RequestCtx, gctx contextT, req *chatRequest, pc *preparedChat, id string, created int64) handlerResult {
	resp := chatBody{ID: id, Object: "chat.completion", Created: created, Model: s.info.Name}
	resp.Usage.PromptTokens = len(pc.prompt)
	specs := s.candidateSpecs(req.bestOf, genSpec{prompt: pc.prompt, media: pc.media, g: req.genRequest, constraint: pc.factory, wantLogprob: req.logprobs, tools: pc.toolsActive, think: pc.thinkMarks})
	cands, err := s.generateAll(gctx, specs, nil)
	if err != nil {
		s.writeError(ctx, modelError(err))
		return handlerResult{}
	}
	for _, c := range cands {
		resp.Usage.CompletionTokens += c.tokens
	}
	cands = best(cands, req.n)
	for j, c := range cands {
		ch := chatChoice{Index: j, FinishReason: c.finish, Message: chatMessage{Role: "assistant"}}
		reasoning, content, calls, cut := req.splitAnswer(pc, c.text)
		ch.Message.ReasoningContent = reasoning
		if len(calls) > 0 && !cut {
			ch.FinishReason = "tool_calls"
		}
		for _, tc := range calls {
			ch.Message.ToolCalls = append(ch.Message.ToolCalls, chatToolCall{ID: tc.id, Type: "function",
				Function: chatFunction{Name: tc.name, Arguments: tc.arguments}})
		}
		if content != "" || len(ch.Message.ToolCalls) == 0 {
			ch.Message.Content = &content
		}
		if req.logprobs {
			ch.Logprobs = toChatLogprobs(c.logprobs)
		}
		resp.Choices = append(resp.Choices, ch)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	resp.Timings = reqStatsOf(gctx).timings()
	writeJSON(ctx, resp)
	return handlerResult{tokens: resp.Usage.TotalTokens}
}

func (s *Server) streamChat(gctx contextT, cancel func(), sse *sseWriter, req *chatRequest, pc *preparedChat, id string, created int64) (int, int) {
	chunk := chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.info.Name, Choices: make([]chatChunkChoice, 1)}
	// Each choice's role frame goes out just before its first other
	// chunk: a request that fails before generating (the backend refused
	// it) answers with the error event alone, as API.md 3 asks.
	started := make([]bool, req.n)
	send := func(ch chatChunkChoice) error {
		if !started[ch.Index] {
			started[ch.Index] = true
			chunk.Choices[0] = chatChunkChoice{Index: ch.Index, Delta: chatDelta{Role: "assistant"}}
			if err := sse.json(&chunk); err != nil {
				cancel()
				return err
			}
		}
		chunk.Choices[0] = ch
		err := sse.json(&chunk)
		if err != nil {
			cancel()
		}
		return err
	}
	fast := newChunkBuf(id, "chat.completion.chunk", created, s.info.Name)
	u := usage{PromptTokens: len(pc.prompt)}
	// Each candidate's answer is parsed as it streams (chatstream.go).
	streams := make([]*answerStream, req.n)
	for j := range streams {
		streams[j] = newAnswerStream(req, pc)
	}
	sendText := func(j int, text []byte, lps []tokenLogprob) error {
		if req.logprobs {
			t := string(text)
			return send(chatChunkChoice{Index: j, Delta: chatDelta{Content: &t}, Logprobs: chatLP(true, lps)})
		}
		if !started[j] {
			return send(chatChunkChoice{Index: j, Delta: chatDelta{Content: new(string(text))}})
		}
		err := sse.data(fast.chatContent(j, text))
		if err != nil {
			cancel()
		}
		return err
	}
	// sendParts sends a candidate's parts: reasoning as reasoning_content,
	// content as content, the logprobs of their tokens with them.
	var sendCallDeltas func(j int, deltas []callDelta) error
	sendParts := func(j int, parts []streamPart) error {
		for _, p := range parts {
			if len(p.calls) > 0 {
				if err := sendCallDeltas(j, p.calls); err != nil {
					return err
				}
				continue
			}
			if len(p.text) == 0 && len(p.lps) == 0 {
				continue
			}
			if !p.reasoning {
				if err := sendText(j, p.text, p.lps); err != nil {
					return err
				}
				continue
			}
			t := string(p.text)
			if err := send(chatChunkChoice{Index: j, Delta: chatDelta{ReasoningContent: &t}, Logprobs: chatLP(req.logprobs, p.lps)}); err != nil {
				return err
			}
		}
		return nil
	}
	// sendCallDeltas sends the headers and argument fragments of calls as
	// they are written.
	sendCallDeltas = func(j int, deltas []callDelta) error {
		for _, d := range deltas {
			idx := d.index
			tc := chatToolCall{Index: &idx, Function: chatFunction{Arguments: d.args}}
			if d.header {
				tc.ID, tc.Type, tc.Function.Name = d.id, "function", d.name
			}
			if err := send(chatChunkChoice{Index: j, Delta: chatDelta{ToolCalls: []chatToolCall{tc}}}); err != nil {
				return err
			}
		}
		return nil
	}
	onText := func(j int, text []byte, lps []tokenLogprob) error {
		return sendParts(j, streams[j].add(text, lps))
	}
	// sendCalls sends a candidate's calls, each its header and then its
	// arguments in fragments, as a model streams them.
	sendCalls := func(j int, calls []toolCall, lps *chatLogprobs, sent []sentCall) error {
		for k, tc := range calls {
			idx := k
			args := tc.arguments
			if k < len(sent) {
				// Its header and the start of its arguments went out
				// as it was written.
				args = strings.TrimPrefix(args, sent[k].args)
				if len(args) == len(tc.arguments) && sent[k].args != "" {
					args = "" // not what was sent: nothing can take it back
				}
			} else {
				first := chatToolCall{Index: &idx, ID: tc.id, Type: "function", Function: chatFunction{Name: tc.name, Arguments: ""}}
				if err := send(chatChunkChoice{Index: j, Delta: chatDelta{ToolCalls: []chatToolCall{first}}, Logprobs: lps}); err != nil {
					return err
				}
				lps = nil
			}
			for _, frag := range fragments(args, 16) {
				if frag == "" && k < len(sent) {
					break // all of it went out as it was written
				}
				d := chatToolCall{Index: &idx, Function: chatFunction{Arguments: frag}}
				if err := send(chatChunkChoice{Index: j, Delta: chatDelta{ToolCalls: []chatToolCall{d}}}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	specs := s.candidateSpecs(req.n, genSpec{prompt: pc.prompt, media: pc.media, g: req.genRequest, constraint: pc.factory, wantLogprob: req.logprobs, tools: pc.toolsActive, think: pc.thinkMarks})
	cands, err := s.generateAll(gctx, specs, onText)
	if err != nil {
		return u.CompletionTokens, streamFailed(sse, err)
	}
	for j, c := range cands {
		u.CompletionTokens += c.tokens
		finish := c.finish
		end := streams[j].end()
		if sendParts(j, end.parts) != nil {
			return u.CompletionTokens, 499
		}
		if len(end.calls) > 0 {
			if !end.cut {
				finish = "tool_calls"
			}
			if sendCalls(j, end.calls, chatLP(req.logprobs, end.callLPs), end.sent) != nil {
				return u.CompletionTokens, 499
			}
		}
		if !req.includeUsage && j == len(cands)-1 {
			chunk.Timings = reqStatsOf(gctx).timings() // the final chunk carries the request's speed
		}
		var restLPs *chatLogprobs
		if len(end.restLPs) > 0 {
			restLPs = chatLP(req.logprobs, end.restLPs) // tokens that were only markup
		}
		if send(chatChunkChoice{Index: j, Delta: chatDelta{}, Logprobs: restLPs, FinishReason: &finish}) != nil {
			return u.CompletionTokens, 499
		}
	}
	if req.includeUsage {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		if sse.json(chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.info.Name,
			Choices: []chatChunkChoice{}, Usage: &u, Timings: reqStatsOf(gctx).timings()}) != nil {
			return u.CompletionTokens, 499
		}
	}
	sse.done()
	return u.CompletionTokens, 200
}

func chatLP(want bool, lps []tokenLogprob) *chatLogprobs {
	if !want {
		return nil
	}
	return toChatLogprobs(lps)
}

// fragments splits s into pieces of at most n bytes on UTF-8 boundaries.
func fragments(s string, n int) []string {
	var out []string
	for len(s) > n {
		k := n
		for k > 0 && k < len(s) && s[k]&0xC0 == 0x80 {
			k--
		}
		if k == 0 {
			k = n
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}
