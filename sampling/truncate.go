package sampling

import "math"

// The truncation samplers below follow llama.cpp's llama-sampling.cpp
// (tail-free from the version that still had it): each takes the current
// candidates and whether they are sorted by descending logit, and returns
// the survivors and whether those are so sorted. Probabilities are float32
// with float32 running sums, as there, so survivor sets agree at the
// boundaries. Unlike llama.cpp, -Inf candidates never enter the list (they
// have probability 0 and can never be drawn), and no sampler returns an
// empty list.

func exp32(x float32) float32 { return float32(expNonPos(float64(x))) }

// expDiff returns e^(l-maxL), the unnormalized probability of a candidate
// with logit l. Candidates are never NaN, so l-maxL is NaN only for
// +Inf - +Inf: a broken model's +Inf logits then share all the mass
// instead of turning every probability into NaN.
func expDiff(l, maxL float32) float32 {
	d := l - maxL
	if d != d {
		return 1
	}
	return exp32(d)
}
func log32(x float32) float32    { return float32(math.Log(float64(x))) }
func log2f(x float32) float32    { return float32(math.Log2(float64(x))) }
func pow32(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }
func abs32(x float32) float32    { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// softmax sets p to the softmax of the logits of cs.
func softmax(cs []cand, sorted bool) {
	maxL := cs[0].logit
	if !sorted {
		for i := 1; i < len(cs); i++ {
			maxL = max(maxL, cs[i].logit)
		}
	}
	var sum float32
	for i := range cs {
		p := expDiff(cs[i].logit, maxL)
		cs[i].p = p
		sum += p
	}
	for i := range cs {
		cs[i].p /= sum
	}
}

// sortByLogit sorts cs by descending logit (ties by id) unless it already is.
func sortByLogit(cs []cand, sorted bool) {
	if !sorted {
		keyByLogit(cs)
		sortCands(cs)
	}
}

// tailFree is tail-free sampling (Phillips 2019): on the sorted
// probabilities, the absolute second differences normalized to sum 1 are
// accumulated and the tail is cut where the sum first exceeds z (at an index
// of at least minKeep). z >= 1 or fewer than 3 candidates: no-op. It needs
// all candidates sorted, so without top_k it sorts the whole vocabulary.
func tailFree(cs []cand, sorted bool, z float32, minKeep int) ([]cand, bool) {
	if z >= 1 || len(cs) <= 2 {
		return cs, sorted
	}
	sortByLogit(cs, sorted)
	softmax(cs, true)
	n2 := len(cs) - 2 // number of second differences
	second := func(i int) float32 {
		d0 := cs[i].p - cs[i+1].p
		d1 := cs[i+1].p - cs[i+2].p
		return abs32(d0 - d1)
	}
	var sum float32
	for i := 0; i < n2; i++ {
		sum += second(i)
	}
	last := len(cs)
	var cum float32
	for i := 0; i < n2; i++ {
		if sum > 1e-6 {
			cum += second(i) / sum
		} else {
			cum += 1 / float32(n2)
		}
		if cum > z && i >= minKeep {
			last = i
			break
		}
	}
	return cs[:max(last, 1)], true
}

// typical is locally typical sampling (Meister et al. 2022): rank tokens by
// how close their surprise -ln p is to the entropy of the distribution and
// keep the closest ones until their mass exceeds typ (and at least minKeep
// are kept). typ >= 1: no-op. The result is in typicality order, not sorted
// by logit. Like llama.cpp, it sorts all candidates by logit first, so
// without top_k it sorts the whole vocabulary.
func typical(cs []cand, sorted bool, typ float32, minKeep int) ([]cand, bool) {
	if typ >= 1 {
		return cs, sorted
	}
	// llama.cpp sorts before its softmax here, and the float32 sums (and so
	// the cut) depend on that order.
	sortByLogit(cs, sorted)
	softmax(cs, true)
	var entropy float32
	for i := range cs {
		if p := cs[i].p; p > 0 { // 0·ln 0 = 0, not NaN
			entropy += -p * log32(p)
		}
	}
	for i := range cs {
		cs[i].key = abs32(-log32(cs[i].p) - entropy)
	}
	last := prefixByKey(cs, false, func(i int, cum float32) bool {
		return cum > typ && (minKeep == 0 || i >= minKeep-1)
	})
	return cs[:last], false
}

// topP keeps the smallest prefix of the most likely tokens whose mass
// reaches p, and at least minKeep tokens. p >= 1: no-op.
func topP(cs []cand, sorted bool, p float32, minKeep int) ([]cand, bool) {
	if p >= 1 {
		return cs, sorted
	}
	softmax(cs, sorted)
	if !sorted {
		keyByLogit(cs)
	}
	last := prefixByKey(cs, sorted, func(i int, cum float32) bool {
		return cum >= p && i+1 >= minKeep
	})
	return cs[:last], true
}

// prefixByKey accumulates p in ascending key order and returns n = i+1 for
// the first i where stop(i, cum) holds, or len(cs); cs[:n] then holds the
// first n candidates in key order, sorted (the order llama.cpp's full sort
// would give). stop must be monotone: once true, true for every larger i
// and cum. If cs is already sorted by key it just walks it. It sorts no
// more of cs than the prefix, roughly: small lists grow a sorted head by
// doubling, large ones are bucketed by key first.
func prefixByKey(cs []cand, sorted bool, stop func(i int, cum float32) bool) int {
	if sorted {
		var cum float32
		for i := range cs {
			cum += cs[i].p
			if stop(i, cum) {
				return i + 1
			}
		}
		return len(cs)
	}
	done := 0 // cs[:done] sorted, and ranks below everything in cs[done:]
	next := min(256, len(cs))
	if len(cs) >= bucketMin {
		if n, ok := prefixByBuckets(cs, stop); ok {
			// Buckets found the prefix with bucket-wise sums; sort it and
			// walk it again below with the token-by-token running sum
			// llama.cpp uses, which decides the exact cut.
			sortCands(cs[:n])
			done, next = n, min(2*n, len(cs))
		}
	}
	var cum float32
	for i := 0; i < len(cs); i++ {
		if i == done {
			selectFirst(cs[done:], next-done)
			done = next
			next = min(2*next, len(cs))
		}
		cum += cs[i].p
		if stop(i, cum) {
			return i + 1
		}
	}
	return len(cs)
}

const (
	bucketMin = 4096 // lists shorter than this use the sorted head
	nBuckets  = 1024
)

// prefixByBuckets is prefixByKey for long lists: one pass sums p per key
// bucket, whole buckets are taken while stop stays false, and only the
// bucket where it turns true is sorted and walked token by token. ok is
// false when the keys span no range to bucket.
func prefixByBuckets(cs []cand, stop func(i int, cum float32) bool) (n int, ok bool) {
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for i := range cs {
		if k := cs[i].key; k >= -math.MaxFloat32 && k <= math.MaxFloat32 { // finite
			lo, hi = min(lo, k), max(hi, k)
		}
	}
	span := hi - lo
	scale := float32(nBuckets) / span
	if !(span > 0) || span > math.MaxFloat32 || scale > math.MaxFloat32 {
		return 0, false // nothing to bucket, or a range float32 cannot scale
	}
	bucket := func(k float32) int {
		switch {
		case k <= lo: // also -Inf
			return 0
		case !(k < hi): // also +Inf and NaN
			return nBuckets - 1
		}
		return min(int((k-lo)*scale), nBuckets-1)
	}
	var count [nBuckets]int32
	var mass [nBuckets]float32
	for i := range cs {
		b := bucket(cs[i].key)
		count[b]++
		mass[b] += cs[i].p
	}
	taken := 0  // candidates in the buckets taken so far
	placed := 0 // cs[:placed] holds taken candidates; the rest are scattered
	var cum float32
	for b := 0; b < nBuckets; b++ {
		if count[b] == 0 {
			continue
		}
		end := taken + int(count[b])
		if !stop(end-1, cum+mass[b]) {
			// Take the whole bucket where it lies.
			cum += mass[b]
			taken = end
			continue
		}
		// Move the scattered taken candidates (buckets below b), then
		// bucket b, to the front; sort bucket b and walk it.
		w := placeBuckets(cs, placed, func(x int) bool { return x < b }, bucket)
		w2 := placeBuckets(cs, w, func(x int) bool { return x == b }, bucket)
		sortCands(cs[w:w2])
		for j := w; j < w2; j++ {
			cum += cs[j].p
			if stop(j, cum) {
				return j + 1, true
			}
		}
		// Rounding: the token-by-token sum fell short of the bucket's.
		taken, placed = w2, w2
	}
	return len(cs), true
}

// placeBuckets moves the candidates of cs[from:] whose bucket satisfies in
// to cs[from:w] and returns w.
func placeBuckets(cs []cand, from int, in func(int) bool, bucket func(float32) int) int {
	w := from
	for j := from; j < len(cs); j++ {
		if in(bucket(cs[j].key)) {
			cs[w], cs[j] = cs[j], cs[w]
			w++
		}
	}
	return w
}

// minP keeps the tokens whose probability is at least p times the largest,
// that is whose logit is at least max + ln p, and at least minKeep tokens.
// p <= 0: no-op.
func minP(cs []cand, sorted bool, p float32, minKeep int) ([]cand, bool) {
	if p <= 0 {
		return cs, sorted
	}
	maxL := cs[0].logit
	if !sorted {
		for i := 1; i < len(cs); i++ {
			maxL = max(maxL, cs[i].logit)
		}
	}
	minLogit := maxL + log32(p)
	kept := 0
	for i := range cs {
		if cs[i].logit >= minLogit {
			kept++
		}
	}
	if kept >= minKeep {
		if sorted {
			return cs[:kept], true // the kept ones are a prefix
		}
		n := 0
		for i := range cs {
			if cs[i].logit >= minLogit {
				cs[n] = cs[i]
				n++
			}
		}
		return cs[:n], false
	}
	// Too few pass: keep the minKeep most likely, sorted as llama.cpp's
	// fallback sorts them (even when that is every candidate).
	keep := min(minKeep, len(cs))
	if !sorted {
		keyByLogit(cs)
		selectFirst(cs, keep)
	}
	return cs[:keep], true
}
