package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that keep hostile grammars from exhausting memory or time: parsing
// and checking are linear in the source, and these bound the source's
// consequences.
const (
	maxRepeat = 1000    // largest m or n in x{m,n}
	maxElems  = 1 << 20 // largest flattened grammar
	maxRules  = 1 << 16 // most rules, the synthesized ones included
	// maxAlternatives bounds one rule's alternatives: each can be a parse
	// the matcher follows in parallel, and it follows at most maxStackSet.
	maxAlternatives = maxStackSet
)

// SyntaxError reports a GBNF parse or check error at a line and column
// (both 1-based; the column counts code points).
type SyntaxError struct {
	Line, Col int
	Msg       string
}

// Error returns "grammar:LINE:COL: MSG".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("grammar:%d:%d: %s", e.Line, e.Col, e.Msg)
}

// sym is an element while parsing: a character class or a rule reference.
type sym struct {
	kind elemKind
	id   int32
}

type parseRule struct {
	name    string
	alts    [][]sym
	defined bool
	refPos  int // offset of the first reference, for "undefined rule" errors
	defPos  int
}

type parser struct {
	src     string
	pos     int
	ruleIDs map[string]int32
	rules   []parseRule
	classes []charClass
	nelems  int
	work    *work
}

// Parse parses GBNF source text and checks it: every referenced rule must be
// defined, the start rule must exist, no rule may be left-recursive, the
// start rule must match some text, and the matcher must be able to follow
// the grammar's first step. Grammars no output can ever satisfy are errors
// too: a character class that holds no character, a UTF-16 surrogate
// (which UTF-8 cannot carry) as a character. root names the start rule; ""
// means "root". Errors are *SyntaxError with the line and column of the
// problem. Parsing and checking take time linear in the size of src.
func Parse(src, root string) (*Grammar, error) { return ParseBudget(src, root, Budget{}) }

// ParseBudget is Parse within b: a grammar that needs more work is an
// error wrapping ErrBudget, and b.Ctx's end stops it with an error wrapping
// the context's.
func ParseBudget(src, root string, b Budget) (*Grammar, error) {
	return parseWork(src, root, b.start())
}

func parseWork(src, root string, w *work) (*Grammar, error) {
	if root == "" {
		root = "root"
	}
	p := &parser{src: src, ruleIDs: map[string]int32{}, work: w}
	if err := p.parse(); err != nil {
		return nil, err
	}
	for _, r := range p.rules {
		if !r.defined {
			return nil, p.errAt(r.refPos, "undefined rule %q", r.name)
		}
	}
	rootID, ok := p.ruleIDs[root]
	if !ok {
		return nil, p.errAt(len(p.src), "grammar has no rule %q", root)
	}
	// The checks below are linear in the elements the budget counted
	// (each alternative, rule and element visited a bounded number of
	// times); the budget's context is checked between them.
	g := p.flatten(rootID)
	if err := w.done(); err != nil {
		return nil, err
	}
	name, ok := g.leftRecursive()
	if err := w.done(); err != nil {
		return nil, err
	}
	if ok {
		if i := strings.IndexByte(name, '~'); i >= 0 {
			name = name[:i] // a group or repetition inside this rule
		}
		pos := 0
		if id, ok := p.ruleIDs[name]; ok {
			pos = p.rules[id].defPos
		}
		return nil, p.errAt(pos, "rule %q is left-recursive", name)
	}
	if !g.closure(true)[rootID] {
		return nil, p.errAt(p.rules[rootID].defPos, "rule %q matches no text: each of its alternatives needs a rule that never completes", root)
	}
	if err := w.done(); err != nil {
		return nil, err
	}
	if m := NewMatcher(g, nil); m.err != nil {
		return nil, p.errAt(p.rules[rootID].defPos, "grammar too ambiguous: its first character can start over %d different parses", maxStackSet)
	}
	return g, nil
}

func (p *parser) errAt(off int, format string, args ...any) error {
	if off > len(p.src) {
		off = len(p.src)
	}
	line, col := 1, 1
	for _, r := range p.src[:off] {
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// skipSpace skips blanks and comments, and newlines when newlineOK.
func (p *parser) skipSpace(newlineOK bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '\r' || c == '\n':
			if !newlineOK {
				return
			}
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *parser) parseName() string {
	start := p.pos
	for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *parser) ruleID(name string, refPos int) int32 {
	if id, ok := p.ruleIDs[name]; ok {
		return id
	}
	id := int32(len(p.rules))
	p.rules = append(p.rules, parseRule{name: name, refPos: refPos})
	p.ruleIDs[name] = id
	return id
}

// synthRule adds an internal rule with the given alternatives and returns
// its index. Its name contains '~', which user rule names cannot.
func (p *parser) synthRule(base string, alts [][]sym) int32 {
	id := int32(len(p.rules))
	p.rules = append(p.rules, parseRule{
		name:    base + "~" + strconv.Itoa(int(id)),
		alts:    alts,
		defined: true,
	})
	return id
}

func (p *parser) addElems(n int) error {
	if err := p.work.spend(n); err != nil {
		return err
	}
	p.nelems += n
	if p.nelems > maxElems {
		return p.errAt(p.pos, "grammar too large (over %d elements)", maxElems)
	}
	if len(p.rules) > maxRules {
		return p.errAt(p.pos, "grammar too large (over %d rules, counting groups and repetitions)", maxRules)
	}
	return nil
}

func (p *parser) parse() error {
	p.skipSpace(true)
	for !p.eof() {
		start := p.pos
		name := p.parseName()
		if name == "" {
			return p.errAt(p.pos, "expected rule name, found %s", p.describe())
		}
		p.skipSpace(false)
		if !hasPrefixAt(p.src, p.pos, "::=") {
			return p.errAt(p.pos, "expected ::= after rule name %q, found %s", name, p.describe())
		}
		p.pos += 3
		p.skipSpace(true)
		alts, err := p.parseAlternates(name, false)
		if err != nil {
			return err
		}
		id := p.ruleID(name, start)
		if p.rules[id].defined {
			return p.errAt(start, "rule %q defined twice", name)
		}
		p.rules[id].alts = alts
		p.rules[id].defined = true
		p.rules[id].defPos = start
		p.skipSpace(false)
		if !p.eof() && p.peek() != '\n' && p.peek() != '\r' {
			return p.errAt(p.pos, "expected end of line after rule %q, found %s", name, p.describe())
		}
		p.skipSpace(true)
	}
	return nil
}

func hasPrefixAt(s string, pos int, prefix string) bool {
	return len(s)-pos >= len(prefix) && s[pos:pos+len(prefix)] == prefix
}

// describe names what is at the current position, for error messages.
func (p *parser) describe() string {
	if p.eof() {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return strconv.QuoteRune(r)
}

func (p *parser) parseAlternates(name string, nested bool) ([][]sym, error) {
	var alts [][]sym
	for {
		seq, err := p.parseSequence(name, nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if err := p.addElems(len(seq) + 1); err != nil {
			return nil, err
		}
		if len(alts) > maxAlternatives {
			return nil, p.errAt(p.pos, "rule %q has over %d alternatives in one group", name, maxAlternatives)
		}
		if p.peek() != '|' {
			return alts, nil
		}
		p.pos++
		p.skipSpace(true)
	}
}

func (p *parser) parseSequence(name string, nested bool) ([]sym, error) {
	var seq []sym
	last := -1 // start in seq of the last item, for repetition operators
	for !p.eof() {
		c := p.peek()
		switch {
		case c == '"':
			p.pos++
			last = len(seq)
			for {
				if p.eof() {
					return nil, p.errAt(p.pos, "unterminated string literal")
				}
				if p.peek() == '"' {
					p.pos++
					break
				}
				charPos := p.pos
				r, err := p.parseChar()
				if err != nil {
					return nil, err
				}
				if isSurrogate(r) {
					return nil, p.errSurrogate(charPos, r)
				}
				seq = append(seq, p.classSym([]runeRange{{r, r}}, false))
			}
		case c == '[':
			p.pos++
			last = len(seq)
			s, err := p.parseClass()
			if err != nil {
				return nil, err
			}
			seq = append(seq, s)
		case c == '.':
			p.pos++
			last = len(seq)
			seq = append(seq, p.classSym(nil, true))
		case c == '(':
			p.pos++
			p.skipSpace(true)
			alts, err := p.parseAlternates(name, true)
			if err != nil {
				return nil, err
			}
			if p.peek() != ')' {
				return nil, p.errAt(p.pos, "expected ) to close group, found %s", p.describe())
			}
			p.pos++
			last = len(seq)
			seq = append(seq, sym{elemRef, p.synthRule(name, alts)})
		case isNameChar(c):
			start := p.pos
			ref := p.parseName()
			last = len(seq)
			seq = append(seq, sym{elemRef, p.ruleID(ref, start)})
		case c == '*' || c == '+' || c == '?' || c == '{':
			if last < 0 {
				return nil, p.errAt(p.pos, "expected an item before %q", c)
			}
			opPos := p.pos
			p.pos++
			lo, hi := 0, -1 // hi < 0: unbounded
			switch c {
			case '+':
				lo = 1
			case '?':
				hi = 1
			case '{':
				var err error
				if lo, hi, err = p.parseBraces(opPos); err != nil {
					return nil, err
				}
			}
			var err error
			if seq, err = p.repeat(name, seq, last, lo, hi); err != nil {
				return nil, err
			}
			last = -1 // a repetition cannot itself be repeated (x** is an error)
		case c == '<' || c == '!':
			return nil, p.errAt(p.pos, "token references (<...>, !<...>) are not supported")
		default:
			return seq, nil
		}
		p.skipSpace(nested)
	}
	return seq, nil
}

// parseBraces parses the inside of {m}, {m,}, {m,n}; the '{' is consumed.
func (p *parser) parseBraces(opPos int) (lo, hi int, err error) {
	p.skipSpace(true)
	lo, ok := p.parseInt()
	if !ok {
		return 0, 0, p.errAt(p.pos, "expected a number in {m,n} repetition, found %s", p.describe())
	}
	p.skipSpace(true)
	hi = lo
	if p.peek() == ',' {
		p.pos++
		p.skipSpace(true)
		hi = -1
		if n, ok := p.parseInt(); ok {
			hi = n
		}
		p.skipSpace(true)
	}
	if p.peek() != '}' {
		return 0, 0, p.errAt(p.pos, "expected } to close repetition, found %s", p.describe())
	}
	p.pos++
	if lo > maxRepeat || hi > maxRepeat {
		return 0, 0, p.errAt(opPos, "repetition count over %d", maxRepeat)
	}
	if hi >= 0 && hi < lo {
		return 0, 0, p.errAt(opPos, "repetition {%d,%d} has maximum below minimum", lo, hi)
	}
	return lo, hi, nil
}

func (p *parser) parseInt() (int, bool) {
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == start || p.pos-start > 6 {
		if p.pos-start > 6 {
			return maxRepeat + 1, true
		}
		return 0, false
	}
	n, _ := strconv.Atoi(p.src[start:p.pos])
	return n, true
}

// repeat replaces seq[last:] (one item) by lo..hi repetitions of it (hi < 0:
// unbounded), introducing right-recursive rules as llama.cpp does.
func (p *parser) repeat(name string, seq []sym, last, lo, hi int) ([]sym, error) {
	item := append([]sym(nil), seq[last:]...)
	seq = seq[:last]
	if len(item) != 1 {
		item = []sym{{elemRef, p.synthRule(name, [][]sym{item})}}
	}
	x := item[0]
	for i := 0; i < lo; i++ {
		seq = append(seq, x)
	}
	if err := p.addElems(lo + 4*max(hi-lo, 1)); err != nil {
		return nil, err
	}
	if hi < 0 {
		// star ::= x star | ε
		id := int32(len(p.rules))
		p.synthRule(name, nil)
		p.rules[id].alts = [][]sym{{x, {elemRef, id}}, {}}
		return append(seq, sym{elemRef, id}), nil
	}
	if hi == lo {
		return seq, nil
	}
	// opt1 ::= x | ε ; optK ::= x opt(K-1) | ε
	opt := p.synthRule(name, [][]sym{{x}, {}})
	for k := 2; k <= hi-lo; k++ {
		opt = p.synthRule(name, [][]sym{{x, {elemRef, opt}}, {}})
	}
	return append(seq, sym{elemRef, opt}), nil
}

// classSym interns a character class and returns the element for it.
func (p *parser) classSym(ranges []runeRange, negated bool) sym {
	p.classes = append(p.classes, newCharClass(ranges, negated))
	return sym{elemChar, int32(len(p.classes) - 1)}
}

// parseClass parses a [...] class; the '[' is consumed.
func (p *parser) parseClass() (sym, error) {
	start := p.pos - 1
	negated := false
	if p.peek() == '^' {
		negated = true
		p.pos++
	}
	var ranges []runeRange
	for {
		if p.eof() {
			return sym{}, p.errAt(start, "unterminated character class")
		}
		if p.peek() == ']' {
			p.pos++
			break
		}
		charPos := p.pos
		lo, err := p.parseChar()
		if err != nil {
			return sym{}, err
		}
		hi := lo
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			rangePos := p.pos
			if hi, err = p.parseChar(); err != nil {
				return sym{}, err
			}
			if hi < lo {
				return sym{}, p.errAt(rangePos, "character range %q-%q is reversed", lo, hi)
			}
		}
		if isSurrogate(lo) && isSurrogate(hi) {
			// A range partly in the surrogates just skips them; one
			// wholly inside holds no character.
			return sym{}, p.errSurrogate(charPos, lo)
		}
		ranges = append(ranges, runeRange{lo, hi})
	}
	s := p.classSym(ranges, negated)
	if len(p.classes[s.id].ranges) == 0 {
		return sym{}, p.errAt(start, "character class matches no character")
	}
	return s, nil
}

func isSurrogate(r rune) bool { return r >= 0xD800 && r <= 0xDFFF }

func (p *parser) errSurrogate(pos int, r rune) error {
	return p.errAt(pos, "U+%04X is a UTF-16 surrogate, not a character: no UTF-8 output can contain it (write the character itself, or \\U%08X for one beyond U+FFFF)", r, r)
}

// parseChar parses one possibly escaped character of a literal or class.
func (p *parser) parseChar() (rune, error) {
	start := p.pos
	if p.peek() != '\\' {
		r, size := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && size <= 1 {
			return 0, p.errAt(start, "invalid UTF-8 in grammar")
		}
		p.pos += size
		return r, nil
	}
	p.pos++
	if p.eof() {
		return 0, p.errAt(start, "unfinished escape at end of input")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'x':
		return p.parseHex(start, 2)
	case 'u':
		return p.parseHex(start, 4)
	case 'U':
		return p.parseHex(start, 8)
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '0':
		return 0, nil
	case '\\', '"', '[', ']', '-', '^', '/', '.', '\'', '(', ')', '|', '*', '+', '?', '{', '}':
		return rune(c), nil
	}
	p.pos = start + 1
	return 0, p.errAt(start, "unknown escape %s", p.describe())
}

func (p *parser) parseHex(start, n int) (rune, error) {
	var v rune
	for i := 0; i < n; i++ {
		if p.eof() {
			return 0, p.errAt(start, "escape needs %d hex digits", n)
		}
		c := p.src[p.pos]
		var d rune
		switch {
		case c >= '0' && c <= '9':
			d = rune(c - '0')
		case c >= 'a' && c <= 'f':
			d = rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = rune(c-'A') + 10
		default:
			return 0, p.errAt(p.pos, "escape needs %d hex digits, found %s", n, p.describe())
		}
		v = v<<4 | d
		p.pos++
	}
	if v > maxRune {
		return 0, p.errAt(start, "code point %#x beyond U+10FFFF", v)
	}
	return v, nil
}

// flatten lays the rules out as one element array.
func (p *parser) flatten(root int32) *Grammar {
	g := &Grammar{classes: p.classes, root: root, rules: make([]rule, len(p.rules))}
	g.elems = make([]elem, 0, p.nelems)
	for i, r := range p.rules {
		g.rules[i].name = r.name
		for _, alt := range r.alts {
			g.rules[i].alts = append(g.rules[i].alts, int32(len(g.elems)))
			for _, s := range alt {
				g.elems = append(g.elems, elem(s))
			}
			g.elems = append(g.elems, elem{kind: elemEnd})
		}
	}
	return g
}

// closure returns, per rule, whether it can match the empty string
// (charsOK false: nullable) or match some finite text (charsOK true:
// productive). It is the least fixed point, computed with a work list in
// time linear in the grammar: each alternative counts the elements not
// yet known to qualify, and a rule that qualifies decrements the count of
// every alternative that refers to it.
func (g *Grammar) closure(charsOK bool) []bool {
	type occurrence struct{ rule, alt int32 }
	ok := make([]bool, len(g.rules))
	uses := make([][]occurrence, len(g.rules)) // rule -> the alternatives that refer to it, once per reference
	var pending []int32                        // per alternative (numbered across rules): elements left
	var queue []int32
	for i, r := range g.rules {
		for _, start := range r.alts {
			a := int32(len(pending))
			n := int32(0)
			for p := start; g.elems[p].kind != elemEnd; p++ {
				e := g.elems[p]
				switch {
				case e.kind == elemRef:
					uses[e.id] = append(uses[e.id], occurrence{int32(i), a})
					n++
				case !charsOK:
					n = -1 << 30 // a character: never empty
				}
			}
			pending = append(pending, n)
			if n == 0 && !ok[i] {
				ok[i] = true
				queue = append(queue, int32(i))
			}
		}
	}
	for len(queue) > 0 {
		j := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, o := range uses[j] {
			if pending[o.alt]--; pending[o.alt] == 0 && !ok[o.rule] {
				ok[o.rule] = true
				queue = append(queue, o.rule)
			}
		}
	}
	return ok
}

// leftRecursive reports the name of a left-recursive rule, if any: a rule
// that can reach itself without consuming a character in a way that grows
// the matcher's stack, so that the matcher's expansion would never end.
// Parse rejects such grammars. A rule that reaches itself only through
// references in tail position (the last element of an alternative, as in
// the rule x* becomes when x can be empty: star ::= x star | ε) does not
// grow the stack, and the matcher's expansion stops at the repeated
// position, so that form is allowed. It runs in time linear in the
// grammar.
func (g *Grammar) leftRecursive() (string, bool) {
	nullable := g.closure(false)
	// Edges: rule -> rules it can start with (after a nullable prefix);
	// tail when the reference ends its alternative.
	type edge struct {
		to   int32
		tail bool
	}
	edges := make([][]edge, len(g.rules))
	for i, r := range g.rules {
		for _, start := range r.alts {
			for p := start; g.elems[p].kind == elemRef; p++ {
				j := g.elems[p].id
				edges[i] = append(edges[i], edge{j, g.elems[p+1].kind == elemEnd})
				if !nullable[j] {
					break
				}
			}
		}
	}
	// Tarjan's strongly connected components, iteratively; a non-tail edge
	// inside a component lies on a cycle that grows the stack.
	n := len(g.rules)
	index := make([]int32, n) // 0: unvisited; else visit order + 1
	low := make([]int32, n)
	comp := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct {
		v    int32
		next int
	}
	var calls []frame
	counter, ncomp := int32(0), int32(0)
	for root := range n {
		if index[root] != 0 {
			continue
		}
		counter++
		index[root], low[root] = counter, counter
		stack = append(stack, int32(root))
		onStack[root] = true
		calls = append(calls[:0], frame{int32(root), 0})
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.next < len(edges[v]) {
				w := edges[v][f.next].to
				f.next++
				switch {
				case index[w] == 0:
					counter++
					index[w], low[w] = counter, counter
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = ncomp
					if w == v {
						break
					}
				}
				ncomp++
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
		}
	}
	for i := range edges {
		for _, e := range edges[i] {
			if !e.tail && comp[i] == comp[e.to] {
				return g.rules[i].name, true
			}
		}
	}
	return "", false
}
