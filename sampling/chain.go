package sampling

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
)

// Constraint restricts which tokens may come next (a grammar).
type Constraint interface {
	// Mask sets logits[id] to -Inf for every token id that may not come next.
	Mask(logits []float32) error
	// Accept advances the constraint past the chosen token id.
	Accept(id int32) error
}

// ConstraintChecker is an optional extension of a Constraint. Allows
// reports whether id may come next, without masking the vocabulary. When
// the chain's Constraint implements it, Sample follows llama.cpp's grammar
// order: it draws without the grammar first and, only if Allows rejects
// that token, masks with Mask and draws again (a second random number, and
// for Mirostat a second mu update, as there). Without it, Sample masks
// before every draw. The two agree for greedy decoding; when sampling, the
// first is llama.cpp's distribution and much cheaper per token, the second
// is the plain renormalized grammar distribution.
type ConstraintChecker interface {
	Allows(id int32) (bool, error)
}

// Vocab describes the vocabulary a chain samples from.
type Vocab struct {
	// Size is the number of token ids; every logits row has this length.
	Size int
	// EOG lists the end-of-generation token ids, masked until min_tokens
	// tokens have been accepted.
	EOG []int32
	// Tokenize turns logit_bias text into token ids for logit_bias_type
	// "tokens" (without BOS or other special tokens). It is called only by
	// NewChain and may be nil when no text keys are used.
	Tokenize func(text string) ([]int32, error)
}

// ErrNoCandidates is returned by Sample when every logit is -Inf or NaN after
// bias, penalties, min_tokens and grammar, so no token can be chosen.
var ErrNoCandidates = errors.New("sampling: no token can be sampled: every logit is -Inf or NaN")

// ErrNoLogprobs is returned by Logprob and TopLogprobs when the chain was
// built without Params.Logprobs or Params.TopLogprobs, or before the first
// Sample.
var ErrNoLogprobs = errors.New("sampling: logprobs were not enabled for this chain or nothing was sampled yet")

// tokenBias is one resolved logit_bias entry. Entries are added in order, so
// two text keys that share a token both apply.
type tokenBias struct {
	id   int32
	bias float32
}

// heapTopKMax is the largest top_k served by the one-pass heap; larger k
// gathers all candidates and uses quickselect.
const heapTopKMax = 1024

// Chain is the sampler chain of one sequence: its parameters, penalty
// window, Mirostat state, random number generator, optional grammar and
// scratch buffers. The order of the samplers is in the package comment.
//
// A Chain is not safe for concurrent use. Sample, then Accept the token
// the sequence actually continues with; Logprob and TopLogprobs describe
// the most recent Sample until the next one.
type Chain struct {
	p          Params
	vocabSize  int
	eog        []int32
	eogSaved   []float32 // EOG logits before the min_tokens mask
	constraint Constraint
	bias       []tokenBias
	pen        *penalties

	temp                       float32
	topP, minP, tfsZ, typicalP float32
	tau, eta                   float32
	mu                         float32 // Mirostat: twice tau at start
	seed                       uint32  // effective seed, drawn when RandomSeed
	rng                        mt19937
	nAccepted                  int // tokens accepted since Reset (not primed ones)

	cands []cand // scratch; capacity vocabSize, or TopK for the heap path

	// Logprob state: a copy of the raw logits of the last Sample and its
	// log-sum-exp, computed on first use.
	raw      []float32
	rawValid bool
	lseValid bool
	rawMax   float64
	rawLSE   float64
}

// NewChain returns the sampler chain of one sequence. It validates p,
// resolves logit_bias against v (text keys through v.Tokenize), and reserves
// every buffer the chain will use, so Sample and Accept allocate nothing.
// constraint may be nil. v.EOG and the bias are copied; v.Tokenize is not
// kept.
func NewChain(p Params, v Vocab, constraint Constraint) (*Chain, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if v.Size <= 0 || v.Size > math.MaxInt32 {
		return nil, fmt.Errorf("sampling: vocabulary size %d is out of range", v.Size)
	}
	for _, id := range v.EOG {
		if id < 0 || int(id) >= v.Size {
			return nil, fmt.Errorf("sampling: end-of-generation token id %d is outside the vocabulary of %d", id, v.Size)
		}
	}
	bias, err := resolveBias(&p, v)
	if err != nil {
		return nil, err
	}
	c := &Chain{
		p:          p,
		vocabSize:  v.Size,
		eog:        append([]int32(nil), v.EOG...),
		eogSaved:   make([]float32, len(v.EOG)),
		constraint: constraint,
		bias:       bias,
		pen:        newPenalties(&p, v.Size),
		temp:       float32(p.Temperature),
		topP:       float32(p.TopP),
		minP:       float32(p.MinP),
		tfsZ:       float32(p.TFSZ),
		typicalP:   float32(p.TypicalP),
		tau:        float32(p.MirostatTau),
		eta:        float32(p.MirostatEta),
	}
	c.mu = 2 * c.tau
	c.seedRNG(p.Seed)
	if p.TopK > 0 && p.TopK <= heapTopKMax && p.MirostatMode == 0 {
		c.cands = make([]cand, 0, p.TopK)
	} else {
		c.cands = make([]cand, 0, v.Size)
	}
	if p.Logprobs || p.TopLogprobs > 0 {
		c.raw = make([]float32, v.Size)
	}
	return c, nil
}

// seedRNG seeds the generator with the low 32 bits of seed, as llama.cpp
// does; a seed whose low 32 bits are all ones (RandomSeed, llama.cpp's
// LLAMA_DEFAULT_SEED) draws one.
func (c *Chain) seedRNG(seed int64) {
	c.seed = uint32(seed)
	if c.seed == math.MaxUint32 {
		c.seed = rand.Uint32() // runtime entropy; not a package-level generator of ours
	}
	c.rng.seed(c.seed)
}

func resolveBias(p *Params, v Vocab) ([]tokenBias, error) {
	if len(p.LogitBias) == 0 {
		return nil, nil
	}
	// Keys in sorted order, so that biases two keys give the same token add
	// up in the same order every time (float addition is not associative).
	var out []tokenBias
	for _, key := range slices.Sorted(maps.Keys(p.LogitBias)) {
		b := p.LogitBias[key]
		if p.LogitBiasType == LogitBiasTokens {
			if v.Tokenize == nil {
				return nil, paramErr("logit_bias", "logit_bias_type %q needs a tokenizer", LogitBiasTokens)
			}
			ids, err := v.Tokenize(key)
			if err != nil {
				return nil, paramErr("logit_bias", "tokenizing %q: %v", key, err)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= v.Size {
					return nil, paramErr("logit_bias", "%q tokenized to id %d outside the vocabulary of %d", key, id, v.Size)
				}
				out = append(out, tokenBias{id, float32(b)})
			}
			continue
		}
		id, err := strconv.ParseInt(key, 10, 32)
		if err != nil {
			return nil, paramErr("logit_bias", "key %q is not a token id", key)
		}
		if id < 0 || int(id) >= v.Size {
			return nil, paramErr("logit_bias", "token id %d is outside the vocabulary of %d", id, v.Size)
		}
		out = append(out, tokenBias{int32(id), float32(b)})
	}
	return out, nil
}

// Clone returns an independent chain for another candidate of the same
// request (n, best_of): same parameters, a copy of the penalty window,
// Mirostat mu and min_tokens progress, fresh scratch, and its own generator
// seeded with seed (RandomSeed draws one). constraint is the clone's grammar
// in the same state as this chain's, or nil; a Constraint cannot be copied
// through its interface, so the caller builds it.
func (c *Chain) Clone(seed int64, constraint Constraint) *Chain {
	d := *c
	d.constraint = constraint
	d.eog = append([]int32(nil), c.eog...)
	d.eogSaved = make([]float32, len(c.eog))
	d.bias = append([]tokenBias(nil), c.bias...)
	if c.pen != nil {
		d.pen = c.pen.clone()
	}
	d.cands = make([]cand, 0, cap(c.cands))
	if c.raw != nil {
		d.raw = make([]float32, len(c.raw))
	}
	d.rawValid, d.lseValid = false, false
	d.seedRNG(seed)
	return &d
}

// Reset returns the chain to its state after NewChain: empty penalty
// window, Mirostat mu = 2*tau, no accepted tokens, and the generator
// re-seeded with the same effective seed (also when that seed was drawn,
// where llama.cpp would draw a new one). It does not touch the Constraint;
// install a fresh one with SetConstraint.
func (c *Chain) Reset() {
	if c.pen != nil {
		c.pen.reset()
	}
	c.mu = 2 * c.tau
	c.nAccepted = 0
	c.rng.seed(c.seed)
	c.rawValid, c.lseValid = false, false
}

// SetConstraint replaces the grammar constraint; nil removes it.
func (c *Chain) SetConstraint(constraint Constraint) { c.constraint = constraint }

// Mu returns the current Mirostat target surprise mu (2*tau until the first
// Mirostat draw).
func (c *Chain) Mu() float32 { return c.mu }

// Prime records prompt tokens in the penalty window, as llama.cpp's server
// does before generating. They do not advance the constraint or count
// towards min_tokens.
func (c *Chain) Prime(tokens []int32) error {
	for i, id := range tokens {
		if id < 0 || int(id) >= c.vocabSize {
			return fmt.Errorf("sampling: prime: token %d (index %d) is outside the vocabulary of %d", id, i, c.vocabSize)
		}
	}
	if c.pen != nil {
		for _, id := range tokens {
			c.pen.accept(id)
		}
	}
	return nil
}

// Accept records id as the sequence's next token: it advances the
// constraint, enters id in the penalty window and counts it for min_tokens.
// If the constraint rejects id, Accept returns its error and records
// nothing.
func (c *Chain) Accept(id int32) error {
	if id < 0 || int(id) >= c.vocabSize {
		return fmt.Errorf("sampling: accept: token %d is outside the vocabulary of %d", id, c.vocabSize)
	}
	if c.constraint != nil {
		if err := c.constraint.Accept(id); err != nil {
			return fmt.Errorf("sampling: accept: grammar: %w", err)
		}
	}
	if c.pen != nil {
		c.pen.accept(id)
	}
	c.nAccepted++
	return nil
}

// Sample chooses the next token from logits, a row of Vocab.Size model
// logits, which it modifies in place (bias, penalties, min_tokens and the
// grammar mask are written into it; with a ConstraintChecker the mask only
// when the first draw was rejected), so the caller must not read the row
// as model output afterwards. It does not Accept the token. Mirostat
// updates mu here, as llama.cpp does. It returns ErrNoCandidates when no
// token is left, and the constraint's errors wrapped. Sample allocates
// nothing.
func (c *Chain) Sample(logits []float32) (int32, error) {
	if len(logits) != c.vocabSize {
		return -1, fmt.Errorf("sampling: logits row has %d entries, want vocabulary size %d", len(logits), c.vocabSize)
	}
	if c.raw != nil {
		copy(c.raw, logits)
		c.rawValid, c.lseValid = true, false
	}
	for _, b := range c.bias {
		logits[b.id] += b.bias
	}
	if c.pen != nil {
		c.pen.apply(logits)
	}
	eogMasked := c.nAccepted < c.p.MinTokens && len(c.eog) > 0
	if eogMasked {
		for i, id := range c.eog {
			c.eogSaved[i] = logits[id]
			logits[id] = float32(math.Inf(-1))
		}
	}
	id, err := c.constrainedPick(logits)
	if eogMasked && errors.Is(err, ErrNoCandidates) {
		// min_tokens yields when nothing but end-of-generation may come
		// next (a finished grammar, or a bias that bans everything else):
		// unmask the end tokens and draw among what the grammar allows.
		for i, id := range c.eog {
			logits[id] = c.eogSaved[i]
		}
		if c.constraint != nil {
			if err := c.constraint.Mask(logits); err != nil {
				return -1, fmt.Errorf("sampling: grammar: %w", err)
			}
		}
		return c.pick(logits)
	}
	return id, err
}

// Greedy reports whether the next Sample reads nothing of its row but the
// argmax of the raw logits: the id of the largest logit above -Inf, the
// lowest on ties, NaN never (ErrNoCandidates when there is none). That
// holds with temperature 0 (Mirostat or not) or top_k 1 without Mirostat,
// and no logit bias, penalties, pending min_tokens mask, grammar or
// log-probabilities. SampleArgmax then stands in for Sample, given that
// argmax computed elsewhere (the engine computes it on the GPU and reads
// back one id instead of the vocabulary-sized row). The answer changes
// with the chain's state: min_tokens counts accepted tokens, and
// SetConstraint adds or removes a grammar.
func (c *Chain) Greedy() bool {
	if c.constraint != nil || c.pen != nil || len(c.bias) > 0 || c.raw != nil {
		return false
	}
	if c.nAccepted < c.p.MinTokens && len(c.eog) > 0 {
		return false
	}
	return c.temp <= 0 || c.p.TopK == 1 && c.p.MirostatMode == 0
}

// SampleArgmax does what Sample would do on a row whose argmax (as Greedy
// defines it) is id, -1 meaning none: it returns id, or ErrNoCandidates
// for -1, and updates Mirostat's mu as a greedy Sample does. It fails when
// the chain is not Greedy or id is outside the vocabulary. It does not
// Accept the token and allocates nothing.
func (c *Chain) SampleArgmax(id int32) (int32, error) {
	if !c.Greedy() {
		return -1, errors.New("sampling: SampleArgmax: the chain reads more of the row than its argmax (Greedy is false)")
	}
	if id < -1 || int(id) >= c.vocabSize {
		return -1, fmt.Errorf("sampling: SampleArgmax: token %d is outside the vocabulary of %d", id, c.vocabSize)
	}
	if id < 0 {
		return -1, ErrNoCandidates
	}
	if c.temp <= 0 && c.p.MirostatMode != 0 {
		c.mu -= c.eta * (0 - c.tau) // as pick's greedy branch
	}
	return id, nil
}

// TopK returns k when the next Sample reads nothing of its row but the k
// largest logits, in order (the largest first, the lower id on ties, NaN
// and -Inf never kept): a random draw (temperature above 0, no Mirostat)
// with top_k k in 1..1024 and no logit bias, penalties, pending min_tokens
// mask, grammar or log-probabilities. It returns 0 otherwise, and for a
// Greedy chain (whose argmax SampleArgmax takes). SampleTopK then stands
// in for Sample, given those k logits computed elsewhere (the engine
// selects them on the GPU and reads back k ids and logits instead of the
// vocabulary-sized row). The answer changes with the chain's state, as
// Greedy's does.
func (c *Chain) TopK() int {
	if c.constraint != nil || c.pen != nil || len(c.bias) > 0 || c.raw != nil {
		return 0
	}
	if c.nAccepted < c.p.MinTokens && len(c.eog) > 0 {
		return 0
	}
	if c.temp <= 0 || c.p.MirostatMode != 0 || c.p.TopK < 2 || c.p.TopK > heapTopKMax {
		return 0
	}
	return c.p.TopK
}

// SampleTopK does what Sample would do on a row whose largest logits, as
// TopK orders them, are logits (their ids in ids): the first min(k,
// vocabulary) of them are read, k = TopK(), and more may be given. It
// draws the same token from the same random numbers as Sample on the whole
// row. It fails when TopK is 0, fewer entries are given than it reads, an
// id is outside the vocabulary, or the entries are out of order. It does
// not Accept the token and allocates nothing.
func (c *Chain) SampleTopK(ids []int32, logits []float32) (int32, error) {
	k := c.TopK()
	if k == 0 {
		return -1, errors.New("sampling: SampleTopK: the chain reads more of the row than its top k (TopK is 0)")
	}
	k = min(k, c.vocabSize)
	if len(ids) < k || len(logits) < k {
		return -1, fmt.Errorf("sampling: SampleTopK: %d ids and %d logits given, want at least top_k %d", len(ids), len(logits), k)
	}
	cs := c.cands[:0]
	for i := range k {
		id, l := ids[i], logits[i]
		if id < 0 || int(id) >= c.vocabSize {
			return -1, fmt.Errorf("sampling: SampleTopK: token %d is outside the vocabulary of %d", id, c.vocabSize)
		}
		if l != l || l < -math.MaxFloat32 {
			continue // NaN and -Inf rank last and are never candidates
		}
		if n := len(cs); n > 0 && (l > cs[n-1].logit || l == cs[n-1].logit && id <= cs[n-1].id) {
			return -1, fmt.Errorf("sampling: SampleTopK: entry %d (token %d, logit %v) is out of order", i, id, l)
		}
		cs = append(cs, cand{id: id, logit: l, key: -l})
	}
	cs, err := c.truncateRest(cs, true)
	if err != nil {
		return -1, err
	}
	return cs[c.draw(cs)].id, nil
}

// constrainedPick picks from logits under the grammar constraint, in
// llama.cpp's order when the constraint is a ConstraintChecker.
func (c *Chain) constrainedPick(logits []float32) (int32, error) {
	if c.constraint == nil {
		return c.pick(logits)
	}
	if checker, ok := c.constraint.(ConstraintChecker); ok {
		// llama.cpp's order: draw without the grammar, keep the token if
		// the grammar allows it, else mask and draw again. pick leaves
		// logits as they are, so the second draw sees the same row.
		id, err := c.pick(logits)
		if err != nil && !errors.Is(err, ErrNoCandidates) {
			return -1, err
		}
		if err == nil {
			allowed, err := checker.Allows(id)
			if err != nil {
				return -1, fmt.Errorf("sampling: grammar: %w", err)
			}
			if allowed {
				return id, nil
			}
		}
	}
	if err := c.constraint.Mask(logits); err != nil {
		return -1, fmt.Errorf("sampling: grammar: %w", err)
	}
	return c.pick(logits)
}

// pick chooses a token from logits that bias, penalties, min_tokens and the
// grammar have already edited. It does not modify logits.
func (c *Chain) pick(logits []float32) (int32, error) {
	if c.temp <= 0 {
		id := argmax(logits)
		if id < 0 {
			return -1, ErrNoCandidates
		}
		if c.p.MirostatMode != 0 {
			// llama.cpp's chain keeps only the maximum before Mirostat, which
			// then observes a surprise of 0 bits.
			c.mu -= c.eta * (0 - c.tau)
		}
		return id, nil
	}
	switch c.p.MirostatMode {
	case 1:
		return c.mirostatV1(logits)
	case 2:
		return c.mirostatV2(logits)
	}
	return c.truncateAndDraw(logits)
}

// argmax returns the id of the largest logit, the lowest id on ties, or -1
// when every logit is -Inf or NaN. Four interleaved lanes keep the
// comparisons independent, which is faster than one running maximum.
func argmax(logits []float32) int32 {
	ninf := float32(math.Inf(-1))
	b := [4]int{-1, -1, -1, -1}
	m := [4]float32{ninf, ninf, ninf, ninf}
	n := len(logits) &^ 3
	for i := 0; i < n; i += 4 {
		s := logits[i : i+4 : i+4]
		if s[0] > m[0] {
			m[0], b[0] = s[0], i
		}
		if s[1] > m[1] {
			m[1], b[1] = s[1], i+1
		}
		if s[2] > m[2] {
			m[2], b[2] = s[2], i+2
		}
		if s[3] > m[3] {
			m[3], b[3] = s[3], i+3
		}
	}
	for i := n; i < len(logits); i++ {
		if logits[i] > m[0] {
			m[0], b[0] = logits[i], i
		}
	}
	best, bestL := -1, ninf
	for j := range b {
		if b[j] >= 0 && (best < 0 || m[j] > bestL || (m[j] == bestL && b[j] < best)) {
			best, bestL = b[j], m[j]
		}
	}
	return int32(best)
}

// gather fills c.cands with every finite-or-+Inf logit divided by div (1 for
// none), unsorted, key = -logit.
func (c *Chain) gather(logits []float32, div float32) []cand {
	cs := c.cands[:0]
	for i, l := range logits {
		if l != l || l < -math.MaxFloat32 {
			continue
		}
		if div != 1 {
			l /= div
		}
		cs = append(cs, cand{id: int32(i), logit: l, key: -l})
	}
	return cs
}

func (c *Chain) truncateAndDraw(logits []float32) (int32, error) {
	cs, err := c.truncate(logits)
	if err != nil {
		return -1, err
	}
	i := c.draw(cs)
	return cs[i].id, nil
}

// truncate runs top_k, tfs_z, typical_p, top_p and min_p over logits and
// divides the survivors' logits by the temperature.
func (c *Chain) truncate(logits []float32) ([]cand, error) {
	var cs []cand
	sorted := false
	k := c.p.TopK
	if k > 0 && k <= heapTopKMax {
		cs = topKFromLogits(logits, k, c.cands)
		sorted = true
	} else {
		cs = c.gather(logits, 1)
		if k > 0 {
			// As llama.cpp, top_k sorts even when it keeps everything.
			k = min(k, len(cs))
			selectFirst(cs, k)
			cs = cs[:k]
			sorted = true
		}
	}
	return c.truncateRest(cs, sorted)
}

// truncateRest runs the samplers after top_k (tfs_z, typical_p, top_p and
// min_p) over cs and divides the survivors' logits by the temperature.
func (c *Chain) truncateRest(cs []cand, sorted bool) ([]cand, error) {
	if len(cs) == 0 {
		return nil, ErrNoCandidates
	}
	minKeep := c.p.MinKeep
	cs, sorted = tailFree(cs, sorted, c.tfsZ, minKeep)
	cs, sorted = typical(cs, sorted, c.typicalP, minKeep)
	cs, sorted = topP(cs, sorted, c.topP, minKeep)
	cs, _ = minP(cs, sorted, c.minP, minKeep)
	for i := range cs {
		cs[i].logit /= c.temp
	}
	return cs, nil
}

// draw samples an index of cs from the softmax of its logits exactly as
// llama.cpp's dist sampler does: float32 p = exp(l - max), a float64 sum,
// target = sum·u, and the first index whose float64 running sum reaches the
// target. One candidate takes no random number.
func (c *Chain) draw(cs []cand) int {
	if len(cs) == 1 {
		return 0
	}
	maxL := cs[0].logit
	for i := 1; i < len(cs); i++ {
		maxL = max(maxL, cs[i].logit)
	}
	sum := 0.0
	for i := range cs {
		p := expDiff(cs[i].logit, maxL)
		cs[i].p = p
		sum += float64(p)
	}
	target := sum * c.rng.canonical()
	run := 0.0
	for i := range cs {
		run += float64(cs[i].p)
		if run >= target {
			return i
		}
	}
	return len(cs) - 1 // rounding left run short of target
}

// mirostatV1 implements Mirostat 1 (Basu et al. 2021, algorithm 1) as
// llama.cpp does with m = 100: estimate the Zipf exponent s from the m most
// likely tokens, derive k from s, mu and the vocabulary size, draw from the
// top k, and move mu towards tau.
func (c *Chain) mirostatV1(logits []float32) (int32, error) {
	const m = 100
	cs := c.gather(logits, c.temp)
	if len(cs) == 0 {
		return -1, ErrNoCandidates
	}
	softmax(cs, false)
	head := min(m, len(cs))
	selectFirst(cs, head)

	// float32 throughout, as llama.cpp computes it.
	var sumTiBi, sumTiSq float32
	for i := 0; i < m-1 && i < len(cs)-1; i++ {
		ti := log32(float32(i+2) / float32(i+1))
		bi := log32(cs[i].p / cs[i+1].p)
		sumTiBi += ti * bi
		sumTiSq += ti * ti
	}
	sHat := sumTiBi / sumTiSq
	epsHat := sHat - 1
	kf := pow32(epsHat*pow32(2, c.mu)/(1-pow32(float32(c.vocabSize), -epsHat)), 1/sHat)
	// llama.cpp takes max(int(k), 1); an infinite or out-of-range k is
	// undefined there and keeps everything here.
	k := len(cs)
	switch {
	case kf != kf || kf < 1:
		k = 1
	case kf < float32(len(cs)):
		k = int(kf)
	}
	if k > head {
		// Extend the sorted prefix: everything in cs[head:] ranks below it.
		selectFirst(cs[head:], k-head)
	}
	cs = cs[:k]
	softmax(cs, true)
	i := c.drawP(cs)
	c.mu -= c.eta * (-log2f(cs[i].p) - c.tau)
	return cs[i].id, nil
}

// mirostatV2 implements Mirostat 2 as llama.cpp does: keep the tokens whose
// surprise -log2(p) is at most mu (at least the most likely one), draw from
// their renormalized softmax, and move mu towards tau.
func (c *Chain) mirostatV2(logits []float32) (int32, error) {
	cs := c.gather(logits, c.temp)
	if len(cs) == 0 {
		return -1, ErrNoCandidates
	}
	softmax(cs, false)
	// Exact test -log2(p) <= mu, after a cheap bound that rejects most
	// of the vocabulary without a logarithm.
	bound := float32(math.Exp2(-float64(c.mu))) * (1 - 1e-5)
	n := 0
	for i := range cs {
		if cs[i].p >= bound && !(-log2f(cs[i].p) > c.mu) {
			cs[n] = cs[i]
			n++
		}
	}
	if n == 0 {
		// Nothing is that unsurprising: keep the most likely token alone.
		// (Nothing was moved, so cs is still the full candidate set.)
		best := 0
		for i := range cs {
			if candLess(&cs[i], &cs[best]) {
				best = i
			}
		}
		cs[0] = cs[best]
		n = 1
	}
	cs = cs[:n]
	sortCands(cs)
	softmax(cs, true)
	i := c.drawP(cs)
	c.mu -= c.eta * (-log2f(cs[i].p) - c.tau)
	return cs[i].id, nil
}

// drawP samples an index of cs from its normalized probabilities p as
// std::discrete_distribution does in llama.cpp's Mirostat: float64
// cumulative sums of p/Σp with the last set to 1, and the first index whose
// sum is at least u. Fewer than two candidates take no random number.
func (c *Chain) drawP(cs []cand) int {
	if len(cs) < 2 {
		return 0
	}
	sum := 0.0
	for i := range cs {
		sum += float64(cs[i].p)
	}
	u := c.rng.canonical()
	cum := 0.0
	for i := 0; i < len(cs)-1; i++ {
		cum += float64(cs[i].p) / sum
		if cum >= u {
			return i
		}
	}
	return len(cs) - 1
}
