package grammar

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// This file holds a deliberately naive recognizer used as the reference in
// tests: stacks are plain slices copied on every step, nothing is shared,
// interned or memoized, and partial UTF-8 characters are settled by trying
// every possible completion. It reads only the flattened grammar.

type refStack []int32

// refStart returns the stacks at the start of g.
func refStart(g *Grammar) []refStack {
	var out []refStack
	seen := map[string]bool{}
	for _, a := range g.rules[g.root].alts {
		refContinue(g, nil, a, &out, seen)
	}
	return out
}

// refContinue adds to out every stack reachable from pos with rest below
// it. seen holds the references already expanded in this step (position
// and whole stack), which ends the expansion of rules that reach
// themselves through references in tail position, as star ::= x star | ε
// does when x can be empty; such a reference pushes nothing.
func refContinue(g *Grammar, rest refStack, pos int32, out *[]refStack, seen map[string]bool) {
	switch e := g.elems[pos]; e.kind {
	case elemChar:
		s := append(slices.Clone(rest), pos)
		for _, o := range *out {
			if slices.Equal(o, s) {
				return
			}
		}
		*out = append(*out, s)
	case elemEnd:
		if len(rest) == 0 {
			for _, o := range *out {
				if len(o) == 0 {
					return
				}
			}
			*out = append(*out, refStack{})
			return
		}
		refContinue(g, rest[:len(rest)-1], rest[len(rest)-1], out, seen)
	case elemRef:
		key := fmt.Sprint(pos, rest)
		if seen[key] {
			return
		}
		seen[key] = true
		ret := append(slices.Clone(rest), pos+1)
		if g.elems[pos+1].kind == elemEnd {
			ret = rest
		}
		for _, a := range g.rules[e.id].alts {
			refContinue(g, ret, a, out, seen)
		}
	}
}

func refClassMatch(c *charClass, r rune) bool {
	for _, rr := range c.ranges {
		if rr.lo <= r && r <= rr.hi {
			return true
		}
	}
	return false
}

func refAdvance(g *Grammar, stacks []refStack, r rune) []refStack {
	var out []refStack
	seen := map[string]bool{}
	for _, s := range stacks {
		if len(s) == 0 {
			continue
		}
		top := s[len(s)-1]
		if refClassMatch(&g.classes[g.elems[top].id], r) {
			refContinue(g, s[:len(s)-1], top+1, &out, seen)
		}
	}
	return out
}

// refFeed feeds the complete characters of b and returns the stacks and the
// trailing incomplete bytes; ok is false for invalid UTF-8 or a dead parse.
func refFeed(g *Grammar, b []byte) (stacks []refStack, tail []byte, ok bool) {
	return refFeedFrom(g, refStart(g), b)
}

// refFeedFrom is refFeed starting from the given stacks.
func refFeedFrom(g *Grammar, stacks []refStack, b []byte) ([]refStack, []byte, bool) {
	for len(b) > 0 {
		if !utf8.FullRune(b) {
			return stacks, b, true
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			return nil, nil, false
		}
		stacks = refAdvance(g, stacks, r)
		if len(stacks) == 0 {
			return nil, nil, false
		}
		b = b[size:]
	}
	return stacks, nil, true
}

// refMatch reports whether b is a whole sentence of g.
func refMatch(g *Grammar, b []byte) bool {
	stacks, tail, ok := refFeed(g, b)
	if !ok || len(tail) > 0 {
		return false
	}
	for _, s := range stacks {
		if len(s) == 0 {
			return true
		}
	}
	return false
}

// refViable reports whether b is a prefix of some sentence of g: its
// complete characters parse, and a trailing partial character has some
// valid completion the grammar accepts.
func refViable(g *Grammar, b []byte) bool {
	return refViableFrom(g, refStart(g), b)
}

// refViableFrom is refViable for bytes that follow the given stacks.
func refViableFrom(g *Grammar, stacks []refStack, b []byte) bool {
	stacks, tail, ok := refFeedFrom(g, stacks, b)
	if !ok {
		return false
	}
	if len(stacks) == 0 {
		return false
	}
	if len(tail) == 0 {
		return true
	}
	size := 0
	switch c := tail[0]; {
	case c&0xE0 == 0xC0:
		size = 2
	case c&0xF0 == 0xE0:
		size = 3
	case c&0xF8 == 0xF0:
		size = 4
	default:
		return false
	}
	// Valid UTF-8 sorts like its code points, so the characters that start
	// with tail form one interval [lo, hi]. Only the byte after the lead
	// has a restricted range; later ones are free, so try each value of the
	// first missing byte with the rest at their lowest (for lo) or highest
	// (for hi).
	decode := func(first, fill byte) (rune, bool) {
		buf := append([]byte(nil), tail...)
		buf = append(buf, first)
		for len(buf) < size {
			buf = append(buf, fill)
		}
		r, m := utf8.DecodeRune(buf)
		return r, r != utf8.RuneError && m == size
	}
	lo, hi := rune(-1), rune(-1)
	for c := 0x80; c <= 0xBF; c++ {
		if r, ok := decode(byte(c), 0x80); ok {
			lo = r
			break
		}
	}
	for c := 0xBF; c >= 0x80; c-- {
		if r, ok := decode(byte(c), 0xBF); ok {
			hi = r
			break
		}
	}
	if lo < 0 {
		return false
	}
	for _, s := range stacks {
		if len(s) == 0 {
			continue
		}
		for _, rr := range g.classes[g.elems[s[len(s)-1]].id].ranges {
			if rr.lo <= hi && lo <= rr.hi {
				return true
			}
		}
	}
	return false
}
