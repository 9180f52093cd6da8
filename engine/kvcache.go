package engine

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrKVFull is the error of a forward pass or a reservation that needs a KV
// page when every page of the pool is held by a sequence (none is free and
// no cached prefix can be evicted).
var ErrKVFull = errors.New("engine: the KV cache has no free page")

// kvCache is the host side of the paged KV cache: which pages of the pool
// each sequence slot uses (its page table), how many holders each page has,
// and the prefix tree of cached pages. The device pools (GPUModel, CPUModel)
// hold the keys and values; this decides where they go.
//
// A page is held by the slots whose tables name it and by the prefix tree
// when a node owns it. Holders of a page see the same keys and values, so
// a page is written only by a slot that holds it alone: a slot about to
// write a shared page copies it first (copy-on-write, queued in copies for
// the next forward pass to record before its kernels).
type kvCache struct {
	pageSize int
	pages    int
	tableLen int // page-table entries per slot: ceil(ctx / pageSize)

	ref    []int32   // holders of each page
	inTree []bool    // whether the prefix tree holds the page
	free   []int32   // stack of pages nobody holds
	tables [][]int32 // each slot's pages, position p in tables[s][p/pageSize]
	dirty  []bool    // slots whose device table row is stale
	copies []pageCopy
	cached int // pages held by the tree alone (evictable)
	// treeTokens is how many positions of each page the tree caches;
	// cachedTokens sums it over the pages the tree holds alone.
	treeTokens   []int32
	cachedTokens int

	tree radixTree

	// rec, for a hybrid model (Options.Recurrent), is how many positions
	// each slot's recurrent state holds: a row at position p > 0 must
	// continue it (p == rec[slot]); position 0 starts it afresh. The
	// state cannot be cut back, so a slot cut below rec holds none (0).
	// stateCopies are the pending copies of whole states between slots
	// (n/best_of followers), made before the next pass.
	rec         []int
	stateCopies []pageCopy
	// ckpts are the recurrent-state checkpoints (a hybrid model's prefix
	// cache): checkpoint i is state row slots+i of the state buffers, the
	// state after its tokens. clock orders their use (LRU eviction).
	ckpts []checkpoint
	clock int64
	// stateBytes is one sequence's recurrent state (KVStats.StateBytes).
	stateBytes int64
}

// checkpoint is one saved recurrent state: that of a sequence of tokens.
type checkpoint struct {
	tokens []int32 // nil: free
	used   int64
	scope  string // the cache scope that may resume from it ("": every one)
}

// pageCopy is a pending copy-on-write: page dst gets page src's contents.
type pageCopy struct{ dst, src int32 }

func newKVCache(pages, pageSize, slots, ctx int) *kvCache {
	c := &kvCache{pageSize: pageSize, pages: pages, tableLen: (ctx + pageSize - 1) / pageSize,
		ref: make([]int32, pages), inTree: make([]bool, pages), free: make([]int32, pages), treeTokens: make([]int32, pages),
		tables: make([][]int32, slots), dirty: make([]bool, slots), copies: make([]pageCopy, 0, slots)}
	for i := range c.free {
		c.free[i] = int32(pages - 1 - i) // pop from the end: page 0 first
	}
	for s := range c.tables {
		c.tables[s] = make([]int32, 0, c.tableLen)
		c.dirty[s] = true
	}
	c.tree.init(pageSize)
	return c
}

// KVStats describe the pages of the KV pool.
type KVStats struct {
	PageSize int // positions per page
	Pages    int // pages in the pool
	Used     int // pages some sequence holds
	Cached   int // pages only the prefix cache holds (evicted when needed)
	Free     int // pages nobody holds
	// CachedTokens is the positions of the Cached pages that hold tokens.
	CachedTokens int
	// A hybrid model's recurrent states: StateBytes is one sequence's
	// (every recurrent layer's), reserved for each slot and each of the
	// Checkpoints, of which CheckpointsUsed hold a state.
	StateBytes                   int64
	Checkpoints, CheckpointsUsed int
}

func (c *kvCache) stats() KVStats {
	f := len(c.free)
	st := KVStats{PageSize: c.pageSize, Pages: c.pages, Used: c.pages - f - c.cached, Cached: c.cached, Free: f, CachedTokens: c.cachedTokens,
		StateBytes: c.stateBytes, Checkpoints: len(c.ckpts)}
	for _, k := range c.ckpts {
		if k.tokens != nil {
			st.CheckpointsUsed++
		}
	}
	return st
}

// available is the number of pages an allocation can get: free ones and
// cached ones it may evict.
func (c *kvCache) available() int { return len(c.free) + c.cached }

// pagesFor is the number of pages n positions span.
func (c *kvCache) pagesFor(n int) int { return (n + c.pageSize - 1) / c.pageSize }

func (c *kvCache) hold(p int32) {
	if c.ref[p] == 1 && c.inTree[p] {
		c.cached-- // the tree no longer holds it alone
		c.cachedTokens -= int(c.treeTokens[p])
	}
	c.ref[p]++
}

func (c *kvCache) drop(p int32) {
	c.ref[p]--
	switch {
	case c.ref[p] < 0:
		panic(fmt.Sprintf("BUG: engine: KV page %d dropped more often than held", p))
	case c.ref[p] == 0:
		c.free = append(c.free, p)
	case c.ref[p] == 1 && c.inTree[p]:
		c.cached++
		c.cachedTokens += int(c.treeTokens[p])
	}
}

// alloc returns a page held once by the caller, evicting the least recently
// used cached page when none is free.
func (c *kvCache) alloc() (int32, error) {
	if len(c.free) == 0 && !c.tree.evict(c) {
		return -1, ErrKVFull
	}
	p := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.ref[p] = 1
	return p, nil
}

// reserve makes positions from..to-1 of slot writable: pages past the
// slot's table are allocated, shared ones copied (copy-on-write). On
// ErrKVFull the pages reserved so far stay (truncate gives them back).
func (c *kvCache) reserve(slot, from, to int) error {
	if to <= from {
		return nil
	}
	t := c.tables[slot]
	// Pages between the slot's last and from are reserved too: a row may
	// skip positions (their keys are undefined but mapped).
	for i := min(from/c.pageSize, len(t)); i < c.pagesFor(to); i++ {
		switch {
		case i >= len(t):
			p, err := c.alloc()
			if err != nil {
				c.tables[slot] = t
				return err
			}
			t = append(t, p)
		case c.ref[t[i]] > 1:
			p, err := c.alloc()
			if err != nil {
				c.tables[slot] = t
				return err
			}
			c.copies = append(c.copies, pageCopy{dst: p, src: t[i]})
			c.drop(t[i])
			t[i] = p
		default:
			continue
		}
		c.dirty[slot] = true
	}
	c.tables[slot] = t
	return nil
}

// reserveRows reserves the page of every row of b.
func (c *kvCache) reserveRows(b Batch) error {
	for i, s := range b.Slots {
		if err := c.reserve(int(s), int(b.Pos[i]), int(b.Pos[i])+1); err != nil {
			return err
		}
	}
	return nil
}

// need returns how many pages reserve(slot, from, to) would take.
func (c *kvCache) need(slot, from, to int) int {
	if to <= from {
		return 0
	}
	t, n := c.tables[slot], 0
	for i := min(from/c.pageSize, len(t)); i < c.pagesFor(to); i++ {
		if i >= len(t) || c.ref[t[i]] > 1 {
			n++
		}
	}
	return n
}

// truncate keeps the pages of slot's first n positions.
func (c *kvCache) truncate(slot, n int) {
	t := c.tables[slot]
	keep := c.pagesFor(n)
	if keep >= len(t) {
		return
	}
	for _, p := range t[keep:] {
		c.drop(p)
	}
	c.tables[slot] = t[:keep]
	c.dirty[slot] = true
}

// share makes slot dst hold the pages of slot src's first n positions (no
// copies; a later write to a shared page copies it).
func (c *kvCache) share(dst, src, n int) {
	c.truncate(dst, 0)
	for _, p := range c.tables[src][:c.pagesFor(n)] {
		c.hold(p)
		c.tables[dst] = append(c.tables[dst], p)
	}
	c.dirty[dst] = true
}

// attach makes slot (emptied first) hold the longest prefix of tokens the
// tree caches and returns its length in positions.
func (c *kvCache) attach(slot int, tokens []int32, scope CacheScope) int {
	c.truncate(slot, 0)
	n := c.tree.match(c, tokens, scope, func(p int32) {
		c.hold(p)
		c.tables[slot] = append(c.tables[slot], p)
	})
	c.dirty[slot] = true
	return n
}

// publish leaves the pages of slot that hold tokens (positions 0..
// len(tokens)-1 of the slot) in the prefix tree: its full pages, and the
// last partial one too when partial is set (a sequence that ends).
func (c *kvCache) publish(slot int, tokens []int32, partial bool, scope CacheScope) {
	n := len(tokens)
	if !partial {
		n -= n % c.pageSize
	}
	c.tree.insert(c, tokens[:n], c.tables[slot], scope)
}

// tableRow writes slot's device page-table row into dst (tableLen
// entries, -1 past its pages).
func (c *kvCache) tableRow(slot int, dst []int32) {
	n := copy(dst, c.tables[slot])
	for i := n; i < len(dst); i++ {
		dst[i] = -1
	}
}

// tokenKey views tokens as a string of their bytes (no copy) for map
// lookups; the caller must not keep it.
func tokenKey(tokens []int32) string {
	if len(tokens) == 0 {
		return ""
	}
	return unsafe.String((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens))
}

// radixTree is the prefix cache: a tree whose nodes each own one KV page
// and the tokens whose keys and values it holds (pageSize of them, or fewer
// in a leaf left by a sequence that ended mid-page). A node's path from the
// root spells the token prefix its page continues, so a prompt finds its
// cached prefix page by page. Keys are arbitrary int32 ids (image rows use
// negative pseudo-ids). Nodes no sequence uses are evicted least recently
// used first, leaves before their parents. Each node belongs to a cache
// scope (CacheScope: "" public): a prompt walks only the nodes of its own
// scope and the public ones, so one scope's cached prefixes neither speed
// up nor show in another's prompts.
type radixTree struct {
	pageSize int
	root     radixNode
	nodes    []*radixNode // every node but the root, for eviction
	clock    uint64
}

type radixNode struct {
	parent   *radixNode
	tokens   []int32 // the page's tokens; the parent's key of this node is {scope, tokenKey(tokens)}
	scope    string  // the cache scope the node belongs to ("": public)
	page     int32
	children map[radixKey]*radixNode
	used     uint64 // the tree's clock when a prompt last matched it
	at       int    // index in radixTree.nodes
}

// radixKey names a child: its scope and its tokens (tokenKey).
type radixKey struct{ scope, tokens string }

func (t *radixTree) init(pageSize int) {
	t.pageSize = pageSize
	t.root = radixNode{page: -1, children: map[radixKey]*radixNode{}}
}

// child returns node's child holding the page seg, ending at position
// end, that scope may reuse: its own, else a public one inside the
// scope's public part.
func (node *radixNode) child(seg []int32, end int, scope CacheScope) *radixNode {
	k := tokenKey(seg)
	if next := node.children[radixKey{scope.Key, k}]; next != nil || scope.Key == "" || !scope.public(end) {
		return next
	}
	return node.children[radixKey{"", k}]
}

// reusable reports whether scope may reuse node's page, which starts at
// position from.
func (node *radixNode) reusable(from int, scope CacheScope) bool {
	return node.scope == scope.Key || node.scope == "" && scope.public(from+len(node.tokens))
}

// match walks tokens down the tree, calls take with each page of the
// longest cached prefix in order, and returns the prefix length: whole
// pages, then possibly part of one (the first positions of a page whose
// tokens go on differently, or a partial leaf), which the caller copies
// before writing.
func (t *radixTree) match(c *kvCache, tokens []int32, scope CacheScope, take func(int32)) int {
	t.clock++
	n, node := 0, &t.root
	for len(tokens)-n >= t.pageSize {
		next := node.child(tokens[n:n+t.pageSize], n+t.pageSize, scope)
		if next == nil {
			break
		}
		next.used = t.clock
		take(next.page)
		n += t.pageSize
		node = next
	}
	// The child sharing most first tokens with the rest.
	var best *radixNode
	bestN := 0
	rest := tokens[n:]
	for _, ch := range node.children {
		if !ch.reusable(n, scope) {
			continue
		}
		k := 0
		for k < len(ch.tokens) && k < len(rest) && ch.tokens[k] == rest[k] {
			k++
		}
		if k > bestN {
			best, bestN = ch, k
		}
	}
	if best != nil {
		best.used = t.clock
		take(best.page)
		n += bestN
	}
	return n
}

// insert adds the pages holding tokens (pages[i] holds tokens
// [i*pageSize, (i+1)*pageSize)) that the tree lacks; a page whose tokens
// the tree already caches (in another page) is left to its holder.
func (t *radixTree) insert(c *kvCache, tokens []int32, pages []int32, scope CacheScope) {
	t.clock++
	node := &t.root
	for i := 0; i*t.pageSize < len(tokens); i++ {
		end := min((i+1)*t.pageSize, len(tokens))
		seg, sc := tokens[i*t.pageSize:end], scope.pageScope(end)
		next := node.children[radixKey{sc, tokenKey(seg)}]
		if next == nil {
			if c.inTree[pages[i]] {
				// Already cached under another key: a partial leaf this
				// slot published (a slot writes no page the tree holds
				// without copying it first). Leave it.
				return
			}
			next = &radixNode{parent: node, tokens: append([]int32(nil), seg...), scope: sc, page: pages[i], at: len(t.nodes)}
			if len(seg) == t.pageSize {
				next.children = map[radixKey]*radixNode{}
			}
			node.children[radixKey{sc, tokenKey(next.tokens)}] = next
			t.nodes = append(t.nodes, next)
			c.hold(next.page) // before it counts as the tree's
			c.inTree[next.page] = true
			c.treeTokens[next.page] = int32(len(seg))
		}
		next.used = t.clock
		if next.children == nil {
			return // a partial leaf ends the path
		}
		node = next
	}
}

// evict frees the least recently used page that only the tree holds,
// among the leaves; false if there is none. When every such page is an
// inner node (a slot that computed a cached prefix again holds its own
// copy, and its later pages hang below the cached one), the least recently
// used of those goes with its subtree: the tree lets go of every page
// there, freeing those nobody else holds.
func (t *radixTree) evict(c *kvCache) bool {
	var leaf, inner *radixNode
	for _, n := range t.nodes {
		if c.ref[n.page] != 1 {
			continue
		}
		if len(n.children) == 0 {
			if leaf == nil || n.used < leaf.used {
				leaf = n
			}
		} else if inner == nil || n.used < inner.used {
			inner = n
		}
	}
	switch {
	case leaf != nil:
		t.remove(c, leaf)
	case inner != nil:
		t.remove(c, inner)
	default:
		return false
	}
	return true
}

// remove takes n and its subtree out of the tree, dropping the tree's
// reference to their pages.
func (t *radixTree) remove(c *kvCache, n *radixNode) {
	for _, ch := range n.children {
		t.remove(c, ch)
	}
	delete(n.parent.children, radixKey{n.scope, tokenKey(n.tokens)})
	last := t.nodes[len(t.nodes)-1]
	t.nodes[n.at], last.at = last, n.at
	t.nodes = t.nodes[:len(t.nodes)-1]
	p := n.page
	if c.ref[p] == 1 { // counted as cached until now
		c.cached--
		c.cachedTokens -= int(c.treeTokens[p])
	}
	c.inTree[p], c.treeTokens[p] = false, 0
	c.ref[p]--
	if c.ref[p] == 0 {
		c.free = append(c.free, p)
	}
}
