package tokenizer

// bpeScratch holds the buffers of one BPE encoding.
type bpeScratch struct {
	cps       []rune
	words     []span
	tmp       []span
	word      []byte // the byte-level encoded word
	syms      []symbol
	q         mergeQueue
	charBytes []byte
	cache     wordCache
}

func (t *Tokenizer) encodeBPE(out []int32, text string, frags []fragment, addSpecial bool) ([]int32, error) {
	if addSpecial && t.addBOS {
		if err := t.need(t.bos, "BOS"); err != nil {
			return nil, err
		}
		out = append(out, t.bos)
	}
	var sc bpeScratch
	sc.cache.enable(len(text))
	for _, fr := range frags {
		if fr.tok != null {
			out = append(out, fr.tok)
			continue
		}
		out = t.bpeText(out, text[fr.s:fr.e], &sc)
	}
	if addSpecial && t.addEOS {
		if err := t.need(t.eos, "EOS"); err != nil {
			return nil, err
		}
		out = append(out, t.eos)
	}
	return out, nil
}

// bpeText pre-tokenizes s into words and merges each word.
func (t *Tokenizer) bpeText(out []int32, s string, sc *bpeScratch) []int32 {
	cps := sc.cps[:0]
	for i := 0; i < len(s); {
		r, n := decodeRune(s, i)
		cps = append(cps, r)
		i += n
	}
	sc.cps = cps
	sc.words = t.pre.split(cps, sc.words, sc.tmp)
	for _, w := range sc.words {
		// Re-encode the word's code points (invalid input is U+FFFD by now)
		// and map every byte to its printable stand-in.
		word := sc.word[:0]
		raw := sc.charBytes[:0]
		for _, r := range cps[w.s:w.e] {
			raw = appendRune(raw, r)
		}
		for _, b := range raw {
			word = t.bu.appendByte(word, b)
		}
		sc.word, sc.charBytes = word, raw
		if o, ok := sc.cache.get(out, word); ok {
			out = o
			continue
		}
		mark := len(out)
		out = t.bpeWord(out, word, sc)
		sc.cache.put(word, out[mark:])
	}
	return out
}

func (t *Tokenizer) bpeWord(out []int32, word []byte, sc *bpeScratch) []int32 {
	if t.pre.ignoreMerges {
		if id, ok := t.ids[string(word)]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	for off := 0; off < len(word); {
		n := min(utf8Len(word[off]), len(word)-off)
		i := int32(len(syms))
		next := i + 1
		if off+n == len(word) {
			next = -1
		}
		id, ok := t.ids[string(word[off:off+n])]
		if !ok {
			id = null
		}
		syms = append(syms, symbol{start: int32(off), n: int32(n), prev: i - 1, next: next, id: id})
		off += n
	}
	q := sc.q[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := syms[l], syms[r]
		if a.id == null || b.id == null {
			return
		}
		rank, ok := t.merges[pairKey(a.id, b.id)]
		if !ok {
			return
		}
		q.push(candidate{left: l, right: r, size: a.n + b.n, prio: -float32(rank)})
	}
	for i := 1; i < len(syms); i++ {
		try(int32(i-1), int32(i))
	}
	for len(q) > 0 {
		c := q.pop()
		l, r := &syms[c.left], &syms[c.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != c.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		if id, ok := t.ids[string(word[l.start:l.start+l.n])]; ok {
			l.id = id
		} else {
			l.id = null
		}
		try(l.prev, c.left)
		try(c.left, l.next)
	}
	sc.syms, sc.q = syms, q
	for i := int32(0); len(syms) > 0 && i != -1; i = syms[i].next {
		sy := syms[i]
		if sy.id != null {
			out = append(out, sy.id)
			continue
		}
		for _, b := range word[sy.start : sy.start+sy.n] {
			if id, ok := t.ids[string([]byte{b})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}
