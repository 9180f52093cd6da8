package api

import (
	"maps"
	"slices"
	"strconv"

	"github.com/vkllm/vkllm/sampling"
)

// Checks that need the model, run on a decoded generation request before it
// is admitted to the queue (issue 17 item 4): everything a request can get
// wrong is a 400 before it waits for a slot, and a streamed chat sends no
// role frame before these pass.

// resolveLogitBias checks the request's logit_bias against the model and
// rewrites it keyed by token id: decimal ids for logit_bias_type
// input_ids, token texts (tokenized as plain text, each of their tokens
// biased) for "tokens". Biases of keys that name the same token add up,
// in the order of the sorted keys (as the sampler would add them).
func (s *Server) resolveLogitBias(p *sampling.Params) *Error {
	if len(p.LogitBias) == 0 {
		return nil
	}
	vocab := s.info.VocabSize
	if len(p.LogitBias) > vocab {
		return badRequest("logit_bias", "logit_bias: %d entries, more than the %d tokens of the vocabulary", len(p.LogitBias), vocab)
	}
	byText := p.LogitBiasType == sampling.LogitBiasTokens
	out := make(map[string]float64, len(p.LogitBias))
	for _, k := range slices.Sorted(maps.Keys(p.LogitBias)) {
		path := "logit_bias." + k
		var ids []int32
		if byText {
			toks, err := s.backend.Tokenize(k, false, false)
			if err != nil {
				return badRequest(path, "%s: tokenizing %q: %v", path, k, err)
			}
			if len(toks) == 0 {
				return badRequest(path, "%s: %q is no token (logit_bias_type \"tokens\" biases the tokens of each text)", path, k)
			}
			ids = toks
		} else {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return badRequest(path, "%s: %q is not a token id (with logit_bias_type \"input_ids\" keys are decimal token ids; \"tokens\" takes token texts)", path, k)
			}
			ids = []int32{int32(id)}
		}
		for _, id := range ids {
			if id < 0 || int(id) >= vocab {
				return badRequest(path, "%s: token id %d is outside the vocabulary [0, %d)", path, id, vocab)
			}
			out[strconv.Itoa(int(id))] += p.LogitBias[k]
		}
	}
	p.LogitBias, p.LogitBiasType = out, sampling.LogitBiasInputIDs
	return nil
}

// maxRequestTokens returns the cap on the tokens of one request.
func (s *Server) maxRequestTokens() int {
	if s.cfg.MaxRequestTokens > 0 {
		return s.cfg.MaxRequestTokens
	}
	return 16 * s.info.ContextSize
}

// checkWork caps the work of one generation request (issue 17 item 1): the
// tokens it may make the model process, prompts x candidates x (prompt +
// generation budget), must fit Config.MaxRequestTokens. The 400 names the
// field that multiplies the work: the candidates, the prompts, or budget,
// the field that sets the generation budget (max_tokens; Responses'
// max_output_tokens).
func (s *Server) checkWork(g *genRequest, prompts []int, budget string) *Error {
	total := 0
	for _, n := range prompts {
		total += g.bestOf * (n + s.maxTokensFor(g, n))
	}
	limit := s.maxRequestTokens()
	if total <= limit {
		return nil
	}
	param := budget
	switch {
	case g.bestOf > g.n:
		param = "best_of"
	case g.bestOf > 1:
		param = "n"
	case len(prompts) > 1:
		param = "prompt"
	}
	return badRequest(param, "%s: the request asks for up to %d tokens (%d prompts x %d candidates x prompt and %s), more than the limit of %d per request (--max-request-tokens)",
		param, total, len(prompts), g.bestOf, budget, limit)
}
