package api

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// tokenLogprob is one generated token's log-probability data.
type tokenLogprob struct {
	text    string
	logprob float32
	top     []topLogprob
	offset  int  // character offset of the token's text in the choice text
	null    bool // no logprob: the prompt's first token (echo), which nothing predicts
}

type topLogprob struct {
	text    string
	logprob float32
}

// candidate is the result of one sequence.
type candidate struct {
	text     string
	finish   string // "stop", "length", "tool_calls"
	tokens   int
	logprobs []tokenLogprob
	sumLP    float64
}

// genSpec is one sequence to generate.
type genSpec struct {
	prompt      []int32
	media       []*engine.Media // the prompt's images (their rows hold pseudo-ids)
	g           *genRequest
	seed        int64
	maxTokens   int
	constraint  func() (sampling.Constraint, error)
	textOffset  int // characters before the first generated one in the choice text (echo)
	wantLogprob bool
	tools       bool     // render tool-call marker tokens
	think       []string // the reasoning marker tokens to render (the template's)
	// echoLogprobs (echo with logprobs): the choice's logprobs start with
	// the prompt's tokens, the first null; a streamed choice gets
	// echoText with them before its first token.
	echoLogprobs bool
	echoText     string
}

// genState is one candidate's progress while it generates.
type genState struct {
	sp      *genSpec
	ts      *textStream
	cand    *candidate
	pending []tokenLogprob
	chars   charCounter // of the text so far: the next token's text_offset
	echoed  bool        // the prompt's logprobs were passed on

	lastToken time.Time // when its last token arrived (metrics)
}

// generateAll runs the candidates sps of one prompt together. onText (may
// be nil) receives candidate i's releasable pieces of text and the logprobs
// of its tokens that completed since the previous call, from the calling
// goroutine; an error from it ends every candidate with that error.
func (s *Server) generateAll(ctx context.Context, sps []*genSpec, onText func(i int, text []byte, lps []tokenLogprob) error) ([]*candidate, error) {
	if len(sps) > 0 && sps[0].maxTokens == 0 && !sps[0].echoLogprobs {
		// echo with max_tokens 0: the prompt alone, nothing generated.
		cands := make([]*candidate, len(sps))
		for i := range cands {
			cands[i] = &candidate{finish: "length"}
		}
		return cands, nil
	}
	reqs := make([]*GenerateRequest, len(sps))
	states := make([]*genState, len(sps))
	timer := &genTimer{m: s.metrics, start: time.Now()}
	rs := reqStatsOf(ctx)
	for i, sp := range sps {
		req := &GenerateRequest{Prompt: sp.prompt, Media: sp.media, Params: sp.g.params, MaxTokens: max(sp.maxTokens, 1),
			Logprobs: sp.g.params.Logprobs, TopLogprobs: sp.g.topLogprobs, PromptLogprobs: sp.echoLogprobs}
		if rs != nil {
			req.ID = rs.id
		}
		req.Params.Seed = sp.seed
		if sp.constraint != nil {
			c, err := sp.constraint()
			if err != nil {
				return nil, err
			}
			req.Constraint = c
		}
		reqs[i] = req
		states[i] = &genState{sp: sp, ts: &textStream{stops: sp.g.stop}, cand: &candidate{finish: "length"}, chars: charCounter{n: sp.textOffset}}
	}
	emit := func(i int, ev *engine.Event) error {
		st := states[i]
		timer.event(st, ev, time.Now())
		sp, cand := st.sp, st.cand
		if sp.echoLogprobs && !st.echoed {
			st.echoed = true
			lps := s.promptLogprobs(sp.prompt, ev.Prompt)
			if onText == nil {
				st.pending = append(st.pending, lps...)
			} else {
				if err := onText(i, []byte(sp.echoText), lps); err != nil {
					return err
				}
				cand.logprobs = append(cand.logprobs, lps...)
			}
			if sp.maxTokens == 0 {
				return ErrStop // echo with max_tokens 0: the prompt scored, nothing generated
			}
		}
		if ev.EOG {
			cand.finish = "stop"
			return nil
		}
		cand.tokens++
		piece := s.piece(ev.Token, sp.tools, sp.think)
		cand.sumLP += float64(ev.Logprob)
		if sp.wantLogprob {
			lp := tokenLogprob{text: string(piece), logprob: ev.Logprob, offset: st.chars.n}
			for _, t := range ev.Top {
				lp.top = append(lp.top, topLogprob{text: string(s.backend.Piece(t.ID)), logprob: t.Logprob})
			}
			st.pending = append(st.pending, lp)
			st.chars.add(piece)
		}
		out, stopped := st.ts.add(piece)
		if stopped {
			cand.finish = "stop"
		}
		if onText != nil && (len(out) > 0 || len(st.pending) > 0 && !stopped) {
			if err := onText(i, out, st.pending); err != nil {
				return err
			}
			cand.logprobs = append(cand.logprobs, st.pending...)
			st.pending = st.pending[:0]
		}
		if stopped {
			return ErrStop
		}
		if cand.tokens >= sp.maxTokens {
			cand.finish = "length"
			return ErrStop
		}
		return nil
	}
	err := s.run(ctx, func() error { return s.backend.Generate(ctx, reqs, emit) })
	if errors.Is(err, grammar.ErrDeadEnd) {
		// The request's grammar cannot be followed with this model's
		// vocabulary: the request's fault, named by its field.
		param := sps[0].g.grammarParam
		return nil, errorf(422, param, "%s: generation stopped: the grammar cannot be followed with this model's tokens: %v", param, err)
	}
	if err != nil && !errors.Is(err, ErrStop) {
		// The request's stats count what ran before the error (a client
		// that left, a cancelled or failed generation): its log line says
		// how many tokens it really took.
		partial := make([]*candidate, len(states))
		for i, st := range states {
			partial[i] = st.cand
		}
		timer.finish(rs, len(sps[0].prompt), partial)
		return nil, err
	}
	cands := make([]*candidate, len(states))
	for i, st := range states {
		if rest := st.ts.flush(); onText != nil && (len(rest) > 0 || len(st.pending) > 0) {
			if err := onText(i, rest, st.pending); err != nil {
				return nil, err
			}
		}
		st.cand.logprobs = append(st.cand.logprobs, st.pending...)
		st.cand.text = st.ts.text()
		cands[i] = st.cand
	}
	timer.finish(rs, len(sps[0].prompt), cands)
	return cands, nil
}

// promptLogprobs returns the logprobs entries of prompt's tokens for echo:
// the first null (nothing predicts it), the others from scored (the
// backend's, one per token after the first; a token it did not score is
// null too). Offsets count from the prompt's start.
func (s *Server) promptLogprobs(prompt []int32, scored []engine.PromptLogprob) []tokenLogprob {
	out := make([]tokenLogprob, len(prompt))
	var chars charCounter
	for j, tok := range prompt {
		lp := tokenLogprob{text: string(s.backend.Piece(tok)), offset: chars.n, null: true}
		if j > 0 && j-1 < len(scored) && scored[j-1].Token == tok {
			sc := scored[j-1]
			lp.logprob, lp.null = sc.Logprob, false
			for _, t := range sc.Top {
				lp.top = append(lp.top, topLogprob{text: string(s.backend.Piece(t.ID)), logprob: t.Logprob})
			}
		}
		chars.add([]byte(lp.text))
		out[j] = lp
	}
	return out
}

// candidateSpecs returns the specs of count candidates of one prompt: the
// same request, candidate j seeded with seedFor(g, j).
func (s *Server) candidateSpecs(count int, sp genSpec) []*genSpec {
	specs := make([]*genSpec, count)
	for j := range specs {
		c := sp
		c.seed = seedFor(sp.g, j)
		c.maxTokens = s.maxTokensFor(sp.g, len(sp.prompt))
		specs[j] = &c
	}
	return specs
}

// streamFailed ends a stream whose generation failed with err: an error
// event, unless the client is gone (499). It returns the status to log.
func streamFailed(sse *sseWriter, err error) int {
	if sse.err != nil {
		return 499
	}
	e := modelError(err)
	sse.error(e)
	return e.Status
}

// meanLogprob ranks best_of candidates.
func (c *candidate) meanLogprob() float64 {
	if c.tokens == 0 {
		return math.Inf(-1)
	}
	return c.sumLP / float64(c.tokens)
}

// best returns the n candidates with the highest mean log-probability, in
// that order (ties keep generation order); all of them when n covers them.
func best(cands []*candidate, n int) []*candidate {
	if len(cands) <= n {
		return cands
	}
	slices.SortStableFunc(cands, func(a, b *candidate) int {
		return cmp.Compare(b.meanLogprob(), a.meanLogprob())
	})
	return cands[:n]
}

// seedFor returns the seed of candidate i: the request seed plus i when
// given, otherwise random.
func seedFor(g *genRequest, i int) int64 {
	if !g.seedSet {
		return sampling.RandomSeed
	}
	return int64(uint32(g.params.Seed) + uint32(i))
}

// maxTokensFor returns the generation budget of a prompt of n tokens.
func (s *Server) maxTokensFor(g *genRequest, n int) int {
	left := s.info.ContextSize - n
	want := g.maxTokens
	if want == maxTokensUnset {
		want = s.cfg.DefaultMaxTokens
		if want == 0 {
			want = 16
		}
	}
	if want < 0 || want > left {
		return left
	}
	return want
}

// grammarConstraint returns a factory of fresh matchers for src (nil when
// src is ""), or a 400 when the grammar does not parse.
func (s *Server) grammarConstraint(b grammar.Budget, src, root, param string) (func() (sampling.Constraint, error), *Error) {
	if src == "" {
		return nil, nil
	}
	matcher, e := s.grammarMatchers(b, src, root, param)
	if e != nil {
		return nil, e
	}
	return func() (sampling.Constraint, error) { return matcher(), nil }, nil
}

// grammarMatchers parses src (the request field param) over the model's
// vocabulary and returns a maker of fresh matchers, or a 400 when the
// grammar does not parse.
func (s *Server) grammarMatchers(b grammar.Budget, src, root, param string) (func() *grammar.Matcher, *Error) {
	gr, err := grammar.ParseBudget(src, root, b)
	if err != nil {
		if cancelled(b) {
			return nil, errCompileCancelled
		}
		return nil, badRequest(param, "%s: %v", param, err)
	}
	v, err := s.grammarVocab()
	if err != nil {
		return nil, errorf(500, "", "preparing the vocabulary for grammars: %v", err)
	}
	return func() *grammar.Matcher { return grammar.NewMatcher(gr, v) }, nil
}

// charCounter counts the characters of a text given in pieces, as
// OpenAI's text_offset counts them (not bytes): a character whose bytes
// span pieces counts once, at the piece that completes it, so a token
// inside a character has that character's offset.
type charCounter struct {
	n    int    // characters completed
	tail []byte // the bytes of a character not yet complete
}

// add counts piece.
func (c *charCounter) add(piece []byte) {
	data := append(c.tail, piece...)
	i := 0
	for i < len(data) && utf8.FullRune(data[i:]) {
		_, size := utf8.DecodeRune(data[i:])
		i += size
		c.n++
	}
	c.tail = append(c.tail[:0], data[i:]...)
}
