package grammar

import (
	"bytes"
	"fmt"
	"sort"
	"unicode/utf8"
)

// trieNode is one node of the vocabulary's byte trie. Children of a node are
// contiguous in Vocab.trie and sorted by byte, so a walk touches memory in
// order.
type trieNode struct {
	child, nchild int32 // children: trie[child : child+nchild]
	tok, ntok     int32 // tokens whose bytes end here: tokIDs[tok : tok+ntok]
	subEnd        int32 // tokens in the whole subtree: tokIDs[tok : subEnd]
	bytes         int32 // index in Vocab.subBytes of the subtree's byte set, or -1
	b             byte  // the byte on the edge into this node
}

// byteSet is a set of byte values.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) subsetOf(t *byteSet) bool {
	return s[0]&^t[0] == 0 && s[1]&^t[1] == 0 && s[2]&^t[2] == 0 && s[3]&^t[3] == 0
}

// subtreeBytes summarizes the token suffixes below a trie node.
type subtreeBytes struct {
	ascii     byteSet // the ASCII bytes that occur
	nonASCII  bool    // some byte >= 0x80 occurs
	validUTF8 bool    // every suffix is valid UTF-8, its last character possibly cut short
}

// validTruncatedUTF8 reports whether b is valid UTF-8 except that its last
// character may be incomplete.
func validTruncatedUTF8(b []byte) bool {
	for len(b) > 0 {
		if !utf8.FullRune(b) {
			// An incomplete tail: valid if padding it could complete it.
			var buf [utf8.UTFMax]byte
			n := copy(buf[:], b)
			for _, fill := range []byte{0x80, 0xBF} {
				for i := n; i < utf8.UTFMax; i++ {
					buf[i] = fill
				}
				if r, size := utf8.DecodeRune(buf[:]); r != utf8.RuneError && size > n {
					return true
				}
			}
			return false
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		b = b[size:]
	}
	return true
}

// minBulkTokens is the subtree size from which a trie node records the set
// of bytes below it, letting the matcher allow the whole subtree at once
// when the grammar state loops on all those bytes (the inside of a string).
const minBulkTokens = 2

// Vocab is a tokenizer vocabulary prepared for grammar masking: the token
// byte strings and a byte trie over them. Build it once per model with
// NewVocab; it is immutable and safe for concurrent use by any number of
// matchers.
type Vocab struct {
	data   []byte  // all token bytes, concatenated
	off    []int32 // token i is data[off[i]:off[i+1]]
	eog    []uint64
	trie   []trieNode
	tokIDs []int32
	// subBytes describes, for large subtrees, the bytes on edges below a node.
	subBytes []subtreeBytes
}

// NewVocab builds a Vocab from the byte string of every token (index = token
// id) and the ids that end generation. A token with empty bytes (a special or
// control token) is never allowed by a grammar unless it is an
// end-of-generation token, which is allowed exactly where the grammar is
// complete. Give a special token its text instead of empty bytes to let
// grammars produce it (for example Mistral's "[TOOL_CALLS]").
func NewVocab(tokens [][]byte, eog []int32) (*Vocab, error) {
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("grammar: NewVocab: empty vocabulary")
	}
	if n >= 1<<31-1 {
		return nil, fmt.Errorf("grammar: NewVocab: vocabulary of %d tokens too large", n)
	}
	v := &Vocab{off: make([]int32, n+1), eog: make([]uint64, (n+63)/64)}
	total := 0
	for _, t := range tokens {
		total += len(t)
	}
	if total >= 1<<31 {
		return nil, fmt.Errorf("grammar: NewVocab: %d bytes of token text too large", total)
	}
	v.data = make([]byte, 0, total)
	for i, t := range tokens {
		v.data = append(v.data, t...)
		v.off[i+1] = int32(len(v.data))
	}
	for _, id := range eog {
		if id < 0 || int(id) >= n {
			return nil, fmt.Errorf("grammar: NewVocab: end-of-generation id %d outside vocabulary of %d", id, n)
		}
		v.eog[id>>6] |= 1 << (id & 63)
	}
	ids := make([]int32, 0, n)
	for i := range tokens {
		if len(tokens[i]) > 0 && !v.IsEOG(int32(i)) {
			ids = append(ids, int32(i))
		}
	}
	sort.Slice(ids, func(a, b int) bool {
		c := bytes.Compare(v.Token(ids[a]), v.Token(ids[b]))
		return c < 0 || c == 0 && ids[a] < ids[b]
	})
	v.tokIDs = ids
	v.buildTrie()
	return v, nil
}

// buildTrie lays the trie out breadth-first over the sorted token ids: the
// tokens under a node form a contiguous run of tokIDs, those ending at the
// node first.
func (v *Vocab) buildTrie() {
	type pending struct {
		node   int32
		lo, hi int // run of tokIDs under the node
		depth  int
	}
	v.trie = append(v.trie, trieNode{})
	queue := []pending{{0, 0, len(v.tokIDs), 0}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		i := p.lo
		for i < p.hi && len(v.Token(v.tokIDs[i])) == p.depth {
			i++
		}
		v.trie[p.node].tok, v.trie[p.node].ntok = int32(p.lo), int32(i-p.lo)
		v.trie[p.node].subEnd = int32(p.hi)
		v.trie[p.node].bytes = -1
		if p.hi-p.lo >= minBulkTokens {
			v.trie[p.node].bytes = int32(len(v.subBytes))
			var set subtreeBytes
			set.validUTF8 = true
			for _, id := range v.tokIDs[p.lo:p.hi] {
				suffix := v.Token(id)[p.depth:]
				for _, c := range suffix {
					if c < 0x80 {
						set.ascii.add(c)
					} else {
						set.nonASCII = true
					}
				}
				if set.validUTF8 && !validTruncatedUTF8(suffix) {
					set.validUTF8 = false
				}
			}
			v.subBytes = append(v.subBytes, set)
		}
		v.trie[p.node].child = int32(len(v.trie))
		for i < p.hi {
			b := v.Token(v.tokIDs[i])[p.depth]
			j := i + 1
			for j < p.hi && v.Token(v.tokIDs[j])[p.depth] == b {
				j++
			}
			child := int32(len(v.trie))
			v.trie = append(v.trie, trieNode{b: b})
			queue = append(queue, pending{child, i, j, p.depth + 1})
			i = j
		}
		v.trie[p.node].nchild = int32(len(v.trie)) - v.trie[p.node].child
	}
}

// Size returns the number of tokens.
func (v *Vocab) Size() int { return len(v.off) - 1 }

// Token returns the bytes of token id. The slice must not be modified.
func (v *Vocab) Token(id int32) []byte { return v.data[v.off[id]:v.off[id+1]] }

// IsEOG reports whether id ends generation.
func (v *Vocab) IsEOG(id int32) bool { return v.eog[id>>6]&(1<<(id&63)) != 0 }

// TrieNodes returns the number of nodes in the byte trie (root included).
func (v *Vocab) TrieNodes() int { return len(v.trie) }
