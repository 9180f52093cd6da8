package tokenizer

import "strings"

// symbol is a run of bytes [start, start+n) of the text being merged, linked
// to its live neighbours. n == 0 marks a symbol merged into its left
// neighbour.
type symbol struct {
	start, n   int32
	prev, next int32
	id         int32 // BPE: the token the symbol spells, or null
}

// candidate is a possible merge of two adjacent symbols. Higher priority
// first: SPM uses the merged token's score, BPE the merge rank (negated);
// ties go to the leftmost pair, as in the reference.
type candidate struct {
	left, right int32
	size        int32
	prio        float32
	id          int32
}

// charSymbols appends to syms (empty) one symbol per UTF-8 character of
// text[from:to] (a character cut short by to counts as one), linked in
// order.
func charSymbols(syms []symbol, text []byte, from, to int) []symbol {
	for off := from; off < to; {
		n := min(utf8Len(text[off]), to-off)
		i := int32(len(syms))
		next := i + 1
		if off+n == to {
			next = -1
		}
		syms = append(syms, symbol{start: int32(off), n: int32(n), prev: i - 1, next: next})
		off += n
	}
	return syms
}

// join merges the right symbol of c into its left one; false when c is
// stale (either side has been merged since c was queued).
func join(syms []symbol, c candidate) bool {
	l, r := &syms[c.left], &syms[c.right]
	if l.n == 0 || r.n == 0 || l.n+r.n != c.size {
		return false
	}
	l.n += r.n
	r.n = 0
	l.next = r.next
	if r.next >= 0 {
		syms[r.next].prev = c.left
	}
	return true
}

// mergeQueue is a binary max-heap of candidates; merging stays
// O(n log n) however long the word.
type mergeQueue []candidate

func (q mergeQueue) less(i, j int) bool { // i before j
	if q[i].prio != q[j].prio {
		return q[i].prio > q[j].prio
	}
	return q[i].left < q[j].left
}

// siftSteps, when set (by tests), counts the heap's sift steps: the merge
// loop's work, which must grow as n log n with the length of a word.
var siftSteps *int

func (q *mergeQueue) push(c candidate) {
	*q = append(*q, c)
	h := *q
	i := len(h) - 1
	for i > 0 {
		if siftSteps != nil {
			*siftSteps++
		}
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *mergeQueue) pop() candidate {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		if siftSteps != nil {
			*siftSteps++
		}
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// spmScratch holds the buffers of one SPM encoding.
type spmScratch struct {
	text  []byte
	syms  []symbol
	q     mergeQueue
	cache wordCache
}

// wordCache remembers the ids of words already merged during one Encode
// call: natural text repeats its words, and merging dominates the cost.
type wordCache struct {
	m     map[string]span // word -> ids[s:e]
	ids   []int32
	limit int // words longer than this are not cached
}

// enable turns the cache on for inputs long enough to pay for it.
func (c *wordCache) enable(textLen int) {
	if textLen >= 4096 && c.m == nil {
		c.m = make(map[string]span, 1024)
		c.limit = 64
	}
}

func (c *wordCache) get(out []int32, w []byte) ([]int32, bool) {
	if c.m == nil || len(w) > c.limit {
		return out, false
	}
	sp, ok := c.m[string(w)]
	if !ok {
		return out, false
	}
	return append(out, c.ids[sp.s:sp.e]...), true
}

func (c *wordCache) put(w []byte, ids []int32) {
	if c.m == nil || len(w) > c.limit || len(c.m) >= 1<<16 {
		return
	}
	s := int32(len(c.ids))
	c.ids = append(c.ids, ids...)
	c.m[string(w)] = span{s, int32(len(c.ids))}
}

func (t *Tokenizer) encodeSPM(out []int32, text string, frags []fragment) []int32 {
	var sc spmScratch
	sc.cache.enable(len(text))
	prevSpecial := true
	for _, fr := range frags {
		if fr.tok != null {
			out = append(out, fr.tok)
			prevSpecial = true
			continue
		}
		sc.text = sc.text[:0]
		if t.addSpacePrefix && prevSpecial {
			sc.text = append(sc.text, "\u2581"...)
		}
		s := text[fr.s:fr.e]
		for {
			k := strings.IndexByte(s, ' ')
			if k < 0 {
				sc.text = append(sc.text, s...)
				break
			}
			sc.text = append(sc.text, s[:k]...)
			sc.text = append(sc.text, "\u2581"...)
			s = s[k+1:]
		}
		out = t.spm(out, &sc)
		prevSpecial = false
	}
	return out
}

// spm tokenizes the escaped text in sc.text. The reference merges over the
// whole text at once; when the vocabulary allows (spmSplit: no token has a
// "▁" preceded by anything but "▁"), no merge can cross the start of a word
// ("▁" after a non-"▁" symbol), so each word is merged on its own with the
// same result and a small, cache-resident queue.
func (t *Tokenizer) spm(out []int32, sc *spmScratch) []int32 {
	text := sc.text
	const space = "\u2581"
	seg := 0
	prevSpace := false
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		isSpace := n == 3 && string(text[off:off+3]) == space
		if t.spmSplit && isSpace && !prevSpace && off > seg {
			out = t.spmSegment(out, sc, seg, off)
			seg = off
		}
		prevSpace = isSpace
		off += n
	}
	return t.spmSegment(out, sc, seg, len(text))
}

// spmSegment merges the highest-scoring adjacent pair that is a token until
// none is left, then emits each symbol's token or its bytes.
func (t *Tokenizer) spmSegment(out []int32, sc *spmScratch, from, to int) []int32 {
	text := sc.text[:to]
	if o, ok := sc.cache.get(out, text[from:to]); ok {
		return o
	}
	mark := len(out)
	defer func() { sc.cache.put(text[from:to], out[mark:]) }()
	syms := charSymbols(sc.syms[:0], text, from, to)
	sc.syms = syms
	q := sc.q[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a := syms[l]
		b := syms[r]
		s := text[a.start : b.start+b.n]
		id, ok := t.ids[string(s)]
		if !ok {
			return
		}
		q.push(candidate{left: l, right: r, size: int32(len(s)), prio: t.scores[id], id: id})
	}
	for i := 1; i < len(syms); i++ {
		try(int32(i-1), int32(i))
	}
	for len(q) > 0 {
		c := q.pop()
		if !join(syms, c) {
			continue
		}
		l := &syms[c.left]
		try(l.prev, c.left)
		try(c.left, l.next)
	}
	sc.q = q
	if len(syms) == 0 {
		return out
	}
	for i := int32(0); i != -1; i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[string(s)]; ok {
			out = append(out, id)
			continue
		}
		for _, b := range s {
			if id := t.byteToken(b); id != null {
				out = append(out, id)
			}
		}
	}
	return out
}

// spmSplittable reports whether every "▁" inside a token (not at its
// start) follows only "▁"s, so that merges never cross a word start.
func spmSplittable(tokens []string) bool {
	const space = "\u2581"
	for _, w := range tokens {
		for k := strings.Index(w, space); k >= 0; {
			if strings.Trim(w[:k], space) != "" {
				return false
			}
			next := strings.Index(w[k+len(space):], space)
			if next < 0 {
				break
			}
			k += len(space) + next
		}
	}
	return true
}

// byteToken is the SPM byte-fallback token of b: "<0xXX>", else the byte as
// a one-byte token, else UNK.
func (t *Tokenizer) byteToken(b byte) int32 {
	const hex = "0123456789ABCDEF"
	buf := [6]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'}
	if id, ok := t.ids[string(buf[:])]; ok {
		return id
	}
	if id, ok := t.ids[string([]byte{b})]; ok {
		return id
	}
	return t.unk
}
