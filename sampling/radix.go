package sampling

import "math"

// sortKey maps a candidate to a uint64 whose unsigned order is the
// candidate order: the float32 key's bits made monotone in the high half,
// the id in the low half.
func sortKey(c *cand) uint64 {
	b := math.Float32bits(c.key)
	if b == 1<<31 {
		b = 0 // -0 == +0, as the float comparison of candLess has it
	}
	if b&(1<<31) != 0 {
		b = ^b // negative: larger magnitude sorts first
	} else {
		b |= 1 << 31
	}
	return uint64(b)<<32 | uint64(uint32(c.id))
}

// radixSortCands sorts cs by (key, id) in place with a most-significant-
// byte-first radix sort (American flag sort): no scratch memory, and about
// three times faster than comparison sorting on 10^5 candidates. shift is
// the bit offset of the byte to split on (56 at the top level).
func radixSortCands(cs []cand, shift uint) {
	for {
		if len(cs) <= 48 {
			insertionSortCands(cs)
			return
		}
		if len(cs) <= radixMin {
			quicksortCands(cs, 2*bitsLen(len(cs)))
			return
		}
		var count [256]int
		for i := range cs {
			count[byte(sortKey(&cs[i])>>shift)]++
		}
		// All in one bucket (common for the high bytes): go straight to
		// the next byte.
		if count[byte(sortKey(&cs[0])>>shift)] == len(cs) {
			if shift == 0 {
				return
			}
			shift -= 8
			continue
		}
		var next, end [256]int
		sum := 0
		for b := range count {
			next[b] = sum
			sum += count[b]
			end[b] = sum
		}
		// Cycle every element into its bucket.
		for b := range count {
			for next[b] < end[b] {
				d := byte(sortKey(&cs[next[b]]) >> shift)
				if int(d) == b {
					next[b]++
					continue
				}
				cs[next[b]], cs[next[d]] = cs[next[d]], cs[next[b]]
				next[d]++
			}
		}
		if shift == 0 {
			return
		}
		start := 0
		for b := range count {
			if count[b] > 1 {
				radixSortCands(cs[start:start+count[b]], shift-8)
			}
			start += count[b]
		}
		return
	}
}

func insertionSortCands(cs []cand) {
	for i := 1; i < len(cs); i++ {
		for k := i; k > 0 && candLess(&cs[k], &cs[k-1]); k-- {
			cs[k], cs[k-1] = cs[k-1], cs[k]
		}
	}
}
