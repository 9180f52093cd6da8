package engine

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
)

// The engine's data model: what a forward pass is asked (Batch, one RowOut
// per row), the shape it is recorded for (passShape) and what it returns
// (Output). Both models (GPUModel, CPUModel) and the scheduler share them.

// OutKind is what a batch row asks a forward pass to return.
type OutKind uint8

const (
	// OutNone asks for nothing: the row only writes its keys and values
	// (a prompt row before the last).
	OutNone OutKind = iota
	// OutLogits asks for the row's logits ([Vocab] values in
	// Output.Logits).
	OutLogits
	// OutArgmax asks for the row's argmax token alone: the id of its
	// largest logit above -Inf, the lowest on ties, NaN never, -1 when
	// there is none (a greedy sampling.Chain's pick,
	// sampling.Chain.SampleArgmax). The GPU computes it and reads back the
	// id alone (Output.Tokens).
	OutArgmax
	// OutTopK asks for the row's K largest logits and their ids (a
	// sampling.Chain whose TopK is K draws from those alone, SampleTopK),
	// K in 1..ops.MaxTopK. The GPU selects them and reads back K ids and
	// logits (Output.TopIDs, TopLogits).
	OutTopK
	// OutHidden asks for the row's final hidden state (after the output
	// norm), for embeddings (Output.Hidden).
	OutHidden
)

// RowOut is what one batch row asks for: its Kind and, for OutTopK, how
// many of its largest logits (K; 0 for the other kinds).
type RowOut struct {
	Kind OutKind
	K    int32
}

// Batch is one forward pass's rows. Row i feeds token Tokens[i] at position
// Pos[i] of sequence slot Slots[i] and asks for Out[i]; rows of one slot
// must come in increasing position order, and a row attends to the
// positions 0..Pos[i] of its own slot (the earlier ones from the KV cache).
// The pass returns the outputs in row order within each kind (Output).
//
// Embeds and AttnPos, when not nil, feed input embeddings instead of tokens
// (image tokens of a multimodal prompt): see Media.
type Batch struct {
	Tokens []int32
	Slots  []int32
	Pos    []int32
	Out    []RowOut
	// Embeds[i], when not nil, is row i's input embedding ([Embd] values),
	// used in place of its token's embedding (after the architecture's
	// embedding scaling, which image embeddings do not get); the row's
	// token id is then a pseudo-id (MediaTokens) and is not looked up.
	Embeds [][]float32
	// AttnPos[i], when not nil, is the last position row i attends to
	// (from Pos[i] up to the last position the batch writes in its slot):
	// the rows of an image that attends non-causally (Gemma 3) see the
	// whole image. nil: Pos.
	AttnPos []int32
}

// Len returns the number of rows.
func (b *Batch) Len() int { return len(b.Tokens) }

// Add appends a row that feeds tok at position pos of slot and asks for
// out.
func (b *Batch) Add(tok int32, slot, pos int, out RowOut) {
	b.Tokens = append(b.Tokens, tok)
	b.Slots = append(b.Slots, int32(slot))
	b.Pos = append(b.Pos, int32(pos))
	b.Out = append(b.Out, out)
}

// Reset empties b, keeping its memory; Embeds and AttnPos become nil.
func (b *Batch) Reset() {
	b.Tokens, b.Slots, b.Pos, b.Out = b.Tokens[:0], b.Slots[:0], b.Pos[:0], b.Out[:0]
	b.Embeds, b.AttnPos = nil, nil
}

// seqBatch returns a batch of tokens at consecutive positions from start of
// one slot, asking for no output.
func seqBatch(tokens []int32, slot, start int) Batch {
	b := Batch{Tokens: tokens, Slots: make([]int32, len(tokens)), Pos: make([]int32, len(tokens)), Out: make([]RowOut, len(tokens))}
	for i := range tokens {
		b.Slots[i] = int32(slot)
		b.Pos[i] = int32(start + i)
	}
	return b
}

// passShape is a forward pass's rows: n in all, and how many ask for each
// output, in the order of the output rows (argmax tokens, the topK
// largest logits, logits, hidden states).
type passShape struct {
	n, argmax, top, topK, logits, hidden int
}

// outRows is the number of rows that give output.
func (s passShape) outRows() int { return s.argmax + s.top + s.logits + s.hidden }

// outputOrder is the order in which a pass lays its output rows out:
// argmax rows first (the argmax kernel then reads the logits from offset
// 0, aligned for binding), then top-k rows, then logits rows, then
// hidden-state rows.
var outputOrder = [...]OutKind{OutArgmax, OutTopK, OutLogits, OutHidden}

// outputRows appends to rows the batch rows that want output, in
// outputOrder, and returns them with the pass's shape: topK is the largest
// k asked, at most vocab. An encoder gives hidden states only.
func (b *Batch) outputRows(rows []int32, vocab int, encoder bool, arch string) ([]int32, passShape, error) {
	s := passShape{n: b.Len()}
	var counts [len(outputOrder)]int
	for k, kind := range outputOrder {
		start := len(rows)
		for i, o := range b.Out {
			if o.Kind == kind {
				rows = append(rows, int32(i))
				if kind == OutTopK {
					s.topK = max(s.topK, int(o.K))
				}
			}
		}
		counts[k] = len(rows) - start
	}
	s.argmax, s.top, s.logits, s.hidden = counts[0], counts[1], counts[2], counts[3]
	s.topK = min(s.topK, vocab)
	if encoder && s.argmax+s.top+s.logits > 0 {
		return rows, s, fmt.Errorf("engine: %s is an encoder (embeddings and rerank only): it gives hidden states, not logits, so it cannot generate", arch)
	}
	return rows, s, nil
}

// check validates the batch against the model and cache sizes.
func (b *Batch) check(vocab, slots, ctx int) error {
	n := len(b.Tokens)
	if n == 0 {
		return fmt.Errorf("engine: empty batch")
	}
	if len(b.Slots) != n || len(b.Pos) != n || len(b.Out) != n || b.Embeds != nil && len(b.Embeds) != n || b.AttnPos != nil && len(b.AttnPos) != n {
		return fmt.Errorf("engine: batch has %d tokens but %d slots, %d positions, %d outputs, %d embeddings, %d attention positions",
			n, len(b.Slots), len(b.Pos), len(b.Out), len(b.Embeds), len(b.AttnPos))
	}
	if err := b.checkMedia(ctx); err != nil {
		return err
	}
	for i := range n {
		o := b.Out[i]
		switch {
		case b.embeds(i) && len(b.Embeds[i]) == 0:
			return fmt.Errorf("engine: batch row %d: an empty input embedding", i)
		case !b.embeds(i) && (b.Tokens[i] < 0 || int(b.Tokens[i]) >= vocab):
			return fmt.Errorf("engine: batch row %d: token %d outside the vocabulary of %d", i, b.Tokens[i], vocab)
		case b.Slots[i] < 0 || int(b.Slots[i]) >= slots:
			return fmt.Errorf("engine: batch row %d: slot %d outside 0..%d", i, b.Slots[i], slots-1)
		case b.Pos[i] < 0 || int(b.Pos[i]) >= ctx:
			return fmt.Errorf("engine: batch row %d: position %d outside the context of %d", i, b.Pos[i], ctx)
		case o.Kind > OutHidden:
			return fmt.Errorf("engine: batch row %d asks for output kind %d, want 0..%d", i, o.Kind, OutHidden)
		case o.Kind == OutTopK && (o.K < 1 || o.K > ops.MaxTopK):
			return fmt.Errorf("engine: batch row %d asks for its %d largest logits, want 1..%d", i, o.K, ops.MaxTopK)
		case o.Kind != OutTopK && o.K != 0:
			return fmt.Errorf("engine: batch row %d gives a top-k count %d with an output other than its largest logits", i, o.K)
		}
	}
	return nil
}

// checkMedia checks Embeds and AttnPos against the rows.
func (b *Batch) checkMedia(ctx int) error {
	for i := range b.AttnPos {
		if b.AttnPos[i] < b.Pos[i] || int(b.AttnPos[i]) >= ctx {
			return fmt.Errorf("engine: batch row %d: attends to position %d, before its own %d or outside the context of %d", i, b.AttnPos[i], b.Pos[i], ctx)
		}
		// The positions up to AttnPos must be written by this batch's
		// later rows of the slot.
		if b.AttnPos[i] > b.Pos[i] {
			seen := false
			for j := i + 1; j < len(b.Pos); j++ {
				if b.Slots[j] == b.Slots[i] && b.Pos[j] == b.AttnPos[i] {
					seen = true
					break
				}
			}
			if !seen {
				return fmt.Errorf("engine: batch row %d attends to position %d, which the batch does not write", i, b.AttnPos[i])
			}
		}
	}
	return nil
}

// embeds reports whether row i's input is an embedding.
func (b *Batch) embeds(i int) bool { return b.Embeds != nil && b.Embeds[i] != nil }

// batchKeys is the most positions a row of b attends to: the longest
// row's last position (Batch.AttnPos where set) plus one.
func batchKeys(b Batch) int {
	var last int32
	for i, p := range b.Pos {
		if b.AttnPos != nil {
			p = b.AttnPos[i]
		}
		last = max(last, p)
	}
	return int(last) + 1
}

// encoderSeqEnds checks that every slot's rows in b form one whole
// sequence, consecutive at positions 0..n-1, as encoders need (they attend
// in both directions and keep no cache), and writes each row's sequence end
// (one past its last row) into ends.
func encoderSeqEnds(b Batch, ends []int32) error {
	n := b.Len()
	for i := 0; i < n; {
		if b.Pos[i] != 0 {
			return fmt.Errorf("engine: batch row %d: an encoder sequence starts at position %d, want 0 (a sequence is fed whole in one batch)", i, b.Pos[i])
		}
		j := i + 1
		for j < n && b.Slots[j] == b.Slots[i] && int(b.Pos[j]) == j-i {
			j++
		}
		for r := i; r < j; r++ {
			ends[r] = int32(j)
		}
		i = j
	}
	for i := 0; i < n; i = int(ends[i]) {
		for j := 0; j < i; j = int(ends[j]) {
			if b.Slots[j] == b.Slots[i] {
				return fmt.Errorf("engine: batch row %d: slot %d holds two encoder sequences in one batch", i, b.Slots[i])
			}
		}
	}
	return nil
}

// Output is a forward pass's results, each kind in the batch's row order:
// Logits the logits of the OutLogits rows ([rows][vocab]), Tokens the
// argmax ids of the OutArgmax rows, TopIDs and TopLogits the largest
// logits of the OutTopK rows and their ids ([rows][TopN], each row's
// sorted as ops.RefTopK sorts them, TopN the largest K asked: a row's
// first K are its own) and Hidden the final hidden states (after the
// output norm) of the OutHidden rows ([rows][embd]). ForwardInto reslices
// them within their capacity and allocates only when one is too small, so
// a caller that reserves BatchSize rows once never allocates per step.
type Output struct {
	Logits    []float32
	Tokens    []int32
	TopIDs    []int32
	TopLogits []float32
	TopN      int
	Hidden    []float32
	// Borrow, set by the caller, makes GPUModel.ForwardInto point Logits,
	// Tokens and Hidden at the model's own host-visible read-back memory
	// instead of copying them out: no copy at all, and nothing to reserve.
	// They are then valid only until the next ForwardInto or Close; the
	// caller may write into them (a sampler masks logits in place) but
	// must not keep them. The scheduler samples within the step, so it
	// borrows.
	Borrow bool
	// ReadBytes is the bytes of results the pass made the host read from
	// the device: the logits rows, argmax ids, top logits and their ids
	// and hidden states asked for.
	ReadBytes int
}

// resize returns s resized to n elements, reusing its memory when it can.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// seqRuns returns the batch's rows as runs of one slot each (ops.SeqRun),
// for a hybrid model's recurrent layers: each slot's rows must be
// consecutive in the batch and at consecutive positions.
func (b Batch) seqRuns(dst []ops.SeqRun) ([]ops.SeqRun, error) {
	dst = dst[:0]
	for i, s := range b.Slots {
		if n := len(dst); n > 0 {
			last := &dst[n-1]
			if last.Slot == s && int(last.Row+last.Rows) == i && last.Pos+last.Rows == b.Pos[i] {
				last.Rows++
				continue
			}
		}
		for _, r := range dst {
			if r.Slot == s {
				return nil, fmt.Errorf("engine: batch row %d: slot %d's rows of a hybrid model must be consecutive, at consecutive positions", i, s)
			}
		}
		dst = append(dst, ops.SeqRun{Slot: s, Row: int32(i), Rows: 1, Pos: b.Pos[i]})
	}
	return dst, nil
}
