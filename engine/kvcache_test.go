package engine

import (
	"errors"
	"fmt"
	"testing"
)

// seqTokens returns n tokens from start, negative ids included (image rows
// are keyed by pseudo-ids below zero).
func seqTokens(start, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(start+i) - 5
	}
	return t
}

// checkPool checks the pool's invariants: every page is free, or held as
// many times as tables and tree nodes name it, and the counts add up.
func checkPool(t *testing.T, c *kvCache) {
	t.Helper()
	held := make([]int32, c.pages)
	for _, tb := range c.tables {
		for _, p := range tb {
			held[p]++
		}
	}
	inTree := make([]bool, c.pages)
	for _, n := range c.tree.nodes {
		held[n.page]++
		if inTree[n.page] {
			t.Fatalf("page %d owned by two tree nodes", n.page)
		}
		inTree[n.page] = true
	}
	isFree := make([]bool, c.pages)
	for _, p := range c.free {
		if isFree[p] {
			t.Fatalf("page %d free twice", p)
		}
		isFree[p] = true
	}
	cached, cachedTok := 0, 0
	for p := range c.pages {
		if held[p] != c.ref[p] {
			t.Fatalf("page %d: %d holders, ref %d", p, held[p], c.ref[p])
		}
		if isFree[p] != (held[p] == 0) {
			t.Fatalf("page %d: free %v with %d holders", p, isFree[p], held[p])
		}
		if inTree[p] != c.inTree[p] {
			t.Fatalf("page %d: in tree %v, flag %v", p, inTree[p], c.inTree[p])
		}
		if inTree[p] && held[p] == 1 {
			cached++
			cachedTok += int(c.treeTokens[p])
		}
	}
	st := c.stats()
	if st.Cached != cached || st.CachedTokens != cachedTok || st.Free != len(c.free) || st.Used+st.Cached+st.Free != st.Pages {
		t.Fatalf("stats %+v; want %d cached pages of %d tokens", st, cached, cachedTok)
	}
}

func TestKVCacheSharing(t *testing.T) {
	const ps = 4
	c := newKVCache(12, ps, 3, 40)
	a := seqTokens(0, 10) // pages 0, 1 full, 2 holds 2 tokens
	if err := c.reserve(0, 0, len(a)); err != nil {
		t.Fatal(err)
	}
	if got := c.stats(); got.Used != 3 || got.Free != 9 {
		t.Fatalf("after reserving 10 positions: %+v, want 3 used, 9 free", got)
	}
	c.publish(0, a, false, CacheScope{}) // the two full pages
	checkPool(t, c)
	if st := c.stats(); st.Cached != 0 {
		t.Fatalf("pages a running slot holds count as cached: %+v", st)
	}

	// A prompt sharing 6 tokens takes page 0 whole and page 1 in part.
	b := append(append([]int32(nil), a[:6]...), seqTokens(100, 5)...)
	if n := c.attach(1, b[:len(b)-1], CacheScope{}); n != 6 {
		t.Fatalf("attach = %d positions, want 6 (a page and 2 tokens)", n)
	}
	if c.tables[1][0] != c.tables[0][0] || c.tables[1][1] != c.tables[0][1] {
		t.Fatalf("slot 1 pages %v, want slot 0's first two %v", c.tables[1], c.tables[0][:2])
	}
	// Writing position 6 copies page 1 (shared) but not page 0.
	if need := c.need(1, 6, len(b)); need != 2 {
		t.Fatalf("need(6..11) = %d, want 2 (a copy of page 1, a new page 2)", need)
	}
	shared := c.tables[1][1]
	if err := c.reserve(1, 6, len(b)); err != nil {
		t.Fatal(err)
	}
	if len(c.copies) != 1 || c.copies[0].src != shared || c.copies[0].dst != c.tables[1][1] || c.tables[1][1] == shared {
		t.Fatalf("copies %v, slot 1 pages %v: want one copy of page %d into slot 1's new page", c.copies, c.tables[1], shared)
	}
	if c.tables[1][0] != c.tables[0][0] {
		t.Fatal("the unwritten shared page was copied")
	}
	checkPool(t, c)

	// Slots 0 and 1 end: their pages stay cached; nothing is free'd twice.
	c.publish(0, a, true, CacheScope{})
	c.truncate(0, 0)
	c.publish(1, b, true, CacheScope{})
	c.truncate(1, 0)
	checkPool(t, c)
	if st := c.stats(); st.Used != 0 || st.Cached != 5 || st.CachedTokens != 4+4+2+4+3 {
		t.Fatalf("after both ended: %+v, want 5 cached pages of 17 tokens", st)
	}
	// The whole of b is found again, its last page partial.
	if n := c.attach(2, b, CacheScope{}); n != len(b) {
		t.Fatalf("attach(b) = %d, want %d", n, len(b))
	}
	c.truncate(2, 0)
	checkPool(t, c)
}

func TestKVCacheEviction(t *testing.T) {
	const ps = 2
	c := newKVCache(6, ps, 2, 20)
	old, recent := seqTokens(0, 4), seqTokens(50, 4)
	for i, toks := range [][]int32{old, recent} {
		if err := c.reserve(0, 0, 4); err != nil {
			t.Fatal(err)
		}
		c.publish(0, toks, true, CacheScope{})
		c.truncate(0, 0)
		checkPool(t, c)
		if st := c.stats(); st.Cached != 2*(i+1) {
			t.Fatalf("after sequence %d: %+v", i, st)
		}
	}
	// Six positions need three pages: 2 free, then the least recently
	// used leaf (old's second page), not recent's.
	if err := c.reserve(1, 0, 6); err != nil {
		t.Fatal(err)
	}
	checkPool(t, c)
	if n, m := peekPrefix(c, old), peekPrefix(c, recent); n != 2 || m != 4 {
		t.Errorf("cached: %d positions of the old prefix, %d of the recent one; want 2 and 4", n, m)
	}
	// Another page evicts old's first page (a leaf now).
	if err := c.reserve(1, 6, 8); err != nil {
		t.Fatal(err)
	}
	if n, m := peekPrefix(c, old), peekPrefix(c, recent); n != 0 || m != 4 {
		t.Errorf("cached: %d positions of the old prefix, %d of the recent one; want 0 and 4", n, m)
	}
	// Using a prefix makes it recent: recent's first page is matched, so
	// its second goes first.
	if n := c.attach(0, recent[:2], CacheScope{}); n != 2 {
		t.Fatalf("attach(recent[:2]) = %d", n)
	}
	c.truncate(0, 0)
	if err := c.reserve(1, 8, 10); err != nil {
		t.Fatal(err)
	}
	if m := peekPrefix(c, recent); m != 2 {
		t.Errorf("cached: %d positions of the recent prefix, want its first page, 2", m)
	}
	// Its last page goes last; then the pool is full.
	if err := c.reserve(1, 10, 12); err != nil {
		t.Fatal(err)
	}
	if err := c.reserve(1, 12, 13); !errors.Is(err, ErrKVFull) {
		t.Fatalf("reserve past the pool = %v, want ErrKVFull", err)
	}
	checkPool(t, c)
	if st := c.stats(); st.Used != 6 || st.Free != 0 || st.Cached != 0 {
		t.Fatalf("full pool: %+v", st)
	}
}

// peekPrefix is the length of the prefix of tokens that the tree holds in
// whole nodes, found without touching its clock.
func peekPrefix(c *kvCache, tokens []int32) int {
	n, node := 0, &c.tree.root
	for node.children != nil {
		var next *radixNode
		for _, ch := range node.children {
			if len(ch.tokens) <= len(tokens)-n && fmt.Sprint(ch.tokens) == fmt.Sprint(tokens[n:n+len(ch.tokens)]) {
				next = ch
			}
		}
		if next == nil {
			break
		}
		n += len(next.tokens)
		node = next
	}
	return n
}

// TestKVCacheArbitraryKeys: prefixes of any int32 ids, extremes included,
// are told apart and found again.
func TestKVCacheArbitraryKeys(t *testing.T) {
	const ps = 2
	c := newKVCache(16, ps, 2, 32)
	prompts := [][]int32{
		{-1 << 31, -7, 3, 1<<31 - 1},
		{-1 << 31, -7, 3, 0},
		{-1 << 31, -8, 3, 1<<31 - 1},
		{0, 0, 0, 0},
	}
	for _, p := range prompts {
		if err := c.reserve(0, 0, len(p)); err != nil {
			t.Fatal(err)
		}
		c.publish(0, p, true, CacheScope{})
		c.truncate(0, 0)
	}
	checkPool(t, c)
	for i, p := range prompts {
		if n := c.attach(1, p, CacheScope{}); n != len(p) {
			t.Errorf("prompt %d %v: %d positions cached, want %d", i, p, n, len(p))
		}
		c.truncate(1, 0)
	}
	// 1 + 3 full pages plus the partial match of the second page of the
	// first two prompts (3, x): 2 + 1.
	if n := c.attach(1, []int32{-1 << 31, -7, 3, 5}, CacheScope{}); n != 3 {
		t.Errorf("a prompt sharing 3 tokens: %d cached, want 3", n)
	}
	c.truncate(1, 0)
	checkPool(t, c)
	if got, want := fmt.Sprint(c.stats().Cached), fmt.Sprint(7); got != want {
		t.Errorf("cached pages %s, want %s (the first page shared by three prompts)", got, want)
	}
}

// TestKVCacheEvictInner: a slot that computed a cached prefix again holds
// its own copy of that page, and its later pages hang below the cached
// node; when that cached inner page is the only one the tree holds alone,
// eviction takes it with its subtree, and the slot keeps its pages.
func TestKVCacheEvictInner(t *testing.T) {
	const ps = 2
	c := newKVCache(5, ps, 2, 20)
	a := seqTokens(0, 4)
	if err := c.reserve(0, 0, 2); err != nil {
		t.Fatal(err)
	}
	c.publish(0, a[:2], false, CacheScope{}) // node X: a[0:2] in slot 0's page
	c.truncate(0, 0)                         // X is cached only
	// Slot 1 computes a[0:4] itself (pages of its own) and publishes:
	// a[2:4] goes below X, held by slot 1 and the tree.
	if err := c.reserve(1, 0, 4); err != nil {
		t.Fatal(err)
	}
	c.publish(1, a, false, CacheScope{})
	checkPool(t, c)
	if st := c.stats(); st.Cached != 1 || st.Free != 2 {
		t.Fatalf("%+v, want 1 cached (X), 2 free", st)
	}
	// Three more pages: 2 free, then X must go, subtree and all.
	if err := c.reserve(0, 0, 6); err != nil {
		t.Fatalf("reserve with only an inner node evictable: %v", err)
	}
	checkPool(t, c)
	if len(c.tree.nodes) != 0 || len(c.tables[1]) != 2 {
		t.Fatalf("tree has %d nodes, slot 1 %d pages; want 0 and 2", len(c.tree.nodes), len(c.tables[1]))
	}
}

// TestKVCacheScopes: a prompt reuses only the cached pages of its own
// cache scope and the public ones (the pages inside CacheScope.Public),
// so one scope's prompts neither match nor reveal another's.
func TestKVCacheScopes(t *testing.T) {
	const ps = 4
	c := newKVCache(16, ps, 3, 40)
	shared := seqTokens(0, 8) // two pages every scope may reuse
	secret := append(append([]int32(nil), shared...), seqTokens(500, 6)...)
	a := CacheScope{Key: "a", Public: len(shared)}
	if err := c.reserve(0, 0, len(secret)); err != nil {
		t.Fatal(err)
	}
	c.publish(0, secret, true, a)
	aPage := c.tables[0][2]
	c.truncate(0, 0)
	checkPool(t, c)

	// Scope b probing the secret gets the public pages only.
	b := CacheScope{Key: "b", Public: len(shared)}
	if n := c.attach(1, secret, b); n != len(shared) {
		t.Fatalf("scope b reuses %d positions of a's prompt, want the %d public ones", n, len(shared))
	}
	// Without the public prefix marked, nothing.
	if n := c.attach(1, secret, CacheScope{Key: "b"}); n != 0 {
		t.Fatalf("scope b reuses %d positions with nothing public, want 0", n)
	}
	// The zero scope is a scope of its own too.
	if n := c.attach(1, secret, CacheScope{}); n != len(shared) {
		t.Fatalf("the zero scope reuses %d positions, want the %d public ones", n, len(shared))
	}
	// Scope a reuses all of it.
	if n := c.attach(1, secret, a); n != len(secret) {
		t.Fatalf("scope a reuses %d positions of its own prompt, want %d", n, len(secret))
	}
	c.truncate(1, 0)
	// b's own copy of the same prompt lives beside a's, under the same
	// public pages, and each scope finds its own.
	if err := c.reserve(2, 0, len(secret)); err != nil {
		t.Fatal(err)
	}
	c.publish(2, secret, true, b)
	c.truncate(2, 0)
	checkPool(t, c)
	if n := c.attach(1, secret, b); n != len(secret) || c.tables[1][2] == aPage {
		t.Fatalf("scope b reuses %d positions (pages %v), want all %d in its own pages", n, c.tables[1], len(secret))
	}
	c.truncate(1, 0)
	checkPool(t, c)
}

// TestCheckpointScopes: a hybrid model's recurrent-state checkpoints obey
// the cache scopes as the pages do: a scope resumes from its own
// checkpoints and from public ones inside its public part only.
func TestCheckpointScopes(t *testing.T) {
	const ps, slots = 4, 2
	c := newKVCache(16, ps, slots, 40)
	c.rec, c.ckpts = make([]int, slots), make([]checkpoint, 2)
	b := newBlocks(c, slots)
	shared := seqTokens(0, 8)
	secret := append(append([]int32(nil), shared...), seqTokens(500, 8)...)
	a := CacheScope{Key: "a", Public: len(shared)}
	// Slot 0, in scope a, holds the secret, checkpointed at the end of the
	// public part and at its end.
	b.attachScoped(0, nil, a)
	if err := b.Reserve(0, 0, len(secret)); err != nil {
		t.Fatal(err)
	}
	b.lens[0], c.rec[0] = len(shared), len(shared)
	b.Checkpoint(0, shared)
	b.lens[0], c.rec[0] = len(secret), len(secret)
	b.Checkpoint(0, secret)
	b.CachePrefix(0, secret, true)
	b.Truncate(0, 0)
	for _, tc := range []struct {
		scope CacheScope
		want  int
	}{
		{CacheScope{Key: "b", Public: len(shared)}, len(shared)},
		{CacheScope{Key: "b"}, 0},
		{a, len(secret)},
	} {
		if n := b.attachScoped(1, secret, tc.scope); n != tc.want {
			t.Errorf("scope %+v resumes from %d positions of a's prompt, want %d", tc.scope, n, tc.want)
		}
		b.Truncate(1, 0)
	}
}
