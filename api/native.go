package api

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// llama-server's native API (issue 32 item 3), for the tools built on it:
// POST /completion (also /completions), /infill, /tokenize, /detokenize
// and /embedding in the reference's request and response shapes, over the
// same tokenizer, queue and generation as the OpenAI routes; and the
// OpenAI routes without their /v1 prefix, as llama-server serves them.

// nativeRoutes registers the native routes on r.
func (s *Server) nativeRoutes(r *router.Router) {
	r.POST("/completion", s.wrap("completion", s.handleNativeCompletion))
	r.POST("/completions", s.wrap("completion", s.handleNativeCompletion))
	r.POST("/infill", s.wrap("infill", s.handleInfill))
	r.POST("/tokenize", s.wrap("tokenize", s.handleNativeTokenize))
	r.POST("/detokenize", s.wrap("detokenize", s.handleNativeDetokenize))
	r.POST("/embedding", s.wrap("embedding", s.handleNativeEmbedding))
	r.POST("/chat/completions", s.wrap("chat", s.handleChat))
	r.POST("/embeddings", s.wrap("embeddings", s.handleEmbeddings))
}

// nativeFields are the fields of a /completion body: llama-server's.
// Those for samplers vkllm lacks (DRY, XTC, dynamic temperature) are
// taken at the values that turn them off, which is their default.
var nativeFields = []string{
	"prompt", "n_predict", "cache_prompt", "id_slot", "ignore_eos", "n_probs", "samplers", "stream", "model",
	"temperature", "top_k", "top_p", "min_p", "typical_p", "tfs_z", "min_keep", "repeat_penalty", "repeat_last_n",
	"presence_penalty", "frequency_penalty", "mirostat", "mirostat_tau", "mirostat_eta", "grammar", "json_schema",
	"seed", "logit_bias", "stop", "n_keep", "return_tokens", "timings_per_token", "post_sampling_probs",
	"dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers",
	"xtc_probability", "xtc_threshold", "dynatemp_range", "dynatemp_exponent", "n_indent", "t_max_predict_ms",
}

// infillFields are /infill's own fields, besides nativeFields.
var infillFields = []string{"input_prefix", "input_suffix", "input_extra"}

// nativeSamplers are the names samplers may hold (llama-server's); the
// chain's order is vkllm's whatever their order, and a sampler left out
// is turned off.
var nativeSamplers = []string{"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "typical_p", "top_p", "min_p",
	"xtc", "temperature", "infill"}

// defaultSamplers is vkllm's chain as llama-server names its samplers, in
// its order (sampling's package comment): what samplers means when absent.
var defaultSamplers = []string{"penalties", "top_k", "typ_p", "top_p", "min_p", "temperature"}

// nativeRequest is a decoded /completion or /infill body.
type nativeRequest struct {
	*genRequest
	prompts   []promptInput
	multi     bool // prompt was an array of prompts: the answer is an array
	nProbs    int
	ignoreEOS bool
	idSlot    int
	// zero: n_predict 0, which evaluates the prompt and generates nothing.
	zero     bool
	settings map[string]any // generation_settings, echoed
	// pieceIDs maps token pieces to the lowest id with them, for n_probs
	// (nativeProbs).
	pieceIDs map[string]int32

	// /infill
	prefix, suffix string
	extra          []infillChunk
}

// infillChunk is one entry of input_extra.
type infillChunk struct{ filename, text string }

func (s *Server) decodeNative(b grammar.Budget, body []byte, infill bool) (*nativeRequest, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return nil, e
	}
	r := &reader{compile: b}
	known := nativeFields
	if infill {
		known = append(slices.Clip(known), infillFields...)
	}
	m := r.object(v, "", known...)
	if r.err != nil {
		return nil, r.err
	}
	req := &nativeRequest{idSlot: -1}
	if infill {
		req.prefix, _ = r.optStr(m, "", "input_prefix")
		req.suffix, _ = r.optStr(m, "", "input_suffix")
		if a, ok := r.array(m, "", "input_extra"); ok {
			r.each(a, "input_extra", maxArrayStrings, func(i int, x jsonValue) {
				p := indexPath("input_extra", i)
				if cm := r.object(x, p, "filename", "text"); cm != nil {
					req.extra = append(req.extra, infillChunk{r.str(cm, p, "filename", ""), r.str(cm, p, "text", "")})
				}
			})
		}
		p, _ := r.optStr(m, "", "prompt")
		req.prompts = []promptInput{{text: p}}
	} else {
		prompts, present := r.prompts(m, "prompt", maxArrayStrings)
		if r.err == nil && (!present || len(prompts) == 0) {
			r.fail(badRequest("prompt", "prompt: missing, want a string, an array of strings or token ids"))
		}
		req.prompts = prompts
		// An array of prompts gets an array of answers; one prompt of
		// token ids is one prompt.
		req.multi = present && m["prompt"].isArray() && !firstIsNumber(m["prompt"])
	}

	// The fields readGen reads, under their OpenAI names.
	gm := jsonObject{}
	for _, k := range []string{"temperature", "top_k", "top_p", "min_p", "typical_p", "tfs_z", "min_keep", "repeat_penalty",
		"presence_penalty", "frequency_penalty", "mirostat_tau", "mirostat_eta", "grammar", "json_schema", "seed", "stop", "stream"} {
		if x, ok := m[k]; ok {
			gm[k] = x
		}
	}
	// Renamed fields are checked here, so that an error names them as sent.
	if x, ok := m["repeat_last_n"]; ok {
		r.intRange(m, "", "repeat_last_n", 0, -1, math.MaxInt32)
		gm["penalty_last_n"] = x
	}
	if x, ok := m["mirostat"]; ok {
		r.intRange(m, "", "mirostat", 0, 0, 2)
		gm["mirostat_mode"] = x
	}
	// n_predict: -1 (llama-server's default) runs to the context or EOS;
	// absent takes the server's --n-predict when one is set.
	n := r.intRange(m, "", "n_predict", -1, -1, math.MaxInt32)
	switch _, given := m["n_predict"]; {
	case !given && s.cfg.DefaultMaxTokens != 0:
		n = int64(s.cfg.DefaultMaxTokens)
	case n == 0:
		req.zero = true
		gm["max_tokens"] = jsonValue("1")
	case n < 0:
		gm["max_tokens"] = nil
	default:
		gm["max_tokens"] = jsonValue(strconv.FormatInt(n, 10))
	}
	req.nProbs = int(r.intRange(m, "", "n_probs", 0, 0, sampling.MaxTopLogprobs))
	if req.nProbs > 0 {
		gm["logprobs"] = jsonValue("true")
		gm["top_logprobs"] = jsonValue(strconv.Itoa(req.nProbs))
	}
	if lb, ok := m["logit_bias"]; ok && lb != nil {
		gm["logit_bias"] = r.nativeLogitBias(lb)
	}
	req.ignoreEOS = r.boolean(m, "", "ignore_eos", false)
	r.boolean(m, "", "cache_prompt", true) // prefixes are always reused; the output is the same
	req.idSlot = int(r.intRange(m, "", "id_slot", -1, -1, int64(s.cfg.Parallel)-1))
	r.intRange(m, "", "n_keep", 0, -1, math.MaxInt32) // the context never shifts: a prompt over it is a 400
	r.boolean(m, "", "timings_per_token", false)
	r.optStr(m, "", "model")
	for _, k := range []string{"return_tokens", "post_sampling_probs"} {
		if r.boolean(m, "", k, false) && r.err == nil {
			r.fail(badRequest(k, "%s: true is not supported (send false or leave it out)", k))
		}
	}
	for _, k := range []string{"dry_multiplier", "xtc_probability", "dynatemp_range", "n_indent", "t_max_predict_ms"} {
		if x := r.number(m, "", k, 0); x != 0 && r.err == nil {
			r.fail(badRequest(k, "%s: %v is not supported: only 0 (off, the default) is", k, x))
		}
	}
	for _, k := range []string{"dry_base", "dry_allowed_length", "dry_penalty_last_n", "xtc_threshold", "dynatemp_exponent"} {
		r.number(m, "", k, 0)
	}
	if a, ok := r.array(m, "", "dry_sequence_breakers"); ok {
		r.each(a, "dry_sequence_breakers", 64, func(i int, x jsonValue) {
			if !x.isString() {
				r.typeErr(indexPath("dry_sequence_breakers", i), "string", x)
			}
		})
	}
	var samplers []string
	if a, ok := r.array(m, "", "samplers"); ok {
		samplers = []string{}
		r.each(a, "samplers", 32, func(i int, x jsonValue) {
			p := indexPath("samplers", i)
			switch {
			case !x.isString():
				r.typeErr(p, "string (a sampler name)", x)
			case !slices.Contains(nativeSamplers, x.str()):
				r.fail(badRequest(p, "%s: %q is not one of %s", p, x.str(), quoteList(nativeSamplers)))
			default:
				samplers = append(samplers, x.str())
			}
		})
	}
	req.genRequest = r.readGen(gm, false)
	if r.err != nil {
		return nil, r.err
	}
	if samplers == nil {
		samplers = defaultSamplers
	} else {
		// A sampler left out of the list is not used.
		p := &req.params
		has := func(names ...string) bool {
			return slices.ContainsFunc(names, func(n string) bool { return slices.Contains(samplers, n) })
		}
		if !has("top_k") {
			p.TopK = 0
		}
		if !has("top_p") {
			p.TopP = 1
		}
		if !has("min_p") {
			p.MinP = 0
		}
		if !has("typ_p", "typical_p") {
			p.TypicalP = 1
		}
		if !has("temperature") && p.Temperature > 0 {
			p.Temperature = 1
		}
		if !has("penalties") {
			p.RepeatPenalty, p.FrequencyPenalty, p.PresencePenalty = 1, 0, 0
		}
	}
	req.settings = map[string]any{
		"n_predict": n, "seed": req.params.Seed, "temperature": req.params.Temperature, "top_k": req.params.TopK,
		"top_p": req.params.TopP, "min_p": req.params.MinP, "typical_p": req.params.TypicalP, "min_keep": req.params.MinKeep,
		"repeat_last_n": req.params.PenaltyLastN, "repeat_penalty": req.params.RepeatPenalty,
		"presence_penalty": req.params.PresencePenalty, "frequency_penalty": req.params.FrequencyPenalty,
		"mirostat": req.params.MirostatMode, "mirostat_tau": req.params.MirostatTau, "mirostat_eta": req.params.MirostatEta,
		"stop": nonNil(req.stop), "ignore_eos": req.ignoreEOS, "n_probs": req.nProbs, "stream": req.stream,
		"grammar": req.grammar, "samplers": samplers,
	}
	return req, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// firstIsNumber reports whether array a starts with a number: one prompt
// of token ids.
func firstIsNumber(a jsonValue) bool {
	first := false
	a.elems(func(i int, x jsonValue) bool { first = x.isNumber(); return false })
	return first
}

// nativeLogitBias converts llama-server's logit_bias, an array of [token
// id, bias] pairs (false for a ban) or an object, to the object readGen
// reads.
func (r *reader) nativeLogitBias(lb jsonValue) jsonValue {
	if !lb.isArray() {
		return lb // the OpenAI object form, checked by readGen
	}
	var b bytes.Buffer
	b.WriteByte('{')
	r.each(lb, "logit_bias", maxLogitBias, func(i int, pair jsonValue) {
		p := indexPath("logit_bias", i)
		if !pair.isArray() || pair.count() != 2 {
			r.typeErr(p, "[token id, bias] pair", pair)
			return
		}
		var id, bias jsonValue
		pair.elems(func(j int, x jsonValue) bool {
			if j == 0 {
				id = x
			} else {
				bias = x
			}
			return true
		})
		if !id.isNumber() {
			r.typeErr(p+"[0]", "integer token id (token texts are not supported)", id)
			return
		}
		if !bias.isNumber() && !bias.isBool() {
			r.typeErr(p+"[1]", "number, or false to ban the token", bias)
			return
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strconv.FormatInt(r.integerValue(id, p+"[0]"), 10) + `":`)
		b.Write(bias)
	})
	b.WriteByte('}')
	return jsonValue(b.Bytes())
}

// nativeProb is one entry of completion_probabilities.
type nativeProb struct {
	ID          int32        `json:"id"`
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []nativeProb `json:"top_logprobs,omitempty"`
}

// nativeCompletion is a /completion answer (or a stream event).
type nativeCompletion struct {
	Index              int            `json:"index"`
	Content            string         `json:"content"`
	Tokens             []int32        `json:"tokens"`
	IDSlot             int            `json:"id_slot"`
	Stop               bool           `json:"stop"`
	Model              string         `json:"model,omitempty"`
	TokensPredicted    *int           `json:"tokens_predicted,omitempty"`
	TokensEvaluated    *int           `json:"tokens_evaluated,omitempty"`
	GenerationSettings map[string]any `json:"generation_settings,omitempty"`
	Prompt             *string        `json:"prompt,omitempty"`
	HasNewLine         *bool          `json:"has_new_line,omitempty"`
	Truncated          *bool          `json:"truncated,omitempty"`
	StopType           string         `json:"stop_type,omitempty"`
	StoppingWord       *string        `json:"stopping_word,omitempty"`
	TokensCached       *int           `json:"tokens_cached,omitempty"`
	Timings            *timings       `json:"timings,omitempty"`
	// Probs is a []nativeProb, nil when n_probs is 0 (an empty list is
	// still sent).
	Probs any `json:"completion_probabilities,omitempty"`
}

// nativeProbs converts logprobs to completion_probabilities. Token ids
// are found by their text in the vocabulary (the lowest id with that
// piece), through req's map of pieces, built on first use.
func (s *Server) nativeProbs(req *nativeRequest, lps []tokenLogprob) []nativeProb {
	if req.pieceIDs == nil {
		req.pieceIDs = make(map[string]int32, s.info.VocabSize)
		for id := int32(s.info.VocabSize) - 1; id >= 0; id-- {
			req.pieceIDs[string(s.backend.Piece(id))] = id
		}
	}
	prob := func(text string, lp float32) nativeProb {
		b := make([]int, len(text))
		for i := range len(text) {
			b[i] = int(text[i])
		}
		id, ok := req.pieceIDs[text]
		if !ok {
			id = -1
		}
		return nativeProb{ID: id, Token: validText(text), Logprob: lp, Bytes: b}
	}
	out := make([]nativeProb, len(lps))
	for i, lp := range lps {
		out[i] = prob(lp.text, lp.logprob)
		out[i].TopLogprobs = make([]nativeProb, len(lp.top))
		for j, t := range lp.top {
			out[i].TopLogprobs[j] = prob(t.text, t.logprob)
		}
	}
	return out
}

func (s *Server) handleNativeCompletion(ctx *fasthttp.RequestCtx) handlerResult {
	return s.nativeGenerate(ctx, "completion", false)
}

func (s *Server) handleInfill(ctx *fasthttp.RequestCtx) handlerResult {
	return s.nativeGenerate(ctx, "infill", true)
}

// nativeGenerate serves /completion and /infill.
func (s *Server) nativeGenerate(ctx *fasthttp.RequestCtx, route string, infill bool) handlerResult {
	body := ctx.PostBody()
	vb, stop := s.validationBudget(ctx)
	defer stop()
	req, e := s.decodeNative(vb, body, infill)
	var prompts []preparedPrompt
	if e == nil && infill {
		var p preparedPrompt
		p, e = s.infillPrompt(req)
		prompts = []preparedPrompt{p}
	}
	if e == nil && !infill {
		for i, p := range req.prompts {
			param := "prompt"
			if req.multi {
				param = indexPath("prompt", i)
			}
			toks, text, pe := s.promptTokens(p, "", param)
			if pe == nil {
				pe = s.checkPrompt(param, len(toks))
			}
			if pe != nil {
				e = pe
				break
			}
			prompts = append(prompts, preparedPrompt{text: text, tokens: toks})
		}
	}
	if e == nil && req.ignoreEOS {
		if req.params.LogitBias == nil {
			req.params.LogitBias = map[string]float64{}
		}
		for _, id := range s.backend.EOG() {
			req.params.LogitBias[strconv.Itoa(int(id))] = math.Inf(-1)
		}
	}
	var factory constraintFactory
	if e == nil {
		factory, e = s.checkCompletion(vb, req.genRequest, prompts, "n_predict")
	}
	stream := (req != nil && req.stream) || (req == nil && streamRequested(body))
	seqs := 0
	if req != nil {
		seqs = len(prompts)
	}
	stop()
	return s.serve(ctx, route, stream, e, seqs,
		func(gctx contextT, cancel func(), sse *sseWriter) (int, int) {
			return s.nativeStream(gctx, cancel, sse, req, prompts, factory)
		},
		func(gctx contextT) handlerResult {
			return s.nativeWhole(ctx, gctx, req, prompts, factory)
		})
}

// nativeRun generates prompt p's completion; onText (may be nil) gets its
// pieces as they come.
func (s *Server) nativeRun(gctx contextT, req *nativeRequest, p preparedPrompt, factory constraintFactory,
	onText func(text []byte, lps []tokenLogprob) error) (*candidate, *Error) {
	if req.zero {
		return &candidate{finish: "length"}, nil
	}
	// The pieces tell a stop word from EOS: record them when there are
	// stop words.
	specs := s.candidateSpecs(1, genSpec{prompt: p.tokens, g: req.genRequest, constraint: factory,
		wantLogprob: req.nProbs > 0 || len(req.stop) > 0})
	var cb func(int, []byte, []tokenLogprob) error
	if onText != nil {
		cb = func(_ int, text []byte, lps []tokenLogprob) error { return onText(text, lps) }
	}
	cands, err := s.generateAll(gctx, specs, cb)
	if err != nil {
		return nil, modelError(err)
	}
	return cands[0], nil
}

// nativeFinal returns the last (or only) object of prompt i's answer.
// whole says it is a whole answer, not a stream's last event, which
// carries no content.
func (s *Server) nativeFinal(gctx contextT, req *nativeRequest, i int, p preparedPrompt, c *candidate, whole bool) nativeCompletion {
	content := ""
	if whole {
		content = c.text
	}
	stopType, word := "limit", ""
	if c.finish == "stop" {
		stopType = "eos"
		var all strings.Builder
		for _, lp := range c.logprobs {
			all.WriteString(lp.text)
		}
		for _, st := range req.stop {
			if strings.Contains(all.String(), st) {
				stopType, word = "word", st
				break
			}
		}
	}
	tm := reqStatsOf(gctx).timings()
	predicted, evaluated, cached := c.tokens, len(p.tokens), 0
	if tm != nil {
		cached = tm.CacheN
	}
	truncated, newline := false, strings.Contains(c.text, "\n")
	prompt := p.text
	out := nativeCompletion{Index: i, Content: content, Tokens: []int32{}, IDSlot: req.idSlot, Stop: true, Model: s.info.Name,
		TokensPredicted: &predicted, TokensEvaluated: &evaluated, GenerationSettings: req.settings, Prompt: &prompt,
		HasNewLine: &newline, Truncated: &truncated, StopType: stopType, StoppingWord: &word, TokensCached: &cached, Timings: tm}
	if req.nProbs > 0 && whole {
		// A stream sent them with its pieces.
		out.Probs = s.nativeProbs(req, c.logprobs)
	}
	return out
}

func (s *Server) nativeWhole(ctx *fasthttp.RequestCtx, gctx contextT, req *nativeRequest, prompts []preparedPrompt, factory constraintFactory) handlerResult {
	outs := make([]nativeCompletion, 0, len(prompts))
	tokens := 0
	for i, p := range prompts {
		c, e := s.nativeRun(gctx, req, p, factory, nil)
		if e != nil {
			s.writeError(ctx, e)
			return handlerResult{}
		}
		tokens += len(p.tokens) + c.tokens
		outs = append(outs, s.nativeFinal(gctx, req, i, p, c, true))
	}
	if req.multi {
		writeJSON(ctx, outs)
	} else {
		writeJSON(ctx, outs[0])
	}
	return handlerResult{tokens: tokens}
}

// nativeStream streams as llama-server does: one event per piece of text
// ({"content", "stop": false}), then the whole answer's fields with
// "stop": true and empty content; no [DONE].
func (s *Server) nativeStream(gctx contextT, cancel func(), sse *sseWriter, req *nativeRequest, prompts []preparedPrompt, factory constraintFactory) (int, int) {
	generated := 0
	for i, p := range prompts {
		c, e := s.nativeRun(gctx, req, p, factory, func(text []byte, lps []tokenLogprob) error {
			ev := nativeCompletion{Index: i, Content: string(text), Tokens: []int32{}, IDSlot: req.idSlot}
			if req.nProbs > 0 {
				ev.Probs = s.nativeProbs(req, lps)
			}
			err := sse.json(&ev)
			if err != nil {
				cancel()
			}
			return err
		})
		if e != nil {
			if sse.err != nil {
				return generated, 499
			}
			sse.error(e)
			return generated, e.Status
		}
		generated += c.tokens
		if sse.json(s.nativeFinal(gctx, req, i, p, c, false)) != nil {
			return generated, 499
		}
	}
	return generated, 200
}

// infillPrompt builds /infill's prompt from the model's FIM tokens, as
// llama-server lays it out: [BOS] [extra] <PRE>prefix <SUF>suffix <MID>prompt,
// where extra is, with the repository-level tokens, <REPO>myproject\n
// then <SEP>filename\ntext per chunk and <SEP>filename\n, else the chunks'
// texts.
func (s *Server) infillPrompt(req *nativeRequest) (preparedPrompt, *Error) {
	fim := s.info.FIM
	if fim == nil {
		return preparedPrompt{}, badRequest("model", "model: %s has no fill-in-the-middle tokens (GGUF tokenizer.ggml.fim_pre_token_id, fim_suf_token_id, fim_mid_token_id): /infill needs a model trained for code infilling", s.info.Name)
	}
	var toks []int32
	var tokErr *Error
	add := func(param, text string) {
		if tokErr != nil || text == "" {
			return
		}
		t, err := s.backend.Tokenize(text, false, false)
		if err != nil {
			tokErr = badRequest(param, "%s: %v", param, err)
		}
		toks = append(toks, t...)
	}
	bos, err := s.backend.Tokenize("", true, false)
	if err != nil {
		return preparedPrompt{}, badRequest("", "%v", err)
	}
	toks = append(toks, bos...)
	repo := fim.Rep >= 0 && fim.Sep >= 0
	if repo {
		toks = append(toks, fim.Rep)
		add("input_extra", "myproject\n")
	}
	for i, c := range req.extra {
		p := indexPath("input_extra", i)
		if repo {
			toks = append(toks, fim.Sep)
			add(p+".filename", c.filename+"\n")
		}
		add(p+".text", c.text)
	}
	if repo {
		toks = append(toks, fim.Sep)
		add("input_extra", "filename\n")
	}
	toks = append(toks, fim.Pre)
	add("input_prefix", req.prefix)
	toks = append(toks, fim.Suf)
	add("input_suffix", req.suffix)
	toks = append(toks, fim.Mid)
	add("prompt", req.prompts[0].text)
	if tokErr != nil {
		return preparedPrompt{}, tokErr
	}
	if e := s.checkPrompt("input_prefix", len(toks)); e != nil {
		return preparedPrompt{}, e
	}
	return preparedPrompt{text: req.prefix, tokens: toks}, nil
}

// handleNativeTokenize is llama-server's /tokenize: content, add_special
// (default false), parse_special (default true), with_pieces.
func (s *Server) handleNativeTokenize(ctx *fasthttp.RequestCtx) handlerResult {
	v, e := parseJSON(ctx.PostBody())
	r := &reader{err: e}
	var m jsonObject
	if e == nil {
		m = r.object(v, "", "content", "add_special", "parse_special", "with_pieces", "model")
	}
	content, ok := r.optStr(m, "", "content")
	if r.err == nil && !ok {
		r.fail(badRequest("content", "content: missing, want a string"))
	}
	addSpecial := r.boolean(m, "", "add_special", false)
	parseSpecial := r.boolean(m, "", "parse_special", true)
	withPieces := r.boolean(m, "", "with_pieces", false)
	r.optStr(m, "", "model")
	if r.err != nil {
		s.writeError(ctx, r.err)
		return handlerResult{}
	}
	toks, err := s.backend.Tokenize(content, addSpecial, parseSpecial)
	if err != nil {
		s.writeError(ctx, badRequest("content", "content: %v", err))
		return handlerResult{}
	}
	if !withPieces {
		writeJSON(ctx, map[string]any{"tokens": nonNilTokens(toks)})
		return handlerResult{tokens: len(toks)}
	}
	type piece struct {
		ID    int32 `json:"id"`
		Piece any   `json:"piece"`
	}
	out := make([]piece, len(toks))
	for i, id := range toks {
		b := s.backend.Piece(id)
		if b == nil || len(b) == 0 {
			b = []byte(s.backend.TokenText(id))
		}
		var pc any = string(b)
		if !utf8.Valid(b) {
			// Not text on its own: its bytes, as the reference sends them.
			n := make([]int, len(b))
			for k := range b {
				n[k] = int(b[k])
			}
			pc = n
		}
		out[i] = piece{id, pc}
	}
	writeJSON(ctx, map[string]any{"tokens": out})
	return handlerResult{tokens: len(toks)}
}

func nonNilTokens(t []int32) []int32 {
	if t == nil {
		return []int32{}
	}
	return t
}

// handleNativeDetokenize is llama-server's /detokenize: the text of
// tokens, special tokens as their text.
func (s *Server) handleNativeDetokenize(ctx *fasthttp.RequestCtx) handlerResult {
	toks, e := decodeDetokenize(ctx.PostBody(), s.info.VocabSize)
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	text, err := s.backend.Detokenize(toks)
	if err != nil {
		s.writeError(ctx, badRequest("tokens", "tokens: %v", err))
		return handlerResult{}
	}
	writeJSON(ctx, map[string]any{"content": validText(text)})
	return handlerResult{tokens: len(toks)}
}

// handleNativeEmbedding is llama-server's /embedding: content (a string,
// token ids, or an array of either) and embd_normalize; the answer is an
// array of {index, embedding: [vector]}.
func (s *Server) handleNativeEmbedding(ctx *fasthttp.RequestCtx) handlerResult {
	v, e := parseJSON(ctx.PostBody())
	r := &reader{err: e}
	var m jsonObject
	if e == nil {
		m = r.object(v, "", "content", "embd_normalize", "model")
	}
	in, present := r.prompts(m, "content", maxArrayStrings)
	if r.err == nil && (!present || len(in) == 0) {
		r.fail(badRequest("content", "content: missing, want a string, an array of strings or token ids"))
	}
	for i, p := range in {
		if !p.isTokens && p.text == "" && r.err == nil {
			r.fail(badRequest("content", "content: empty string (input %d)", i))
		}
	}
	norm := int(r.intRange(m, "", "embd_normalize", 2, -1, 64))
	r.optStr(m, "", "model")
	if r.err == nil && s.info.Reranker {
		r.fail(badRequest("model", "model: %s is a reranker; use /rerank", s.info.Name))
	}
	if r.err != nil {
		s.writeError(ctx, r.err)
		return handlerResult{}
	}
	vecs, n, e := s.embedInputs(in, "content", len(in) > 1)
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	type item struct {
		Index     int         `json:"index"`
		Embedding [][]float32 `json:"embedding"`
	}
	out := make([]item, len(vecs))
	for i, vec := range vecs {
		normalizeEmbedding(vec, norm)
		out[i] = item{i, [][]float32{vec}}
	}
	writeJSON(ctx, out)
	return handlerResult{tokens: n}
}

// normalizeEmbedding scales v as llama.cpp's embd_normalize says: -1
// none, 0 to the int16 range by its largest magnitude, 1 taxicab, 2
// Euclidean, p > 2 the p-norm.
func normalizeEmbedding(v []float32, norm int) {
	var sum float64
	switch {
	case norm < 0:
		return
	case norm == 0:
		for _, x := range v {
			sum = max(sum, math.Abs(float64(x)))
		}
		sum /= 32760
	case norm == 1:
		for _, x := range v {
			sum += math.Abs(float64(x))
		}
	case norm == 2:
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		sum = math.Sqrt(sum)
	default:
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), float64(norm))
		}
		sum = math.Pow(sum, 1/float64(norm))
	}
	if sum == 0 {
		return
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / sum)
	}
}
