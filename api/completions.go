package api

import (
	"bufio"
	"encoding/json"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/sampling/grammar"
)

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
}

func toCompletionLogprobs(lps []tokenLogprob) *completionLogprobs {
	out := &completionLogprobs{Tokens: []string{}, TextOffset: []int{}, TokenLogprobs: []*float32{}, TopLogprobs: []map[string]float32{}}
	for _, lp := range lps {
		out.Tokens = append(out.Tokens, lp.text)
		out.TextOffset = append(out.TextOffset, lp.offset)
		if lp.null {
			// The prompt's first token (echo): null, as OpenAI writes it.
			out.TokenLogprobs = append(out.TokenLogprobs, nil)
			out.TopLogprobs = append(out.TopLogprobs, nil)
			continue
		}
		out.TokenLogprobs = append(out.TokenLogprobs, &lp.logprob)
		// Keys are compared as JSON will write them (invalid UTF-8 bytes
		// become U+FFFD), keeping the most likely of tokens that collide.
		top := make(map[string]float32, len(lp.top))
		for _, t := range lp.top {
			k := validText(t.text)
			if _, dup := top[k]; !dup {
				top[k] = t.logprob
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
	}
	return out
}

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionBody struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
	Timings *timings           `json:"timings,omitempty"`
}

// newID returns a response id with prefix.
func newID(prefix string) string { return prefix + newCallID() + newCallID() }

// preparedPrompt is one tokenized completion prompt.
type preparedPrompt struct {
	text   string
	tokens []int32
}

// checkCompletion checks what a completion request asks of the model
// before admission: its logit_bias keys against the vocabulary, the work
// of its prompts (budget names the field that sets the tokens to generate)
// and its grammar, which it compiles.
func (s *Server) checkCompletion(vb grammar.Budget, g *genRequest, prompts []preparedPrompt, budget string) (constraintFactory, *Error) {
	if e := s.resolveLogitBias(&g.params); e != nil {
		return nil, e
	}
	lens := make([]int, len(prompts))
	for i, p := range prompts {
		lens[i] = len(p.tokens)
	}
	if e := s.checkWork(g, lens, budget); e != nil {
		return nil, e
	}
	return s.grammarConstraint(vb, g.grammar, g.grammarRoot, "grammar")
}

func (s *Server) prepareCompletion(req *completionRequest) ([]preparedPrompt, *Error) {
	out := make([]preparedPrompt, len(req.prompts))
	for i, p := range req.prompts {
		param := "prompt"
		if len(req.prompts) > 1 {
			param = indexPath("prompt", i)
		}
		toks, text, e := s.promptTokens(p, req.suffix, param)
		if e != nil {
			return nil, e
		}
		if e := s.checkPrompt(param, len(toks)); e != nil {
			return nil, e
		}
		out[i] = preparedPrompt{text: text, tokens: toks}
	}
	return out, nil
}

// promptTokens returns the tokens of prompt p (the field param) followed
// by suffix, and its text (for echo). Token ids are used as given, after a
// check against the vocabulary; their text is their detokenization.
func (s *Server) promptTokens(p promptInput, suffix, param string) ([]int32, string, *Error) {
	if !p.isTokens {
		toks, err := s.tokenize(p.text + suffix)
		if err != nil {
			return nil, "", badRequest(param, "%s: %v", param, err)
		}
		return toks, p.text, nil
	}
	if e := s.checkTokenIDs(p.tokens, param); e != nil {
		return nil, "", e
	}
	text, err := s.detokenize(p.tokens)
	if err != nil {
		return nil, "", badRequest(param, "%s: %v", param, err)
	}
	toks := p.tokens
	if suffix != "" {
		st, err := s.backend.Tokenize(suffix, false, true)
		if err != nil {
			return nil, "", badRequest("suffix", "suffix: %v", err)
		}
		toks = append(slices.Clip(toks), st...)
	}
	return toks, text, nil
}

// checkTokenIDs checks client-sent token ids against the vocabulary.
func (s *Server) checkTokenIDs(toks []int32, param string) *Error {
	for i, id := range toks {
		if id < 0 || int(id) >= s.info.VocabSize {
			p := indexPath(param, i)
			return badRequest(p, "%s: token id %d is outside the vocabulary [0, %d)", p, id, s.info.VocabSize)
		}
	}
	return nil
}

// streamRequested peeks at a body that failed to decode: true when it is a
// JSON object with "stream": true, so the error goes out as an SSE event.
func streamRequested(body []byte) bool {
	var m struct {
		Stream any `json:"stream"`
	}
	return json.Unmarshal(body, &m) == nil && m.Stream == true
}

func (s *Server) handleCompletions(ctx *fasthttp.RequestCtx) handlerResult {
	body := ctx.PostBody()
	vb, stop := s.validationBudget(ctx)
	defer stop()
	req, e := decodeCompletion(vb, body)
	if e == nil && req.stream && req.bestOf > req.n {
		e = badRequest("best_of", "best_of: %d > n (%d) cannot be streamed", req.bestOf, req.n)
	}
	var prompts []preparedPrompt
	if e == nil {
		prompts, e = s.prepareCompletion(req)
	}
	var factory constraintFactory
	if e == nil {
		factory, e = s.checkCompletion(vb, req.genRequest, prompts, "max_tokens")
	}
	stream := (req != nil && req.stream) || (req == nil && streamRequested(body))
	id := newID("cmpl-")
	ctx.SetUserValue(requestIDKey, id)
	created := s.cfg.Now().Unix()
	seqs := 0
	if req != nil {
		seqs = req.bestOf // the prompts run one after another
	}
	stop() // validation is over: serve watches the connection from here
	return s.serve(ctx, "completions", stream, e, seqs,
		func(gctx contextT, cancel func(), sse *sseWriter) (int, int) {
			return s.streamCompletion(gctx, cancel, sse, req, prompts, factory, id, created)
		},
		func(gctx contextT) handlerResult {
			return s.completeWhole(ctx, gctx, req, prompts, factory, id, created)
		})
}

// completeWhole generates every choice of a non-streamed completion and
// writes the body.
func (s *Server) completeWhole(ctx *fasthttp.RequestCtx, gctx contextT, req *completionRequest, prompts []preparedPrompt,
	factory constraintFactory, id string, created int64) handlerResult {
	resp := completionBody{ID: id, Object: "text_completion", Created: created, Model: s.info.Name, Choices: []completionChoice{}}
	u := &usage{}
	for pi, p := range prompts {
		u.PromptTokens += len(p.tokens)
		off := 0
		if req.echo {
			off = utf8.RuneCountInString(p.text)
		}
		specs := s.candidateSpecs(req.bestOf, genSpec{prompt: p.tokens, g: req.genRequest, constraint: factory,
			textOffset: off, wantLogprob: req.logprobs, echoLogprobs: req.echo && req.logprobs})
		cands, err := s.generateAll(gctx, specs, nil)
		if err != nil {
			s.writeError(ctx, modelError(err))
			return handlerResult{}
		}
		for _, c := range cands {
			u.CompletionTokens += c.tokens
		}
		cands = best(cands, req.n)
		for j, c := range cands {
			text := c.text
			if req.echo {
				text = p.text + text
			}
			fr := c.finish
			ch := completionChoice{Text: text, Index: pi*req.n + j, FinishReason: &fr}
			if req.logprobs {
				ch.Logprobs = toCompletionLogprobs(c.logprobs)
			}
			resp.Choices = append(resp.Choices, ch)
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	resp.Usage = u
	resp.Timings = reqStatsOf(gctx).timings()
	writeJSON(ctx, resp)
	return handlerResult{tokens: u.TotalTokens}
}

func (s *Server) streamCompletion(gctx contextT, cancel func(), sse *sseWriter, req *completionRequest, prompts []preparedPrompt,
	factory constraintFactory, id string, created int64) (int, int) {
	chunk := completionBody{ID: id, Object: "text_completion", Created: created, Model: s.info.Name,
		Choices: make([]completionChoice, 1)}
	var send func(index int, text string, lps []tokenLogprob, finish *string) error
	fast := newChunkBuf(id, "text_completion", created, s.info.Name)
	sendText := func(index int, text []byte, lps []tokenLogprob) error {
		if req.logprobs {
			return send(index, string(text), lps, nil)
		}
		err := sse.data(fast.completionText(index, text))
		if err != nil {
			cancel()
		}
		return err
	}
	send = func(index int, text string, lps []tokenLogprob, finish *string) error {
		chunk.Choices[0] = completionChoice{Text: text, Index: index, FinishReason: finish}
		if req.logprobs {
			chunk.Choices[0].Logprobs = toCompletionLogprobs(lps)
		}
		err := sse.json(&chunk)
		if err != nil {
			cancel()
		}
		return err
	}
	u := usage{}
	for pi, p := range prompts {
		u.PromptTokens += len(p.tokens)
		off := 0
		echoLP := req.echo && req.logprobs
		if req.echo {
			off = utf8.RuneCountInString(p.text)
			// With logprobs the echo goes out with the prompt's logprobs
			// once the model has scored it (generateAll sends it).
			for j := 0; j < req.n && !echoLP; j++ {
				if send(pi*req.n+j, p.text, nil, nil) != nil {
					return u.CompletionTokens, 499
				}
			}
		}
		specs := s.candidateSpecs(req.n, genSpec{prompt: p.tokens, g: req.genRequest, constraint: factory,
			textOffset: off, wantLogprob: req.logprobs, echoLogprobs: echoLP, echoText: p.text})
		// The candidates' chunks interleave as they are generated, each
		// with its choice index; each ends with its finish_reason.
		cands, err := s.generateAll(gctx, specs, func(j int, text []byte, lps []tokenLogprob) error {
			return sendText(pi*req.n+j, text, lps)
		})
		if err != nil {
			return u.CompletionTokens, streamFailed(sse, err)
		}
		for j, c := range cands {
			u.CompletionTokens += c.tokens
			fr := c.finish
			if !req.includeUsage && pi == len(prompts)-1 && j == len(cands)-1 {
				chunk.Timings = reqStatsOf(gctx).timings() // the final chunk carries the request's speed
			}
			if send(pi*req.n+j, "", nil, &fr) != nil {
				return u.CompletionTokens, 499
			}
		}
	}
	if req.includeUsage {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		if sse.json(completionBody{ID: id, Object: "text_completion", Created: created, Model: s.info.Name,
			Choices: []completionChoice{}, Usage: &u, Timings: reqStatsOf(gctx).timings()}) != nil {
			return u.CompletionTokens, 499
		}
	}
	sse.done()
	return u.CompletionTokens, 200
}

// streamError answers a streamed request that failed validation: HTTP 200,
// one error event, end of stream.
func (s *Server) streamError(ctx *fasthttp.RequestCtx, route string, e *Error) {
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		newSSEWriter(w).error(e)
	})
	s.logGeneration(route, string(ctx.Method()), string(ctx.Path()), e.Status, true, &reqStats{start: time.Now()}, "invalid", e)
}
