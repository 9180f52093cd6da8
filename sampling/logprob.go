package sampling

import (
	"fmt"
	"math"
)

// TokenLogprob is a token id with its natural-log probability under the raw
// model distribution.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// lse computes (once per Sample) the maximum and log-sum-exp of the raw
// logits, in float64 so that log-probabilities of unlikely tokens keep their
// digits.
func (c *Chain) lse() error {
	if !c.rawValid {
		return ErrNoLogprobs
	}
	if c.lseValid {
		return nil
	}
	maxL := math.Inf(-1)
	for _, l := range c.raw {
		if float64(l) > maxL {
			maxL = float64(l)
		}
	}
	sum := 0.0
	if !math.IsInf(maxL, 0) {
		for _, l := range c.raw {
			if l == l { // a NaN logit has probability 0
				sum += expNonPos(float64(l) - maxL)
			}
		}
	}
	if math.IsInf(maxL, 1) {
		// A broken model's +Inf logits share all the mass.
		for _, l := range c.raw {
			if math.IsInf(float64(l), 1) {
				sum++
			}
		}
	}
	c.rawMax, c.rawLSE = maxL, math.Log(sum)
	c.lseValid = true
	return nil
}

// Score makes row the raw distribution that Logprob and TopLogprobs read,
// as a Sample of it would, without drawing a token or changing anything
// else in the chain: it is how a prompt's tokens get their
// log-probabilities. It needs Params.Logprobs or TopLogprobs > 0 and
// allocates nothing.
func (c *Chain) Score(row []float32) error {
	if c.raw == nil {
		return ErrNoLogprobs
	}
	if len(row) != len(c.raw) {
		return fmt.Errorf("sampling: logits row has %d entries, want vocabulary size %d", len(row), len(c.raw))
	}
	copy(c.raw, row)
	c.rawValid, c.lseValid = true, false
	return nil
}

// rawLogprob is the log-probability of a raw logit l.
func (c *Chain) rawLogprob(l float32) float32 {
	if math.IsInf(c.rawMax, 1) {
		if math.IsInf(float64(l), 1) {
			return float32(-c.rawLSE)
		}
		return float32(math.Inf(-1))
	}
	return float32(float64(l) - c.rawMax - c.rawLSE)
}

// Logprob returns the natural-log probability of token id under the raw
// model distribution of the most recent Sample: the softmax of the logits
// as they were passed in, before bias, penalties, grammar, truncation and
// temperature (see the package comment). A token whose raw logit is -Inf
// has log-probability -Inf. It needs Params.Logprobs or TopLogprobs > 0.
func (c *Chain) Logprob(id int32) (float32, error) {
	if err := c.lse(); err != nil {
		return 0, err
	}
	if id < 0 || int(id) >= len(c.raw) {
		return 0, fmt.Errorf("sampling: logprob: token %d is outside the vocabulary of %d", id, len(c.raw))
	}
	return c.rawLogprob(c.raw[id]), nil
}

// TopLogprobs appends to dst the n most likely tokens of the raw model
// distribution of the most recent Sample, most likely first (ties: lower id
// first), and returns the extended slice. It allocates nothing when dst has
// room for n more entries. It needs Params.Logprobs or TopLogprobs > 0.
func (c *Chain) TopLogprobs(dst []TokenLogprob, n int) ([]TokenLogprob, error) {
	if err := c.lse(); err != nil {
		return dst, err
	}
	n = min(n, len(c.raw))
	if n <= 0 {
		return dst, nil
	}
	// A min-heap of the n best kept in dst's tail: the root is the worst
	// kept (smallest logit, then largest id). Later ids lose ties.
	base := len(dst)
	h := dst
	for i, l := range c.raw[:n] {
		h = append(h, TokenLogprob{ID: int32(i), Logprob: l})
		siftUp(h[base:], i, lpWorse)
	}
	heap := h[base:]
	root := heap[0].Logprob
	for i := n; i < len(c.raw); i++ {
		l := c.raw[i]
		if l != l || (root == root && !(l > root)) {
			continue
		}
		heap[0] = TokenLogprob{ID: int32(i), Logprob: l}
		siftDown(heap, 0, lpWorse)
		root = heap[0].Logprob
	}
	// Heap sort: repeatedly move the worst to the end, leaving best first.
	for end := n - 1; end > 0; end-- {
		heap[0], heap[end] = heap[end], heap[0]
		siftDown(heap[:end], 0, lpWorse)
	}
	for i := range heap {
		heap[i].Logprob = c.rawLogprob(heap[i].Logprob)
	}
	return h, nil
}

// lpWorse orders heap entries: a is worse than b when its logit is smaller
// (NaN is worst of all) or equal with a larger id.
func lpWorse(a, b *TokenLogprob) bool {
	if a.Logprob != a.Logprob {
		return b.Logprob == b.Logprob || a.ID > b.ID
	}
	if b.Logprob != b.Logprob {
		return false
	}
	return a.Logprob < b.Logprob || (a.Logprob == b.Logprob && a.ID > b.ID)
}
