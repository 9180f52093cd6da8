// Package grammar constrains generation to a formal grammar.
//
// It parses GBNF, the grammar format of llama.cpp, converts JSON Schema
// documents and tool (function) definitions to GBNF, and matches a grammar
// against a tokenizer vocabulary so that a sampler can mask every token that
// may not come next.
//
// The pieces and their lifetimes:
//
//   - Parse turns GBNF text into a *Grammar. A Grammar is immutable and safe
//     for concurrent use.
//   - NewVocab builds a byte trie over a tokenizer vocabulary once per model.
//     A *Vocab is immutable and safe for concurrent use by many matchers.
//   - NewMatcher binds a Grammar and a Vocab into a *Matcher, the per-sequence
//     state. A Matcher is not safe for concurrent use; Clone gives an
//     independent copy (for n / best_of candidates).
//
// The grammar works on Unicode code points while tokens are byte strings: a
// token may end in the middle of a multi-byte UTF-8 character, and the
// matcher carries the partial character over to the next token.
package grammar

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxRune is the largest Unicode code point; negated classes complement
// against [0, maxRune].
const maxRune = 0x10FFFF

type elemKind uint8

const (
	elemEnd  elemKind = iota // end of an alternative
	elemChar                 // one code point from a character class
	elemRef                  // a reference to a rule
)

// elem is one grammar element in the flattened form: rule alternatives are
// runs of elements each terminated by elemEnd.
type elem struct {
	kind elemKind
	id   int32 // class index for elemChar, rule index for elemRef
}

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// charClass is a normalized character class: sorted, non-overlapping,
// non-adjacent inclusive ranges (negation already applied).
type charClass struct {
	ranges   []runeRange
	ascii    [2]uint64 // membership bitmap for code points < 128
	nonASCII uint8     // which non-ASCII characters it holds: classNone, classAll or classSome
}

const (
	classNone uint8 = iota
	classAll
	classSome
)

func newCharClass(ranges []runeRange, negated bool) charClass {
	rs := append([]runeRange(nil), ranges...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	var merged []runeRange
	for _, r := range rs {
		if r.lo > r.hi {
			continue
		}
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			if r.hi > merged[n-1].hi {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	if negated {
		var comp []runeRange
		next := rune(0)
		for _, r := range merged {
			if r.lo > next {
				comp = append(comp, runeRange{next, r.lo - 1})
			}
			next = r.hi + 1
		}
		if next <= maxRune {
			comp = append(comp, runeRange{next, maxRune})
		}
		merged = comp
	}
	// Surrogates are not characters: UTF-8 cannot carry them, so no class
	// holds them and partial-character checks stay exact.
	var noSurr []runeRange
	for _, r := range merged {
		if r.hi < 0xD800 || r.lo > 0xDFFF {
			noSurr = append(noSurr, r)
			continue
		}
		if r.lo < 0xD800 {
			noSurr = append(noSurr, runeRange{r.lo, 0xD7FF})
		}
		if r.hi > 0xDFFF {
			noSurr = append(noSurr, runeRange{0xE000, r.hi})
		}
	}
	c := charClass{ranges: noSurr, nonASCII: classSome}
	switch {
	case !c.intersects(0x80, maxRune):
		c.nonASCII = classNone
	case c.covers(0x80, 0xD7FF) && c.covers(0xE000, maxRune):
		c.nonASCII = classAll
	}
	for _, r := range merged {
		for cp := r.lo; cp <= r.hi && cp < 128; cp++ {
			c.ascii[cp>>6] |= 1 << (cp & 63)
		}
	}
	return c
}

// match reports whether the class contains cp.
func (c *charClass) match(cp rune) bool {
	if cp < 128 {
		return c.ascii[cp>>6]&(1<<(cp&63)) != 0
	}
	for _, r := range c.ranges {
		if cp < r.lo {
			return false
		}
		if cp <= r.hi {
			return true
		}
	}
	return false
}

// covers reports whether the class holds every code point in [lo, hi],
// an interval free of surrogates (ranges are maximal, so one must hold it).
func (c *charClass) covers(lo, hi rune) bool {
	for _, r := range c.ranges {
		if r.lo <= lo && hi <= r.hi {
			return true
		}
	}
	return false
}

// intersects reports whether the class contains some code point in [lo, hi].
func (c *charClass) intersects(lo, hi rune) bool {
	for _, r := range c.ranges {
		if r.lo <= hi && lo <= r.hi {
			return true
		}
	}
	return false
}

// rule is a grammar rule in the flattened form.
type rule struct {
	name string
	alts []int32 // start index in Grammar.elems of each alternative
}

// Grammar is a parsed and checked GBNF grammar: every referenced rule is
// defined and no rule is left-recursive. A Grammar is immutable and safe for
// concurrent use.
type Grammar struct {
	elems   []elem
	rules   []rule
	classes []charClass
	root    int32
}

// Root returns the name of the rule the grammar starts from.
func (g *Grammar) Root() string { return g.rules[g.root].name }

// NumRules returns the number of rules, including the rules the parser
// synthesizes for groups and repetitions.
func (g *Grammar) NumRules() int { return len(g.rules) }

// Match reports whether the whole of s is a sentence of the grammar.
func (g *Grammar) Match(s string) bool {
	m := NewMatcher(g, nil)
	if err := m.AcceptBytes([]byte(s)); err != nil {
		return false
	}
	return m.IsComplete()
}

// String returns the grammar in GBNF, one rule a line, with the rules the
// parser synthesized spelled out under names containing '~' (which GBNF
// names cannot contain, so the output is for reading, not for re-parsing).
func (g *Grammar) String() string {
	var b strings.Builder
	for _, r := range g.rules {
		b.WriteString(r.name)
		b.WriteString(" ::=")
		for i, start := range r.alts {
			if i > 0 {
				b.WriteString(" |")
			}
			for p := start; g.elems[p].kind != elemEnd; p++ {
				b.WriteByte(' ')
				e := g.elems[p]
				if e.kind == elemRef {
					b.WriteString(g.rules[e.id].name)
				} else {
					writeClass(&b, &g.classes[e.id])
				}
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func writeClass(b *strings.Builder, c *charClass) {
	b.WriteByte('[')
	for _, r := range c.ranges {
		writeClassRune(b, r.lo)
		if r.hi != r.lo {
			b.WriteByte('-')
			writeClassRune(b, r.hi)
		}
	}
	b.WriteByte(']')
}

func writeClassRune(b *strings.Builder, r rune) {
	switch {
	case r == '\\' || r == ']' || r == '-' || r == '^' || r == '[':
		b.WriteByte('\\')
		b.WriteRune(r)
	case r < 0x20 || r == 0x7F:
		fmt.Fprintf(b, `\x%02X`, r)
	case r > 0xFFFF:
		fmt.Fprintf(b, `\U%08X`, r)
	case r >= 0xD800 && r <= 0xDFFF || !utf8.ValidRune(r) || !unicode.IsPrint(r):
		fmt.Fprintf(b, `\u%04X`, r)
	default:
		b.WriteRune(r)
	}
}
