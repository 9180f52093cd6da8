package grammar

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Sample returns a random sentence of g written with v's tokens: uniformly
// random allowed tokens for up to maxRandom steps (a random number of
// them), then the tokens that bring the end closest, then v's first
// end-of-generation token. Tests use it to check that what a grammar
// allows is what a parser reads.
func Sample(g *Grammar, v *Vocab, rng *rand.Rand, maxRandom int) (string, error) {
	ml := minLens(g)
	m := NewMatcher(g, v)
	var out []byte
	budget := 0
	if maxRandom > 0 {
		budget = rng.IntN(maxRandom)
	}
	eog := int32(-1)
	for id := range int32(v.Size()) {
		if v.IsEOG(id) {
			eog = id
			break
		}
	}
	var allowed []int32
	for step := 0; step < 3000+maxRandom; step++ {
		var err error
		allowed, err = m.Allowed(allowed[:0])
		if err != nil || len(allowed) == 0 {
			return "", fmt.Errorf("grammar: Sample: %d tokens allowed after %q (%v)", len(allowed), out, err)
		}
		var id int32
		switch {
		case step < budget:
			id = allowed[rng.IntN(len(allowed))]
		case m.IsComplete() && eog >= 0:
			id = eog
		default:
			best := math.MaxInt
			var ties []int32
			for _, a := range allowed {
				if v.IsEOG(a) {
					continue
				}
				s := m.cur
				for _, b := range v.Token(a) {
					s = m.step(s, b)
				}
				d := distance(m, ml, s)
				if d < best {
					best, ties = d, ties[:0]
				}
				if d == best {
					ties = append(ties, a)
				}
			}
			if len(ties) == 0 {
				return "", fmt.Errorf("grammar: Sample: no way on after %q", out)
			}
			id = ties[rng.IntN(len(ties))]
		}
		if err := m.Accept(id); err != nil {
			return "", fmt.Errorf("grammar: Sample: Accept(%d %q) after %q: %v", id, v.Token(id), out, err)
		}
		if v.IsEOG(id) {
			return string(out), nil
		}
		out = append(out, v.Token(id)...)
	}
	return "", fmt.Errorf("grammar: Sample: generation did not finish: %q", out)
}

// minLens returns, for each rule, the length in characters of its shortest
// sentence.
func minLens(g *Grammar) []int {
	const inf = math.MaxInt / 4
	ml := make([]int, len(g.rules))
	for i := range ml {
		ml[i] = inf
	}
	for changed := true; changed; {
		changed = false
		for i, r := range g.rules {
			for _, a := range r.alts {
				if n := restLen(g, ml, a); n < ml[i] {
					ml[i] = n
					changed = true
				}
			}
		}
	}
	return ml
}

// restLen returns the shortest length of the rest of an alternative from pos.
func restLen(g *Grammar, ml []int, pos int32) int {
	n := 0
	for ; g.elems[pos].kind != elemEnd; pos++ {
		if g.elems[pos].kind == elemChar {
			n++
		} else {
			n += ml[g.elems[pos].id]
		}
		if n > math.MaxInt/8 {
			return n
		}
	}
	return n
}

// distance returns the fewest characters that complete the grammar from
// matcher state s.
func distance(m *Matcher, ml []int, s int32) int {
	st := m.states[s]
	sp := m.sets[st.set]
	best := math.MaxInt
	for _, sid := range m.setData[sp.start:sp.end] {
		d := 0
		for n := sid; n >= 0; n = m.nodes[n].parent {
			d += restLen(m.g, ml, m.nodes[n].pos)
		}
		best = min(best, d)
	}
	return best
}
