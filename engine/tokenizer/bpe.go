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

func (t *Tokenizer) encodeBPE(out []int32, text string, frags []fragment) []int32 {
	var sc bpeScratch
	sc.cache.enable(len(text))
	for _, fr := range frags {
		if fr.tok != null {
			out = append(out, fr.tok)
			continue
		}
		out = t.bpeText(out, text[fr.s:fr.e], &sc)
	}
	return out
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
	syms := charSymbols(sc.syms[:0], word, 0, len(word))
	for i := range syms {
		syms[i].id = t.lookup(word[syms[i].start : syms[i].start+syms[i].n])
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
		if !join(syms, c) {
			continue
		}
		l := &syms[c.left]
		l.id = t.lookup(word[l.start : l.start+l.n])
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

// lookup returns the id of the token spelled by s, or null.
func (t *Tokenizer) lookup(s []byte) int32 {
	if id, ok := t.ids[string(s)]; ok {
		return id
	}
	return null
}
