package sampling

import (
	"math"
	"slices"
)

// cand is one candidate token. key orders candidates (ascending, ties by
// ascending id): -logit for "most likely first", the shifted score for
// typical sampling.
type cand struct {
	id    int32
	logit float32
	p     float32
	key   float32
}

func candLess(a, b *cand) bool {
	return a.key < b.key || (a.key == b.key && a.id < b.id)
}

func candCmp(a, b cand) int {
	switch {
	case a.key < b.key:
		return -1
	case a.key > b.key:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// sortCands sorts by key, ties by id: a total order, so the result does not
// depend on the input order. Long lists take an in-place radix sort (about
// twice as fast as quicksort on 10^5 candidates); shorter ones a quicksort
// with the comparison inlined (about a third faster than slices.SortFunc),
// which falls back to slices.SortFunc past a depth limit so the worst case
// stays O(n log n).
func sortCands(cs []cand) {
	if len(cs) > radixMin {
		radixSortCands(cs, 56)
		return
	}
	quicksortCands(cs, 2*bitsLen(len(cs)))
}

const radixMin = 1024

func quicksortCands(cs []cand, depth int) {
	for len(cs) > 12 {
		if depth == 0 {
			slices.SortFunc(cs, candCmp)
			return
		}
		depth--
		j := partitionCands(cs)
		// Recurse into the smaller side, loop on the larger.
		if j < len(cs)-j {
			quicksortCands(cs[:j], depth)
			cs = cs[j+1:]
		} else {
			quicksortCands(cs[j+1:], depth)
			cs = cs[:j]
		}
	}
	for i := 1; i < len(cs); i++ {
		for k := i; k > 0 && candLess(&cs[k], &cs[k-1]); k-- {
			cs[k], cs[k-1] = cs[k-1], cs[k]
		}
	}
}

// partitionCands moves a median-of-three pivot to its final index j and
// returns j: cs[:j] rank below it and cs[j+1:] above.
func partitionCands(cs []cand) int {
	mid := len(cs) / 2
	a, b, c := 0, mid, len(cs)-1
	if candLess(&cs[b], &cs[a]) {
		a, b = b, a
	}
	if candLess(&cs[c], &cs[b]) {
		b = c
		if candLess(&cs[b], &cs[a]) {
			b = a
		}
	}
	cs[0], cs[b] = cs[b], cs[0]
	pivot := cs[0]
	i, j := 1, len(cs)-1
	for {
		for i <= j && candLess(&cs[i], &pivot) {
			i++
		}
		for i <= j && candLess(&pivot, &cs[j]) {
			j--
		}
		if i >= j {
			break
		}
		cs[i], cs[j] = cs[j], cs[i]
		i++
		j--
	}
	cs[0], cs[j] = cs[j], cs[0]
	return j
}

// keyByLogit sets key = -logit so that ascending key is descending logit.
func keyByLogit(cs []cand) {
	for i := range cs {
		cs[i].key = -cs[i].logit
	}
}

// selectFirst rearranges cs so that cs[:n] holds the n smallest candidates
// by key in sorted order, and cs[n:] the rest in any order. It runs in
// expected O(len(cs) + n log n) and never sorts all of cs unless n does.
func selectFirst(cs []cand, n int) {
	if n <= 0 {
		return
	}
	switch {
	case n >= len(cs):
	case n <= len(cs)/8:
		heapSelect(cs, n)
	default:
		quickselect(cs, n)
	}
	sortCands(cs[:n])
}

// heapSelect moves the n smallest candidates into cs[:n] (unordered),
// keeping a heap of them there with the worst at the root: one comparison
// per later candidate, and heap work only for the few that beat the root.
func heapSelect(cs []cand, n int) {
	h := cs[:n]
	for i := n/2 - 1; i >= 0; i-- {
		siftDown(h, i, heapWorse)
	}
	for i := n; i < len(cs); i++ {
		if candLess(&cs[i], &h[0]) {
			h[0], cs[i] = cs[i], h[0]
			siftDown(h, 0, heapWorse)
		}
	}
}

// quickselect partitions cs so that cs[:n] are the n smallest by key
// (unordered). Median-of-three pivots with a depth limit; past the limit it
// falls back to sorting the remaining range.
func quickselect(cs []cand, n int) {
	lo, hi := 0, len(cs) // the n-th smallest lies in cs[lo:hi]
	depth := 2 * bitsLen(len(cs))
	for hi-lo > 16 {
		if depth == 0 {
			sortCands(cs[lo:hi])
			return
		}
		depth--
		j := lo + partitionCands(cs[lo:hi])
		switch {
		case j == n || j == n-1:
			return
		case j > n:
			hi = j
		default:
			lo = j + 1
		}
	}
	sortCands(cs[lo:hi])
}

func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

// topKFromLogits writes the k most likely tokens of logits to dst (which
// must have capacity k), sorted by descending logit with ties by ascending
// id, and returns it. -Inf and NaN logits are never candidates. It keeps a
// min-heap of k entries in one pass, so a vocabulary of V costs O(V) plus
// O(k log k log(V/k)) expected heap work.
func topKFromLogits(logits []float32, k int, dst []cand) []cand {
	h := dst[:0]
	i := 0
	// Fill the heap with the first k finite logits.
	for ; i < len(logits) && len(h) < k; i++ {
		l := logits[i]
		if l != l || l < -math.MaxFloat32 {
			continue
		}
		h = append(h, cand{id: int32(i), logit: l, key: -l})
		siftUp(h, len(h)-1, heapWorse)
	}
	if len(h) == k {
		// The root is the worst kept candidate. Later ids lose ties, so a
		// logit must beat the root strictly; NaN fails the test by itself.
		root := h[0].logit
		for ; i < len(logits); i++ {
			l := logits[i]
			if !(l > root) {
				continue
			}
			h[0] = cand{id: int32(i), logit: l, key: -l}
			siftDown(h, 0, heapWorse)
			root = h[0].logit
		}
	}
	sortCands(h)
	return h
}

// The heap keeps the worst candidate (largest key, ties largest id) at the
// root.
func heapWorse(a, b *cand) bool { return candLess(b, a) }
