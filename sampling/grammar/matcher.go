package grammar

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	mbits "math/bits"
	"slices"
)

// The matcher is a pushdown recognizer in the style of llama.cpp: a state
// is a set of stacks, each stack a path of grammar positions whose top is a
// character element waiting for a code point. Stacks are persistent linked
// lists of hash-consed nodes, so equal stacks are equal indices and equal
// stack sets intern to one id. States (a set plus any partial UTF-8
// character) are interned too, and the byte transition between states is
// memoized in a table: the matcher becomes a lazily built DFA over bytes.
// Walking the vocabulary trie then costs one table look-up per trie node
// after a state's first visit, and Accept costs one per token byte.

// Limits on the lazily built automaton. Past them the caches are dropped
// and rebuilt from the current state, so memory stays bounded whatever the
// grammar or the output.
const (
	maxNodes      = 1 << 18
	maxStates     = 1 << 12
	maxStackSet   = 1 << 12 // stacks in one state: more means a wildly ambiguous grammar
	maskCacheSize = 8       // per-state allowed-token bitsets kept per matcher
)

const (
	transUnknown int32 = -2
	transDead    int32 = -1
	acceptStack  int32 = -1 // the empty stack: the grammar may end here
)

// node is one frame of a stack: a position in Grammar.elems (for the top, an
// elemChar; below it, where to continue once the rule above returns) and
// the node below (-1 at the bottom).
type node struct{ pos, parent int32 }

type span struct{ start, end int32 }

// stateKey identifies a matcher state: a stack set plus a partially read
// UTF-8 character (need > 0: bytes still missing; size: its full length).
type stateKey struct {
	set  int32
	pval int32
	need int8
	size int8
}

// Matcher matches generated tokens against a Grammar. It is the per-sequence
// state: call Mask before sampling each token and Accept with the chosen
// token. A Matcher is not safe for concurrent use; Clone gives an
// independent copy. After an error from Accept the state is unchanged; after
// an error from Mask the logits are unusable.
type Matcher struct {
	g *Grammar
	v *Vocab // nil for a matcher used only on bytes

	nodes   []node
	nodeIDs map[node]int32
	setData []int32
	sets    []span
	setIDs  map[uint64][]int32
	seed    maphash.Seed
	states  []stateKey
	stateOf map[stateKey]int32
	trans   []int32 // trans[state<<8|byte]: next state, transDead or transUnknown

	loopSet []stateLoops // per state, see loops

	limitNodes, limitStates int // maxNodes and maxStates; tests lower them

	cur   int32
	ended bool // an end-of-generation token was accepted
	err   error

	scratch  []int32
	visited  map[node]struct{}
	masks    map[int32][]uint64
	maskFIFO []int32
}

// NewMatcher returns a matcher at the start of g. v may be nil for a matcher
// that is only fed bytes (AcceptBytes, IsComplete); Mask and Accept need it.
func NewMatcher(g *Grammar, v *Vocab) *Matcher {
	m := &Matcher{g: g, v: v, seed: maphash.MakeSeed(), limitNodes: maxNodes, limitStates: maxStates}
	m.reset()
	m.scratch = m.scratch[:0]
	for _, a := range g.rules[g.root].alts {
		m.expand(a, -1)
	}
	m.cur = m.state(stateKey{set: m.internSet()})
	return m
}

func (m *Matcher) reset() {
	m.nodes = m.nodes[:0]
	m.nodeIDs = make(map[node]int32)
	m.setData = m.setData[:0]
	m.sets = m.sets[:0]
	m.setIDs = make(map[uint64][]int32)
	m.states = m.states[:0]
	m.stateOf = make(map[stateKey]int32)
	m.trans = m.trans[:0]
	m.loopSet = m.loopSet[:0]
	m.visited = make(map[node]struct{})
	m.masks = make(map[int32][]uint64)
	m.maskFIFO = m.maskFIFO[:0]
}

// Clone returns an independent copy of the matcher in the same state. The
// copy shares only the immutable Grammar and Vocab.
func (m *Matcher) Clone() *Matcher {
	c := &Matcher{
		g: m.g, v: m.v, seed: m.seed, limitNodes: m.limitNodes, limitStates: m.limitStates,
		nodes:   slices.Clone(m.nodes),
		nodeIDs: make(map[node]int32, len(m.nodeIDs)),
		setData: slices.Clone(m.setData),
		sets:    slices.Clone(m.sets),
		setIDs:  make(map[uint64][]int32, len(m.setIDs)),
		states:  slices.Clone(m.states),
		stateOf: make(map[stateKey]int32, len(m.stateOf)),
		trans:   slices.Clone(m.trans),
		loopSet: slices.Clone(m.loopSet),
		cur:     m.cur, ended: m.ended, err: m.err,
		visited: make(map[node]struct{}),
		masks:   make(map[int32][]uint64),
	}
	for k, v := range m.nodeIDs {
		c.nodeIDs[k] = v
	}
	for k, v := range m.setIDs {
		c.setIDs[k] = slices.Clone(v)
	}
	for k, v := range m.stateOf {
		c.stateOf[k] = v
	}
	return c
}

// IsComplete reports whether the text accepted so far is a whole sentence of
// the grammar, that is, whether generation may end here.
func (m *Matcher) IsComplete() bool { return m.ended || m.complete(m.cur) }

// Ended reports whether an end-of-generation token has been accepted.
func (m *Matcher) Ended() bool { return m.ended }

func (m *Matcher) complete(s int32) bool {
	st := m.states[s]
	if st.need != 0 {
		return false
	}
	sp := m.sets[st.set]
	return sp.end > sp.start && m.setData[sp.start] == acceptStack
}

// ErrRejected is wrapped by the errors Accept and AcceptBytes return for
// input the grammar does not allow.
var ErrRejected = errors.New("rejected by grammar")

// ErrDeadEnd is wrapped by the errors Mask, Allowed, Allows, Accept and
// AcceptBytes return when generation cannot go on under the grammar: no
// token of the vocabulary can come next, or the parse became too ambiguous
// to follow. The grammar a request gave (with the model's vocabulary)
// causes it, not a fault of the server: report it as the client's error,
// naming the field the grammar came from. Test with errors.Is.
var ErrDeadEnd = errors.New("grammar dead end")

// deadEnd is the error of a dead end; rejected says the matcher's input
// was refused too (Mask's "no token", which ErrRejected has always
// marked).
type deadEnd struct {
	msg      string
	rejected bool
}

func (e *deadEnd) Error() string { return "grammar: dead end: " + e.msg }

func (e *deadEnd) Unwrap() []error {
	if e.rejected {
		return []error{ErrDeadEnd, ErrRejected}
	}
	return []error{ErrDeadEnd}
}

// AcceptBytes advances the matcher over raw output bytes. On error the state
// is unchanged.
func (m *Matcher) AcceptBytes(b []byte) error {
	if m.ended {
		return fmt.Errorf("grammar: generation already ended: %w", ErrRejected)
	}
	m.maybeCompact()
	s := m.cur
	for i, c := range b {
		s = m.step(s, c)
		if s < 0 {
			if m.err != nil {
				return m.err
			}
			return fmt.Errorf("grammar: byte %d (%q) of %q: %w", i, c, b, ErrRejected)
		}
	}
	m.cur = s
	return nil
}

// Accept advances the matcher past token id. An end-of-generation token is
// accepted only where the grammar is complete; afterwards every token is
// rejected. On error the state is unchanged.
func (m *Matcher) Accept(id int32) error {
	if m.v == nil {
		return errors.New("grammar: Accept on a matcher built without a vocabulary")
	}
	if id < 0 || int(id) >= m.v.Size() {
		return fmt.Errorf("grammar: token id %d outside vocabulary of %d", id, m.v.Size())
	}
	if m.ended {
		return fmt.Errorf("grammar: token %d after end of generation: %w", id, ErrRejected)
	}
	if m.v.IsEOG(id) {
		if !m.complete(m.cur) {
			return fmt.Errorf("grammar: end-of-generation token %d before the grammar is complete: %w", id, ErrRejected)
		}
		m.ended = true
		return nil
	}
	tok := m.v.Token(id)
	if len(tok) == 0 {
		return fmt.Errorf("grammar: special token %d has no text: %w", id, ErrRejected)
	}
	if err := m.AcceptBytes(tok); err != nil {
		return fmt.Errorf("grammar: token %d (%q): %w", id, tok, err)
	}
	return nil
}

// Allows reports whether token id may come next, without changing the
// state: the cheap check a sampler can make on its first draw before
// masking the whole vocabulary (llama.cpp's order).
func (m *Matcher) Allows(id int32) (bool, error) {
	if m.v == nil {
		return false, errors.New("grammar: Allows on a matcher built without a vocabulary")
	}
	if id < 0 || int(id) >= m.v.Size() {
		return false, fmt.Errorf("grammar: token id %d outside vocabulary of %d", id, m.v.Size())
	}
	if m.ended {
		return false, nil
	}
	if m.v.IsEOG(id) {
		return m.complete(m.cur), nil
	}
	tok := m.v.Token(id)
	if len(tok) == 0 {
		return false, nil
	}
	m.maybeCompact()
	s := m.cur
	for _, c := range tok {
		if s = m.step(s, c); s < 0 {
			return false, m.err
		}
	}
	return true, nil
}

// Mask sets logits[id] to -Inf for every token that may not come next. len
// (logits) must be at least the vocabulary size; entries past it (padding)
// are always masked. It returns an error when no token at all is allowed.
func (m *Matcher) Mask(logits []float32) error {
	if m.v == nil {
		return errors.New("grammar: Mask on a matcher built without a vocabulary")
	}
	n := m.v.Size()
	if len(logits) < n {
		return fmt.Errorf("grammar: Mask: %d logits for a vocabulary of %d", len(logits), n)
	}
	ninf := float32(math.Inf(-1))
	if m.ended {
		for i := range logits {
			logits[i] = ninf
		}
		return fmt.Errorf("grammar: Mask after end of generation: %w", ErrRejected)
	}
	allowed, err := m.allowed()
	if err != nil {
		return err
	}
	any := false
	for w, bits := range allowed {
		if bits != 0 {
			any = true
		}
		base := w << 6
		if bits == 0 && base+64 <= n {
			row := logits[base : base+64]
			for i := range row {
				row[i] = ninf
			}
			continue
		}
		// Visit only the masked ids: in a string nearly all are allowed.
		z := ^bits
		if rem := n - w<<6; rem < 64 {
			z &= 1<<rem - 1
		}
		for z != 0 {
			i := mbits.TrailingZeros64(z)
			z &= z - 1
			logits[base+i] = ninf
		}
	}
	for i := n; i < len(logits); i++ {
		logits[i] = ninf
	}
	if !any {
		return &deadEnd{msg: "no token of the vocabulary can continue the grammar", rejected: true}
	}
	return nil
}

// Allowed appends to dst the ids of every token the grammar allows next, in
// increasing order, and returns the extended slice.
func (m *Matcher) Allowed(dst []int32) ([]int32, error) {
	if m.v == nil {
		return dst, errors.New("grammar: Allowed on a matcher built without a vocabulary")
	}
	if m.ended {
		return dst, nil
	}
	allowed, err := m.allowed()
	if err != nil {
		return dst, err
	}
	for w, bits := range allowed {
		for bits != 0 {
			i := mbits.TrailingZeros64(bits)
			bits &^= 1 << i
			dst = append(dst, int32(w<<6+i))
		}
	}
	return dst, nil
}

// allowed returns the bitset of tokens allowed in the current state, from
// the cache or by walking the trie.
func (m *Matcher) allowed() ([]uint64, error) {
	if bits, ok := m.masks[m.cur]; ok {
		return bits, nil
	}
	if m.maybeCompact() {
		if bits, ok := m.masks[m.cur]; ok {
			return bits, nil
		}
	}
	var bits []uint64
	if len(m.maskFIFO) >= maskCacheSize {
		old := m.maskFIFO[0]
		m.maskFIFO = append(m.maskFIFO[:0], m.maskFIFO[1:]...)
		bits = m.masks[old]
		delete(m.masks, old)
		clear(bits)
	} else {
		bits = make([]uint64, (m.v.Size()+63)/64)
	}
	m.walk(0, m.cur, bits)
	if m.err != nil {
		return nil, m.err
	}
	if m.complete(m.cur) {
		for i, w := range m.v.eog {
			bits[i] |= w
		}
	}
	m.masks[m.cur] = bits
	m.maskFIFO = append(m.maskFIFO, m.cur)
	return bits, nil
}

// walk marks in bits every token under trie node t that state s can take.
func (m *Matcher) walk(t int32, s int32, bits []uint64) {
	tn := m.v.trie[t]
	for c := tn.child; c < tn.child+tn.nchild; c++ {
		cn := &m.v.trie[c]
		ns := m.trans[int(s)<<8|int(cn.b)]
		if ns == transUnknown {
			ns = m.step(s, cn.b)
		}
		if ns < 0 {
			continue
		}
		for _, id := range m.v.tokIDs[cn.tok : cn.tok+cn.ntok] {
			bits[id>>6] |= 1 << (id & 63)
		}
		if cn.nchild == 0 {
			continue
		}
		if cn.bytes >= 0 && m.bulkAllowed(&m.v.subBytes[cn.bytes], ns) {
			// Every byte below keeps the grammar in ns: all allowed.
			for _, id := range m.v.tokIDs[cn.tok+cn.ntok : cn.subEnd] {
				bits[id>>6] |= 1 << (id & 63)
			}
			continue
		}
		m.walk(c, ns, bits)
	}
}

// stateLoops says which input keeps a state where it is: the ASCII bytes
// that lead back to it, and whether every non-ASCII character does.
type stateLoops struct {
	done     bool
	ascii    byteSet
	nonASCII bool
}

// bulkAllowed reports whether every token suffix summarized by sub keeps
// the grammar in state s (so all of them are allowed): the inside of a
// string is the common case. A suffix cut inside a character is fine since
// such a state allows every character.
func (m *Matcher) bulkAllowed(sub *subtreeBytes, s int32) bool {
	if m.states[s].need != 0 {
		return false
	}
	l := m.loops(s)
	if !sub.ascii.subsetOf(&l.ascii) {
		return false
	}
	return !sub.nonASCII || sub.validUTF8 && l.nonASCII
}

// loops returns what leads from state s back to s, computing it on first
// use.
func (m *Matcher) loops(s int32) *stateLoops {
	for int(s) >= len(m.loopSet) {
		m.loopSet = append(m.loopSet, stateLoops{})
	}
	if !m.loopSet[s].done {
		var l stateLoops
		for b := 0; b < 0x80; b++ {
			if m.step(s, byte(b)) == s {
				l.ascii.add(byte(b))
			}
		}
		// Every non-ASCII character leads back to s when each stack top
		// holds all of them or none (so they all act alike) and one does.
		uniform := true
		sp := m.sets[m.states[s].set]
		for _, sid := range m.setData[sp.start:sp.end] {
			if sid != acceptStack && m.g.classes[m.g.elems[m.nodes[sid].pos].id].nonASCII == classSome {
				uniform = false
			}
		}
		if uniform {
			if p := m.step(s, 0xC2); p >= 0 && m.step(p, 0x80) == s {
				l.nonASCII = true
			}
		}
		l.done = true
		// step may have grown the slice; index afresh.
		for int(s) >= len(m.loopSet) {
			m.loopSet = append(m.loopSet, stateLoops{})
		}
		m.loopSet[s] = l
	}
	return &m.loopSet[s]
}

// step returns the state after byte b from state s, or transDead.
func (m *Matcher) step(s int32, b byte) int32 {
	idx := int(s)<<8 | int(b)
	if t := m.trans[idx]; t != transUnknown {
		return t
	}
	t := m.computeStep(s, b)
	m.trans[idx] = t
	return t
}

func (m *Matcher) computeStep(s int32, b byte) int32 {
	st := m.states[s]
	if st.need == 0 {
		switch {
		case b < 0x80:
			return m.charStep(st.set, rune(b))
		case b&0xE0 == 0xC0 && b >= 0xC2:
			return m.partial(st.set, rune(b&0x1F), 1, 2)
		case b&0xF0 == 0xE0:
			return m.partial(st.set, rune(b&0x0F), 2, 3)
		case b&0xF8 == 0xF0 && b <= 0xF4:
			return m.partial(st.set, rune(b&0x07), 3, 4)
		}
		return transDead
	}
	if b&0xC0 != 0x80 {
		return transDead
	}
	val := rune(st.pval)<<6 | rune(b&0x3F)
	if st.need > 1 {
		return m.partial(st.set, val, st.need-1, st.size)
	}
	minVal := [...]rune{0, 0, 0x80, 0x800, 0x10000}[st.size]
	if val < minVal || val > maxRune || val >= 0xD800 && val <= 0xDFFF {
		return transDead // overlong, out of range or a surrogate
	}
	return m.charStep(st.set, val)
}

// partial returns the state holding a partial character, or transDead when
// no stack top can match any character that starts this way.
func (m *Matcher) partial(set int32, val rune, need, size int8) int32 {
	lo := val << (6 * uint(need))
	hi := lo | (1<<(6*uint(need)) - 1)
	lo = max(lo, [...]rune{0, 0, 0x80, 0x800, 0x10000}[size]) // no overlong forms
	hi = min(hi, maxRune)
	if lo > hi {
		return transDead
	}
	sp := m.sets[set]
	for _, sid := range m.setData[sp.start:sp.end] {
		if sid == acceptStack {
			continue
		}
		cls := &m.g.classes[m.g.elems[m.nodes[sid].pos].id]
		if cls.intersects(lo, hi) {
			return m.state(stateKey{set: set, pval: int32(val), need: need, size: size})
		}
	}
	return transDead
}

// charStep returns the state after code point cp from stack set set.
func (m *Matcher) charStep(set int32, cp rune) int32 {
	m.scratch = m.scratch[:0]
	clear(m.visited)
	sp := m.sets[set]
	for i := sp.start; i < sp.end; i++ {
		sid := m.setData[i]
		if sid == acceptStack {
			continue
		}
		n := m.nodes[sid]
		if m.g.classes[m.g.elems[n.pos].id].match(cp) {
			m.expand(n.pos+1, n.parent)
		}
	}
	if len(m.scratch) == 0 || m.err != nil {
		return transDead
	}
	return m.state(stateKey{set: m.internSet()})
}

// expand pushes onto m.scratch every stack reachable from continuing at pos
// with the given parent without consuming a character.
func (m *Matcher) expand(pos, parent int32) {
	for {
		e := m.g.elems[pos]
		switch e.kind {
		case elemChar:
			m.addStack(m.node(pos, parent))
			return
		case elemEnd:
			if parent < 0 {
				m.addStack(acceptStack)
				return
			}
			n := m.nodes[parent]
			pos, parent = n.pos, n.parent
		case elemRef:
			key := node{pos, parent}
			if _, ok := m.visited[key]; ok {
				return
			}
			m.visited[key] = struct{}{}
			ret := parent // a reference in tail position returns straight to parent
			if m.g.elems[pos+1].kind != elemEnd {
				ret = m.node(pos+1, parent)
			}
			for _, a := range m.g.rules[e.id].alts {
				m.expand(a, ret)
			}
			return
		}
	}
}

func (m *Matcher) addStack(id int32) {
	if slices.Contains(m.scratch, id) {
		return
	}
	if len(m.scratch) >= maxStackSet {
		if m.err == nil {
			m.err = &deadEnd{msg: fmt.Sprintf("more than %d parallel parses; the grammar is too ambiguous", maxStackSet)}
		}
		return
	}
	m.scratch = append(m.scratch, id)
}

// node returns the hash-consed index of node{pos, parent}.
func (m *Matcher) node(pos, parent int32) int32 {
	k := node{pos, parent}
	if id, ok := m.nodeIDs[k]; ok {
		return id
	}
	id := int32(len(m.nodes))
	m.nodes = append(m.nodes, k)
	m.nodeIDs[k] = id
	return id
}

// internSet sorts m.scratch and returns the id of that stack set.
func (m *Matcher) internSet() int32 {
	slices.Sort(m.scratch)
	var h maphash.Hash
	h.SetSeed(m.seed)
	for _, v := range m.scratch {
		var b [4]byte
		b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		h.Write(b[:])
	}
	key := h.Sum64()
	for _, id := range m.setIDs[key] {
		sp := m.sets[id]
		if slices.Equal(m.setData[sp.start:sp.end], m.scratch) {
			return id
		}
	}
	id := int32(len(m.sets))
	start := int32(len(m.setData))
	m.setData = append(m.setData, m.scratch...)
	m.sets = append(m.sets, span{start, int32(len(m.setData))})
	m.setIDs[key] = append(m.setIDs[key], id)
	return id
}

// state returns the id of state k, adding a row of unknown transitions for
// a new one.
func (m *Matcher) state(k stateKey) int32 {
	if id, ok := m.stateOf[k]; ok {
		return id
	}
	id := int32(len(m.states))
	m.states = append(m.states, k)
	m.stateOf[k] = id
	for i := 0; i < 256; i++ {
		m.trans = append(m.trans, transUnknown)
	}
	return id
}

// maybeCompact drops the automaton when it has grown past its limits and
// rebuilds the current state alone. It reports whether it did.
func (m *Matcher) maybeCompact() bool {
	if len(m.nodes) < m.limitNodes && len(m.states) < m.limitStates {
		return false
	}
	m.compact()
	return true
}

// compact rebuilds the automaton holding the current state alone.
func (m *Matcher) compact() {
	st := m.states[m.cur]
	sp := m.sets[st.set]
	var chains [][]int32
	for _, sid := range m.setData[sp.start:sp.end] {
		var chain []int32
		for n := sid; n >= 0; n = m.nodes[n].parent {
			chain = append(chain, m.nodes[n].pos)
		}
		if sid == acceptStack {
			chain = nil
		}
		chains = append(chains, chain)
	}
	isAccept := m.setData[sp.start] == acceptStack
	m.reset()
	m.scratch = m.scratch[:0]
	for i, chain := range chains {
		if i == 0 && isAccept {
			m.scratch = append(m.scratch, acceptStack)
			continue
		}
		parent := int32(-1)
		for j := len(chain) - 1; j >= 0; j-- {
			parent = m.node(chain[j], parent)
		}
		m.scratch = append(m.scratch, parent)
	}
	st.set = m.internSet()
	m.cur = m.state(st)
}
