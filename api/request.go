package api

import (
	"errors"
	"math"
	"strconv"

	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// Limits of API-NOTES.md, and bounds on what one body may make the server
// hold before it is admitted (issue 17 item 3). The logit_bias bound here
// is the largest vocabulary in use; validation then holds it to the
// model's (at most one entry per token).
const (
	maxChoices      = 16
	maxArrayStrings = 2048
	maxLogitBias    = 1 << 18
	maxMessages     = 8192
	maxContentParts = 1024
	maxTools        = 512
	maxDetokenize   = 1 << 20
)

// genFields are the generation fields of API.md 4.1 shared by completions
// and chat.
var genFields = []string{
	"max_tokens", "min_tokens", "temperature", "top_k", "top_p", "tfs_z", "min_p", "typical_p",
	"min_keep", "repeat_penalty", "frequency_penalty", "presence_penalty", "penalty_last_n",
	"mirostat_mode", "mirostat_tau", "mirostat_eta", "seed", "logit_bias", "logit_bias_type",
	"grammar", "json_schema", "response_format", "grammar_root", "stop", "stream", "echo",
	"suffix", "best_of", "logprobs", "top_logprobs", "n", "model", "user", "stream_options",
	"max_completion_tokens",
}

// genRequest holds the decoded generation fields.
type genRequest struct {
	// compile bounds the request's grammar compiles (see reader.compile).
	compile      grammar.Budget
	params       sampling.Params
	maxTokens    int // -1: not given (up to the context)
	stop         []string
	stream       bool
	includeUsage bool
	echo         bool
	suffix       string
	n, bestOf    int
	logprobs     bool
	topLogprobs  int
	seedSet      bool
	grammar      string // GBNF source, "" for none
	grammarRoot  string
	// grammarParam is the request field the grammar comes from (grammar,
	// json_schema, response_format or tools), named by its errors.
	grammarParam string
}

// readGen decodes the generation fields of m. completion says the request
// is /v1/completions, where logprobs may be an integer (OpenAI's legacy
// form: the number of alternatives).
func (r *reader) readGen(m jsonObject, completion bool) *genRequest {
	g := &genRequest{params: sampling.DefaultParams(), compile: r.compile}
	p := &g.params
	g.maxTokens = r.maxTokens(m)
	p.MinTokens = int(r.intRange(m, "", "min_tokens", 0, 0, math.MaxInt32))
	p.Temperature = r.number(m, "", "temperature", p.Temperature)
	p.TopK = int(r.intRange(m, "", "top_k", int64(p.TopK), math.MinInt32, math.MaxInt32))
	p.TopP = r.number(m, "", "top_p", p.TopP)
	p.TFSZ = r.number(m, "", "tfs_z", p.TFSZ)
	p.MinP = r.number(m, "", "min_p", p.MinP)
	p.TypicalP = r.number(m, "", "typical_p", p.TypicalP)
	p.MinKeep = int(r.intRange(m, "", "min_keep", int64(p.MinKeep), math.MinInt32, math.MaxInt32))
	p.RepeatPenalty = r.number(m, "", "repeat_penalty", p.RepeatPenalty)
	p.FrequencyPenalty = r.number(m, "", "frequency_penalty", p.FrequencyPenalty)
	p.PresencePenalty = r.number(m, "", "presence_penalty", p.PresencePenalty)
	p.PenaltyLastN = int(r.intRange(m, "", "penalty_last_n", int64(p.PenaltyLastN), math.MinInt32, math.MaxInt32))
	p.MirostatMode = int(r.intRange(m, "", "mirostat_mode", 0, math.MinInt32, math.MaxInt32))
	p.MirostatTau = r.number(m, "", "mirostat_tau", p.MirostatTau)
	p.MirostatEta = r.number(m, "", "mirostat_eta", p.MirostatEta)
	if v, ok := m["seed"]; ok && v != nil {
		p.Seed = r.integerValue(v, "seed")
		g.seedSet = true
	}
	if lb, ok := m["logit_bias"]; ok && lb != nil {
		if !lb.isObject() {
			r.typeErr("logit_bias", "object mapping token ids to numbers", lb)
		} else {
			// Entries go straight into the map, which is bounded.
			p.LogitBias = make(map[string]float64, min(lb.count(), maxLogitBias+1))
			lb.members(func(k string, v jsonValue) bool {
				if _, dup := p.LogitBias[k]; !dup && len(p.LogitBias) >= maxLogitBias {
					r.fail(badRequest("logit_bias", "logit_bias: more than %d entries", maxLogitBias))
					return false
				}
				switch {
				case v.isBool():
					if v[0] == 't' {
						path := "logit_bias." + k
						r.fail(badRequest(path, "%s: true is not a bias; use a number, or false to ban the token", path))
					} else {
						p.LogitBias[k] = math.Inf(-1)
					}
				default:
					f, err := strconv.ParseFloat(unsafeString(v), 64)
					if err != nil || math.IsInf(f, 0) || !v.isNumber() {
						f = r.numberValue(v, "logit_bias."+k) // says why
					}
					p.LogitBias[k] = f
				}
				return r.err == nil
			})
		}
	}
	p.LogitBiasType = r.str(m, "", "logit_bias_type", p.LogitBiasType)
	g.stop, _, _ = r.strOrStrings(m, "", "stop", 16)
	for i, s := range g.stop {
		if s == "" {
			r.fail(badRequest(indexPath("stop", i), "stop[%d]: empty stop sequence", i))
		}
	}
	g.stream = r.boolean(m, "", "stream", false)
	if so, ok := m["stream_options"]; ok && so != nil {
		sm := r.object(so, "stream_options", "include_usage")
		if sm != nil {
			g.includeUsage = r.boolean(sm, "stream_options", "include_usage", false)
		}
	}
	g.echo = r.boolean(m, "", "echo", false)
	if r.err == nil && g.maxTokens == 0 && !(completion && g.echo) {
		r.fail(badRequest("max_tokens", "max_tokens: 0 is out of range: must be ≥ 1 (0 is allowed only with echo on /v1/completions, to return the prompt alone)"))
	}
	g.suffix, _ = r.optStr(m, "", "suffix")
	g.n = int(r.intRange(m, "", "n", 1, 1, maxChoices))
	g.bestOf = int(r.intRange(m, "", "best_of", int64(g.n), 1, maxChoices))
	if r.err == nil && g.bestOf < g.n {
		r.fail(badRequest("best_of", "best_of: %d is less than n (%d)", g.bestOf, g.n))
	}
	if v, ok := m["logprobs"]; ok && v != nil {
		switch {
		case v.isBool():
			g.logprobs = v[0] == 't'
		default:
			if !completion {
				r.typeErr("logprobs", "boolean", v)
				break
			}
			k := r.integerValue(v, "logprobs")
			if r.err == nil && (k < 0 || k > sampling.MaxTopLogprobs) {
				r.fail(badRequest("logprobs", "logprobs: %d is out of range [0, %d]", k, sampling.MaxTopLogprobs))
			}
			g.logprobs = k > 0
			g.topLogprobs = int(k)
		}
	}
	if _, ok := m["top_logprobs"]; ok {
		g.topLogprobs = int(r.intRange(m, "", "top_logprobs", 0, 0, sampling.MaxTopLogprobs))
	}
	if g.topLogprobs > 0 && !completion && !g.logprobs {
		// OpenAI requires logprobs with top_logprobs; accept it and turn it on.
		g.logprobs = true
	}
	p.Logprobs = g.logprobs
	p.TopLogprobs = g.topLogprobs
	if !g.logprobs {
		p.TopLogprobs = 0
		g.topLogprobs = 0
	}
	if g.bestOf > 1 {
		// Ranking candidates needs their log-probabilities.
		p.Logprobs = true
	}

	// Grammar sources: at most one of grammar, json_schema, response_format.
	g.grammarRoot = r.str(m, "", "grammar_root", "root")
	nsrc := 0
	if gs, ok := r.optStr(m, "", "grammar"); ok {
		g.grammar, g.grammarParam = gs, "grammar"
		nsrc++
	}
	if js, ok := m["json_schema"]; ok && js != nil {
		if !js.isObject() && !js.isBool() {
			r.typeErr("json_schema", "object (a JSON Schema)", js)
		}
		if r.err == nil {
			g.grammar = schemaGrammar(r, "json_schema", js)
			g.grammarRoot, g.grammarParam = "root", "json_schema"
			nsrc++
		}
	}
	if rf, ok := m["response_format"]; ok && rf != nil {
		gs := r.responseFormat(rf)
		if gs != "" {
			g.grammar = gs
			g.grammarRoot, g.grammarParam = "root", "response_format"
			nsrc++
		}
	}
	if r.err == nil && nsrc > 1 {
		r.fail(badRequest("grammar", "grammar, json_schema and response_format are exclusive: give at most one"))
	}
	if r.err == nil {
		if err := p.Validate(); err != nil {
			r.fail(paramError(err))
		}
	}
	return g
}

// maxTokensUnset is a request's max_tokens when it gives none: the
// server's default (Config.DefaultMaxTokens; Server.maxTokensFor).
const maxTokensUnset = -2

// maxTokens reads max_tokens and its newer name max_completion_tokens
// (API-NOTES "Accepted OpenAI fields"): -1 when either is null,
// maxTokensUnset when both are absent, a 400 naming max_completion_tokens
// when both are given with different values.
func (r *reader) maxTokens(m jsonObject) int {
	read := func(key string) (n int, given bool) {
		v, ok := m[key]
		if !ok {
			return maxTokensUnset, false
		}
		if v == nil {
			return -1, true
		}
		return int(r.intRange(m, "", key, 16, 0, math.MaxInt32)), true
	}
	n, given := read("max_tokens")
	c, cgiven := read("max_completion_tokens")
	switch {
	case r.err != nil:
		return n
	case cgiven && given && c != n:
		r.fail(badRequest("max_completion_tokens", "max_completion_tokens: %s, but max_tokens is %s: give one of them, or the same value",
			limitText(c), limitText(n)))
	case cgiven:
		return c
	}
	return n
}

func limitText(n int) string {
	if n < 0 {
		return "null"
	}
	return strconv.Itoa(n)
}

// promptInput is one prompt of a prompt or input field: text, or token ids
// when the client sent them tokenized (OpenAI's integer-array forms).
type promptInput struct {
	text     string
	tokens   []int32
	isTokens bool
}

// prompts reads a prompt or input field in any of OpenAI's forms: a
// string, an array of strings, an array of token ids (one prompt) or an
// array of such arrays; present reports whether the field was there (and
// not null). Token ids are checked against the vocabulary later, by the
// server (checkTokenIDs).
func (r *reader) prompts(m jsonObject, key string, maxLen int) (out []promptInput, present bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false
	}
	const want = "string, array of strings, array of token ids or array of token-id arrays"
	switch {
	case v.isString():
		return []promptInput{{text: v.str()}}, true
	case v.isArray():
		out = []promptInput{}
		v.elems(func(i int, e jsonValue) bool {
			if i >= maxLen {
				r.fail(badRequest(key, "%s: more than %d prompts, at most %d allowed", key, maxLen, maxLen))
				return false
			}
			if i == 0 && e.isNumber() {
				out = append(out, r.tokenIDs(v, key))
				return false
			}
			p := indexPath(key, i)
			var in promptInput
			switch {
			case e.isString():
				in = promptInput{text: e.str()}
			case e.isArray():
				if e.count() == 0 {
					r.fail(badRequest(p, "%s: empty token array", p))
				}
				in = r.tokenIDs(e, p)
			default:
				r.typeErr(p, "string or array of token ids", e)
			}
			if r.err == nil && i > 0 && in.isTokens != out[0].isTokens {
				r.fail(badRequest(p, "%s: mixes strings and token arrays; give one kind", p))
			}
			out = append(out, in)
			return r.err == nil
		})
		if r.err != nil {
			return nil, true
		}
		return out, true
	}
	r.typeErr(key, want, v)
	return nil, true
}

// tokenIDs reads an array of non-negative integer token ids.
func (r *reader) tokenIDs(a jsonValue, path string) promptInput {
	toks := []int32{}
	a.elems(func(i int, x jsonValue) bool {
		p := indexPath(path, i)
		if !x.isNumber() {
			r.typeErr(p, "integer token id", x)
			return false
		}
		id := r.integerValue(x, p)
		if r.err == nil && (id < 0 || id > math.MaxInt32) {
			r.fail(badRequest(p, "%s: token id %d is out of range", p, id))
		}
		toks = append(toks, int32(id))
		return r.err == nil
	})
	if r.err != nil {
		return promptInput{}
	}
	return promptInput{tokens: toks, isTokens: true}
}

// paramError maps a *sampling.ParamError to a 400 naming its field.
func paramError(err error) *Error {
	var pe *sampling.ParamError
	if errors.As(err, &pe) {
		return badRequest(pe.Field, "%s: %s", pe.Field, pe.Msg)
	}
	return badRequest("", "%v", err)
}

func (r *reader) responseFormat(rf jsonValue) string {
	switch {
	case rf.isString():
		x := rf.str()
		switch x {
		case "text":
			return ""
		case "json_object":
			return jsonObjectGrammar()
		}
		r.fail(badRequest("response_format", "response_format: %q is not one of \"text\", \"json_object\", or an object", x))
		return ""
	case rf.isObject():
		m := r.object(rf, "response_format", "type", "json_schema", "schema")
		if m == nil {
			return ""
		}
		typ := r.str(m, "response_format", "type", "")
		switch typ {
		case "text":
			return ""
		case "json_object":
			if s, ok := m["schema"]; ok && s != nil {
				return schemaGrammar(r, "response_format.schema", s)
			}
			return jsonObjectGrammar()
		case "json_schema":
			js, ok := m["json_schema"]
			if !ok || js == nil {
				if s, ok := m["schema"]; ok && s != nil {
					return schemaGrammar(r, "response_format.schema", s)
				}
				r.fail(badRequest("response_format.json_schema", "response_format.json_schema: missing, want {\"name\", \"schema\", \"strict\"}"))
				return ""
			}
			jm := r.object(js, "response_format.json_schema", "name", "schema", "strict", "description")
			if jm == nil {
				return ""
			}
			r.str(jm, "response_format.json_schema", "name", "")
			r.str(jm, "response_format.json_schema", "description", "")
			r.boolean(jm, "response_format.json_schema", "strict", false)
			s, ok := jm["schema"]
			if !ok || s == nil {
				return jsonObjectGrammar()
			}
			return schemaGrammar(r, "response_format.json_schema.schema", s)
		case "":
			r.fail(badRequest("response_format.type", "response_format.type: missing"))
		default:
			r.fail(badRequest("response_format.type", "response_format.type: %q is not one of \"text\", \"json_object\", \"json_schema\"", typ))
		}
		return ""
	}
	r.typeErr("response_format", "string or object", rf)
	return ""
}

// completionRequest is a decoded POST /v1/completions body.
type completionRequest struct {
	*genRequest
	prompts []promptInput
}

func decodeCompletion(b grammar.Budget, body []byte) (*completionRequest, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return nil, e
	}
	r := &reader{compile: b}
	m := r.object(v, "", append([]string{"prompt"}, genFields...)...)
	if r.err != nil {
		return nil, r.err
	}
	req := &completionRequest{}
	prompts, present := r.prompts(m, "prompt", maxArrayStrings)
	if r.err == nil && !present {
		r.fail(badRequest("prompt", "prompt: missing, want a string, an array of strings or token ids"))
	}
	if r.err == nil && len(prompts) == 0 {
		r.fail(badRequest("prompt", "prompt: empty array"))
	}
	req.prompts = prompts
	req.genRequest = r.readGen(m, true)
	if r.err != nil {
		return nil, r.err
	}
	return req, nil
}

// embeddingRequest is a decoded POST /v1/embeddings body.
type embeddingRequest struct {
	input     []promptInput
	normalize bool
	base64    bool
}

func decodeEmbedding(body []byte) (*embeddingRequest, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return nil, e
	}
	r := &reader{}
	m := r.object(v, "", "input", "normalize", "encoding_format", "model", "user", "dimensions")
	if r.err != nil {
		return nil, r.err
	}
	req := &embeddingRequest{}
	in, present := r.prompts(m, "input", maxArrayStrings)
	if r.err == nil && !present {
		r.fail(badRequest("input", "input: missing, want a string, an array of strings or token ids"))
	}
	if r.err == nil && len(in) == 0 {
		r.fail(badRequest("input", "input: empty array"))
	}
	for i, p := range in {
		if !p.isTokens && p.text == "" && r.err == nil {
			r.fail(badRequest(indexPath("input", i), "%s: empty string", indexPath("input", i)))
		}
	}
	req.input = in
	req.normalize = r.boolean(m, "", "normalize", true)
	switch f := r.str(m, "", "encoding_format", "float"); f {
	case "float":
	case "base64":
		req.base64 = true
	default:
		r.fail(badRequest("encoding_format", "encoding_format: %q is not one of \"float\", \"base64\"", f))
	}
	if _, ok := m["dimensions"]; ok {
		r.fail(badRequest("dimensions", "dimensions: not supported; the model's embedding size is fixed"))
	}
	if r.err != nil {
		return nil, r.err
	}
	return req, nil
}

// rerankRequest is a decoded rerank body.
type rerankRequest struct {
	query     string
	documents []string
	topN      int
}

func decodeRerank(body []byte) (*rerankRequest, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return nil, e
	}
	r := &reader{}
	m := r.object(v, "", "query", "documents", "top_n", "model", "user", "return_documents")
	if r.err != nil {
		return nil, r.err
	}
	req := &rerankRequest{}
	q, ok := r.optStr(m, "", "query")
	if r.err == nil && !ok {
		r.fail(badRequest("query", "query: missing, want a string"))
	}
	req.query = q
	docs, isArray, present := r.strOrStrings(m, "", "documents", maxArrayStrings)
	if r.err == nil && (!present || !isArray) {
		r.fail(badRequest("documents", "documents: missing, want an array of strings"))
	}
	if r.err == nil && len(docs) == 0 {
		r.fail(badRequest("documents", "documents: empty array"))
	}
	req.documents = docs
	req.topN = int(r.intRange(m, "", "top_n", int64(len(docs)), 0, math.MaxInt32))
	r.boolean(m, "", "return_documents", true)
	if r.err != nil {
		return nil, r.err
	}
	if req.topN > len(docs) {
		req.topN = len(docs)
	}
	return req, nil
}

// tokenizeRequest is a decoded /extras/tokenize body.
type tokenizeRequest struct {
	input string
	// parseSpecial turns special-token text into its id (default true,
	// API-NOTES); false tokenizes it as plain text.
	parseSpecial bool
}

func decodeTokenize(body []byte) (tokenizeRequest, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return tokenizeRequest{}, e
	}
	r := &reader{}
	m := r.object(v, "", "input", "model", "parse_special")
	s, ok := r.optStr(m, "", "input")
	if r.err == nil && !ok {
		r.fail(badRequest("input", "input: missing, want a string"))
	}
	req := tokenizeRequest{input: s, parseSpecial: r.boolean(m, "", "parse_special", true)}
	if r.err != nil {
		return tokenizeRequest{}, r.err
	}
	return req, nil
}

func decodeDetokenize(body []byte, vocab int) ([]int32, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return nil, e
	}
	r := &reader{}
	m := r.object(v, "", "tokens", "model")
	a, ok := r.array(m, "", "tokens")
	if r.err == nil && !ok {
		r.fail(badRequest("tokens", "tokens: missing, want an array of integer token ids"))
	}
	out := make([]int32, 0, min(a.count(), maxDetokenize))
	r.each(a, "tokens", maxDetokenize, func(i int, x jsonValue) {
		id, err := strconv.ParseInt(unsafeString(x), 10, 64)
		if err != nil {
			// Not a plain integer: the general path says why (or
			// takes 1e3).
			if id = r.integerValue(x, indexPath("tokens", i)); r.err != nil {
				return
			}
		}
		if id < 0 || id >= int64(vocab) {
			r.fail(badRequest(indexPath("tokens", i), "tokens[%d]: token id %d is outside the vocabulary [0, %d)", i, id, vocab))
			return
		}
		out = append(out, int32(id))
	})
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}
