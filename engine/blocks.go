package engine

import (
	"fmt"
	"slices"
)

// Blocks owns the state of a model's sequence slots between forward
// passes: each slot's length (positions 0..Len-1 of the slot hold one
// sequence's keys and values) and, for decoders, the bookkeeping of the KV
// page pool (kvCache: each slot's page table, shared pages, the prefix
// cache). The GPUModel sizes the pool (it knows the device's memory) and
// reads the page tables from it in each pass; every change between passes
// goes through Blocks: Model.ForwardInto advances the lengths of the slots
// a batch writes, the scheduler admits, extends and releases sequences.
//
// Its methods are used from one goroutine at a time, never beside a
// forward pass (the scheduler's goroutine, or the caller of Model's
// methods).
type Blocks struct {
	kv   *kvCache // nil for encoders, which keep no cache
	lens []int
	next []int // advance's scratch for the lengths after a batch
	// recNext is advance's scratch for the recurrent states' lengths
	// after a batch (kvCache.rec).
	recNext []int
	// scopes is the cache scope of each slot's sequence (Admission.Scope):
	// what the slot publishes to the prefix cache is reused only there.
	scopes []CacheScope
}

// CacheScope confines the reuse of prefix-cache pages: a sequence reuses
// only the pages that sequences of the same Key published, and the public
// ones. The pages of a sequence's first Public positions (whole pages, or
// a partial last page inside them) are public, reused by every scope; the
// caller decides what is public (vkllm serve --cache-share: a prefix the
// operator names). The zero CacheScope is one scope, so with every
// sequence in it everything is shared.
type CacheScope struct {
	Key    string
	Public int
}

// public reports whether a page ending at position to (exclusive) of a
// sequence in scope s is public.
func (s CacheScope) public(to int) bool { return s.Key == "" || to <= s.Public }

// pageScope is the key the prefix tree files a page of positions
// [.., to) under: "" for a public page, else the scope's key.
func (s CacheScope) pageScope(to int) string {
	if s.public(to) {
		return ""
	}
	return s.Key
}

// newBlocks returns the slot state of slots sequences over the page pool
// kv (nil: none).
func newBlocks(kv *kvCache, slots int) *Blocks {
	return &Blocks{kv: kv, lens: make([]int, slots), next: make([]int, slots), recNext: make([]int, slots), scopes: make([]CacheScope, slots)}
}

// Slots returns the number of sequence slots.
func (b *Blocks) Slots() int { return len(b.lens) }

// Len returns the number of positions slot holds.
func (b *Blocks) Len(slot int) int { return b.lens[slot] }

// StatePos returns how many positions slot's recurrent state holds (a
// hybrid model; 0 otherwise): the slot continues only from there.
func (b *Blocks) StatePos(slot int) int {
	if !b.Recurrent() {
		return 0
	}
	return b.kv.rec[slot]
}

// Stats returns the statistics of the KV page pool (zero for encoders).
func (b *Blocks) Stats() KVStats {
	if b.kv == nil {
		return KVStats{}
	}
	return b.kv.stats()
}

// Truncate keeps the first n positions of slot (for regeneration or to
// reuse a common prefix); Truncate(slot, 0) clears it.
func (b *Blocks) Truncate(slot, n int) error {
	if slot < 0 || slot >= len(b.lens) {
		return fmt.Errorf("engine: slot %d outside 0..%d", slot, len(b.lens)-1)
	}
	if n < 0 || n > b.lens[slot] {
		return fmt.Errorf("engine: cannot truncate slot %d of %d positions to %d", slot, b.lens[slot], n)
	}
	b.lens[slot] = n
	if b.kv != nil {
		b.kv.truncate(slot, n)
		if b.kv.rec != nil && n < b.kv.rec[slot] {
			b.kv.rec[slot] = 0 // a recurrent state cannot be cut back
		}
	}
	return nil
}

// Recurrent reports whether the slots also hold a recurrent state (a
// hybrid model): a slot then continues only from its full length, or
// starts again at position 0, and prefixes are not taken from the cache.
func (b *Blocks) Recurrent() bool { return b.kv != nil && b.kv.rec != nil }

// CopyPrefix makes slot dst hold the first n positions of slot src,
// dropping what dst held. n may be at most src's length. The slots then
// share the pages (nothing is copied until one of them writes a shared
// page). It is how the candidates of n/best_of share their prompt.
func (b *Blocks) CopyPrefix(dst, src, n int) error {
	if src < 0 || src >= len(b.lens) || dst < 0 || dst >= len(b.lens) {
		return fmt.Errorf("engine: CopyPrefix: slot %d or %d outside 0..%d", dst, src, len(b.lens)-1)
	}
	if n < 0 || n > b.lens[src] {
		return fmt.Errorf("engine: CopyPrefix: slot %d holds %d positions, cannot copy %d", src, b.lens[src], n)
	}
	if dst == src {
		return b.Truncate(dst, n)
	}
	if b.kv != nil {
		b.kv.share(dst, src, n)
		if rec := b.kv.rec; rec != nil {
			rec[dst] = 0
			if n > 0 && n == rec[src] {
				// The follower takes the leader's state, copied before
				// the next pass.
				b.kv.stateCopies = append(b.kv.stateCopies, pageCopy{dst: int32(dst), src: int32(src)})
				rec[dst] = n
			}
		}
	}
	b.lens[dst] = n
	return nil
}

// AttachPrefix empties slot and makes it hold the longest prefix of tokens
// that the prefix cache holds (whole pages, then part of one), and returns
// its length: the tokens need not be fed again.
// The slot's cache scope becomes the zero one (Admit sets another).
func (b *Blocks) AttachPrefix(slot int, tokens []int32) int {
	return b.attachScoped(slot, tokens, CacheScope{})
}

// attachScoped is AttachPrefix within scope: only the pages and
// checkpoints that scope may reuse match.
func (b *Blocks) attachScoped(slot int, tokens []int32, scope CacheScope) int {
	b.scopes[slot] = scope
	if b.kv == nil {
		b.lens[slot] = 0
		return 0
	}
	if b.kv.rec != nil {
		return b.attachCheckpoint(slot, tokens, scope)
	}
	n := b.kv.attach(slot, tokens, scope)
	b.lens[slot] = n
	return n
}

// attachCheckpoint is AttachPrefix for a hybrid model: a recurrent state
// cannot be cut back, so the slot takes the longest prefix of tokens that
// a checkpoint holds the state of and the prefix cache the pages of, the
// state copied in before the next pass.
func (b *Blocks) attachCheckpoint(slot int, tokens []int32, scope CacheScope) int {
	kv := b.kv
	var starts []int // the checkpoints whose tokens start tokens, longest first
	for i, c := range kv.ckpts {
		if c.scope != scope.Key && (c.scope != "" || !scope.public(len(c.tokens))) {
			continue // another scope's, or public past this prompt's public part
		}
		if n := len(c.tokens); n > 0 && n <= len(tokens) && slices.Equal(c.tokens, tokens[:n]) {
			starts = append(starts, i)
		}
	}
	slices.SortFunc(starts, func(i, j int) int { return len(kv.ckpts[j].tokens) - len(kv.ckpts[i].tokens) })
	for _, i := range starts {
		n := len(kv.ckpts[i].tokens)
		if kv.attach(slot, tokens[:n], scope) == n {
			kv.clock++
			kv.ckpts[i].used = kv.clock
			kv.stateCopies = append(kv.stateCopies, pageCopy{dst: int32(slot), src: int32(len(b.lens) + i)})
			kv.rec[slot], b.lens[slot] = n, n
			return n
		}
	}
	kv.truncate(slot, 0)
	kv.rec[slot], b.lens[slot] = 0, 0
	return 0
}

// Checkpoint saves slot's recurrent state, that of tokens (the slot's
// positions, all of which its state holds), in a free or the least
// recently used checkpoint, copied before the next pass; later prompts
// starting with tokens resume from it (AttachPrefix). Models without
// recurrent state, or without checkpoints, ignore it.
func (b *Blocks) Checkpoint(slot int, tokens []int32) {
	if !b.Recurrent() || len(b.kv.ckpts) == 0 || len(tokens) == 0 || b.kv.rec[slot] != len(tokens) {
		return
	}
	kv := b.kv
	scope := b.scopes[slot].pageScope(len(tokens))
	at := 0
	for i, c := range kv.ckpts {
		if c.scope == scope && slices.Equal(c.tokens, tokens) {
			at = i // the same state again: refresh it
			break
		}
		if c.used < kv.ckpts[at].used {
			at = i // free checkpoints have used 0
		}
	}
	kv.clock++
	kv.ckpts[at] = checkpoint{tokens: append(kv.ckpts[at].tokens[:0], tokens...), used: kv.clock, scope: scope}
	kv.stateCopies = append(kv.stateCopies, pageCopy{dst: int32(len(b.lens) + at), src: int32(slot)})
}

// CheckpointEvery is the positions between a hybrid model's recurrent-state
// checkpoints (0: none): the scheduler ends prompt chunks on multiples of
// it and saves the state there (Checkpoint).
func (b *Blocks) CheckpointEvery() int {
	if !b.Recurrent() || len(b.kv.ckpts) == 0 {
		return 0
	}
	// Four KV pages: the pages of a checkpoint's prefix are whole ones,
	// which the prefix cache holds while its sequence still runs.
	return 4 * b.kv.pageSize
}

// CachePrefix leaves the pages of slot that hold tokens (its positions
// 0..len(tokens)-1, which the caller fed) in the prefix cache for later
// prompts: the full pages, and the last partial one too when partial is
// set (the slot is done writing it). They are reused within the slot's
// cache scope (Admission.Scope).
func (b *Blocks) CachePrefix(slot int, tokens []int32, partial bool) {
	if b.kv != nil && len(tokens) <= b.lens[slot] {
		b.kv.publish(slot, tokens, partial, b.scopes[slot])
	}
}

// Reserve makes sure slot has pages for positions from..to-1 (allocating
// new ones and copying shared ones), evicting cached prefixes as needed;
// it fails with ErrKVFull when the pool cannot give them.
func (b *Blocks) Reserve(slot, from, to int) error {
	if b.kv != nil {
		return b.kv.reserve(slot, from, to)
	}
	return nil
}

// Need returns how many pages Reserve(slot, from, to) would take, and how
// many the pool can give (free or cached).
func (b *Blocks) Need(slot, from, to int) (need, available int) {
	if b.kv != nil {
		return b.kv.need(slot, from, to), b.kv.available()
	}
	return 0, 1
}

// Admission says where a sequence admitted to a slot takes the start of
// its prompt from (Blocks.Admit).
type Admission struct {
	// Prompt is the sequence's prompt: Admit reserves the pages of its
	// positions that are not reused.
	Prompt []int32
	// Fresh reuses nothing: every row is fed (an embedding needs every
	// row's hidden state, a scored prompt every row's logits).
	Fresh bool
	// Leader, when >= 0, is the slot of a sequence with the same prompt
	// that holds all but its last token: the slot shares those pages (a
	// follower of n/best_of). Otherwise the slot takes the longest prefix
	// of Prompt[:len(Prompt)-1] the prefix cache holds.
	Leader int
	// Boundary, when not nil, returns the longest reusable prefix of at
	// most n positions (an image is reused whole or not at all).
	Boundary func(n int) int
	// Scope confines what the slot reuses from the prefix cache, and what
	// it leaves there, to a cache scope (CacheScope).
	Scope CacheScope
}

// Admit makes the empty slot hold the start of a's prompt as a says and
// reserves the pages of the rest. It returns the positions reused, or
// false (the slot empty again, nothing else changed but the prefix cache's
// order) when the pool lacks the pages.
func (b *Blocks) Admit(slot int, a Admission) (reused int, ok bool) {
	n := len(a.Prompt)
	switch {
	case a.Fresh:
		b.attachScoped(slot, nil, a.Scope)
	case a.Leader >= 0:
		reused = n - 1
		if err := b.CopyPrefix(slot, a.Leader, reused); err != nil {
			panic("BUG: engine: " + err.Error())
		}
		b.scopes[slot] = a.Scope
	default:
		reused = b.attachScoped(slot, a.Prompt[:n-1], a.Scope)
	}
	if a.Boundary != nil {
		if c := a.Boundary(reused); c < reused {
			if err := b.Truncate(slot, c); err != nil {
				panic("BUG: engine: " + err.Error())
			}
			reused = c
		}
	}
	if b.Recurrent() && reused > 0 && b.kv.rec[slot] != reused {
		// The recurrent state holds no prefix shorter than the leader's
		// length: the prompt is fed from the start.
		b.Truncate(slot, 0)
		reused = 0
	}
	if need, avail := b.Need(slot, reused, n); need > avail {
		b.Truncate(slot, 0)
		return 0, false
	}
	if err := b.Reserve(slot, reused, n); err != nil {
		b.Truncate(slot, 0) // every cached page is evictable, so this should not happen; wait
		return 0, false
	}
	return reused, true
}

// advance checks that batch's rows extend or rewrite their slots (a row at
// position p needs the slot's positions before p: p at most the slot's
// length, counting the batch's earlier rows of the slot), drops the pages
// past a rewritten position, and notes the lengths after the pass (writing
// p ends the slot's sequence at p+1) for commit.
func (b *Blocks) advance(batch Batch) error {
	lens := b.next
	copy(lens, b.lens)
	var rec []int
	if b.Recurrent() {
		rec = b.recNext[:len(b.lens)]
		copy(rec, b.kv.rec)
	}
	for i, s := range batch.Slots {
		p := int(batch.Pos[i])
		if p < 0 || p > lens[s] {
			return fmt.Errorf("engine: batch row %d: position %d of slot %d, which holds %d positions (a row may extend a slot by one or rewrite it)", i, p, s, lens[s])
		}
		if rec != nil {
			if p != 0 && p != rec[s] {
				return fmt.Errorf("engine: batch row %d: position %d of slot %d, whose recurrent state holds %d positions (a hybrid model's row continues its slot or starts it at 0)", i, p, s, rec[s])
			}
			rec[s] = p + 1
		}
		lens[s] = p + 1
	}
	if b.kv != nil {
		for s, n := range lens {
			if n < b.lens[s] { // rewritten: the pages past it go
				b.kv.truncate(s, n)
			}
		}
	}
	return nil
}

// commit sets the lengths advance noted, once the pass succeeded.
func (b *Blocks) commit() {
	b.lens, b.next = b.next, b.lens
	if b.Recurrent() {
		copy(b.kv.rec, b.recNext)
	}
}

// rollback keeps what precedes batch's rows in their slots after a failed
// pass: their cache entries are undefined.
func (b *Blocks) rollback(batch Batch) {
	for i, s := range batch.Slots {
		b.lens[s] = min(b.lens[s], int(batch.Pos[i]))
		if b.Recurrent() {
			b.kv.rec[s] = 0 // the pass may have changed it
		}
	}
}
