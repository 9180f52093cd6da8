package api

import (
	"errors"
	"sync"

	"encoding/base64"
	"encoding/binary"
	"math"
	"slices"

	"github.com/valyala/fasthttp"
)

// embedTexts tokenizes and embeds each text in one queue slot.
func (s *Server) embedTexts(texts []string, param string, multi bool) ([][]float32, int, *Error) {
	in := make([]promptInput, len(texts))
	for i, t := range texts {
		in[i].text = t
	}
	return s.embedInputs(in, param, multi)
}

// embedInputs tokenizes (or checks the token ids of) each input and embeds
// them in one queue slot.
func (s *Server) embedInputs(texts []promptInput, param string, multi bool) ([][]float32, int, *Error) {
	toks := make([][]int32, len(texts))
	for i, t := range texts {
		p := param
		if multi {
			p = indexPath(param, i)
		}
		tk, _, e := s.promptTokens(t, "", p)
		if e != nil {
			return nil, 0, e
		}
		toks[i] = tk
	}
	return s.embedTokens(toks, param, multi)
}

// embedTokens embeds each token sequence; the request takes the queue
// places of the inputs it runs at once (Config.MaxRequestSeqs).
func (s *Server) embedTokens(toks [][]int32, param string, multi bool) ([][]float32, int, *Error) {
	n := 0
	for i, tk := range toks {
		p := param
		if multi {
			p = indexPath(param, i)
		}
		if e := s.checkEmbedInput(p, len(tk)); e != nil {
			return nil, 0, e
		}
		n += len(tk)
	}
	if !s.reserve(len(toks)) {
		return nil, 0, errQueueFull
	}
	defer s.unreserve(len(toks))
	ctx, cancel := contextWithCancel(s)
	defer cancel()
	out := make([][]float32, len(toks))
	err := s.run(ctx, func() error {
		if !s.batching {
			for i, tk := range toks {
				v, err := s.backend.Embed(ctx, tk)
				if err != nil {
					return err
				}
				out[i] = v
			}
			return nil
		}
		// A batching backend runs the inputs together, at most
		// MaxRequestSeqs at once: the others wait behind other requests'.
		errs := make([]error, len(toks))
		var wg sync.WaitGroup
		turn := make(chan struct{}, s.cfg.MaxRequestSeqs)
		for i, tk := range toks {
			turn <- struct{}{}
			if err := ctx.Err(); err != nil {
				<-turn
				errs[i] = err
				continue
			}
			wg.Add(1)
			go func() {
				defer func() { <-turn; wg.Done() }()
				out[i], errs[i] = s.backend.Embed(ctx, tk)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, 0, modelError(err)
	}
	return out, n, nil
}

func l2normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := 1 / math.Sqrt(sum)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}

func (s *Server) handleEmbeddings(ctx *fasthttp.RequestCtx) handlerResult {
	req, e := decodeEmbedding(ctx.PostBody())
	if e == nil && s.info.Reranker {
		e = badRequest("model", "model: %s is a reranker (rank pooling: one relevance score per query and document); use /v1/rerank, or serve it with --pooling cls or mean for embeddings", s.info.Name)
	}
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	vecs, n, e := s.embedInputs(req.input, "input", len(req.input) > 1)
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	data := make([]map[string]any, len(vecs))
	for i, v := range vecs {
		if req.normalize {
			l2normalize(v)
		}
		var emb any = v
		if req.base64 {
			b := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	writeJSON(ctx, map[string]any{"object": "list", "data": data, "model": s.info.Name,
		"usage": map[string]int{"prompt_tokens": n, "total_tokens": n}})
	return handlerResult{tokens: n}
}

// cosine returns the cosine similarity of a and b.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range min(len(a), len(b)) {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

type rerankResult struct {
	Index          int               `json:"index"`
	RelevanceScore float64           `json:"relevance_score"`
	Document       map[string]string `json:"document"`
}

func (s *Server) handleRerank(ctx *fasthttp.RequestCtx) handlerResult {
	req, e := decodeRerank(ctx.PostBody())
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	results := make([]rerankResult, len(req.documents))
	var n int
	if rt, ok := s.backend.(RerankTokenizer); ok && s.info.Reranker {
		// A cross-encoder scores each (query, document) pair itself.
		toks := make([][]int32, len(req.documents))
		for i, d := range req.documents {
			tk, err := rt.RerankTokens(req.query, d)
			if err != nil {
				s.writeError(ctx, badRequest(indexPath("documents", i), "%s: %v", indexPath("documents", i), err))
				return handlerResult{}
			}
			toks[i] = tk
		}
		var scores [][]float32
		if scores, n, e = s.embedTokens(toks, "documents", true); e != nil {
			s.writeError(ctx, e)
			return handlerResult{}
		}
		for i, d := range req.documents {
			results[i] = rerankResult{Index: i, RelevanceScore: float64(scores[i][0]), Document: map[string]string{"text": d}}
		}
	} else {
		// Any other model: the cosine similarity of the pooled embeddings
		// of the query and of each document.
		texts := append([]string{req.query}, req.documents...)
		vecs, nt, e := s.embedTexts(texts, "documents", false)
		if e != nil {
			s.writeError(ctx, e)
			return handlerResult{}
		}
		n = nt
		for i, d := range req.documents {
			results[i] = rerankResult{Index: i, RelevanceScore: cosine(vecs[0], vecs[i+1]), Document: map[string]string{"text": d}}
		}
	}
	slices.SortStableFunc(results, func(a, b rerankResult) int {
		switch {
		case a.RelevanceScore > b.RelevanceScore:
			return -1
		case a.RelevanceScore < b.RelevanceScore:
			return 1
		}
		return 0
	})
	results = results[:req.topN]
	writeJSON(ctx, map[string]any{"object": "list", "model": s.info.Name, "results": results,
		"usage": map[string]int{"prompt_tokens": n, "total_tokens": n}})
	return handlerResult{tokens: n}
}
