package engine

import (
	"context"
	"fmt"
	"math"
)

// PerplexityResult is the outcome of Perplexity.
type PerplexityResult struct {
	PPL, Err float64 // perplexity and its standard error
	Chunks   int     // windows scored
	Ctx      int     // tokens per window
	Count    int     // tokens scored
}

// Perplexity scores text the way the reference implementation's perplexity
// tool does: the text is tokenized once with BOS, cut into consecutive
// windows of ctx tokens whose first token is replaced by BOS (when the model
// adds one), and only the second half of each window is scored, each token
// by the log-probability the model gave it at the position before. chunks
// limits the windows (< 0: all). report, if set, is called after each window
// with the running perplexity.
func Perplexity(ctx context.Context, m *Model, text string, nCtx, chunks int, report func(i, n int, ppl float64)) (PerplexityResult, error) {
	if nCtx < 4 {
		return PerplexityResult{}, fmt.Errorf("engine: perplexity window of %d tokens is too small", nCtx)
	}
	if nCtx > m.CtxSize() {
		return PerplexityResult{}, fmt.Errorf("engine: perplexity window of %d tokens exceeds the context of %d", nCtx, m.CtxSize())
	}
	tokens, err := m.Tok.Encode(text, true, false)
	if err != nil {
		return PerplexityResult{}, err
	}
	n := len(tokens) / nCtx
	if chunks >= 0 && chunks < n {
		n = chunks
	}
	if n == 0 {
		return PerplexityResult{}, fmt.Errorf("engine: the text has %d tokens, fewer than one window of %d", len(tokens), nCtx)
	}
	bos, hasBOS := m.Tok.BOS()
	first := nCtx / 2
	batch := m.GPU.Config().BatchSize
	var nll, nll2 float64
	count := 0
	window := make([]int32, nCtx)
	for c := range n {
		copy(window, tokens[c*nCtx:(c+1)*nCtx])
		if hasBOS && m.Tok.AddBOS() {
			window[0] = bos
		}
		for off := 0; off < nCtx; off += batch {
			if err := ctx.Err(); err != nil {
				return PerplexityResult{}, err
			}
			end := min(off+batch, nCtx)
			b := seqBatch(window[off:end], 0, off)
			for i := range b.Tokens {
				if off+i >= first && off+i < nCtx-1 {
					b.Out[i] = RowOut{Kind: OutLogits}
				}
			}
			logits, err := m.Forward(b)
			if err != nil {
				return PerplexityResult{}, err
			}
			V := m.Opts.Vocab
			r := 0
			for i := range b.Tokens {
				if b.Out[i].Kind != OutLogits {
					continue
				}
				row := logits[r*V : (r+1)*V]
				r++
				lp := logProb(row, int(window[off+i+1]))
				nll -= lp
				nll2 += lp * lp
				count++
			}
		}
		if report != nil {
			report(c+1, n, math.Exp(nll/float64(count)))
		}
	}
	mean := nll / float64(count)
	res := PerplexityResult{PPL: math.Exp(mean), Chunks: n, Ctx: nCtx, Count: count}
	if v := nll2/float64(count) - mean*mean; v > 0 && count > 1 {
		res.Err = math.Sqrt(v/float64(count-1)) * res.PPL
	}
	return res, nil
}

// logProb returns log softmax(row)[id] in f64.
func logProb(row []float32, id int) float64 {
	maxL := math.Inf(-1)
	for _, l := range row {
		maxL = math.Max(maxL, float64(l))
	}
	sum := 0.0
	for _, l := range row {
		sum += math.Exp(float64(l) - maxL)
	}
	return float64(row[id]) - maxL - math.Log(sum)
}
