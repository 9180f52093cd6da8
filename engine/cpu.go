package engine

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"

	"github.com/vkllm/vkllm/gguf/quant"
)

// Batch is one forward pass's rows. Row i feeds token Tokens[i] at position
// Pos[i] of sequence slot Slots[i]; rows of one slot must come in increasing
// position order, and a row attends to the positions 0..Pos[i] of its own
// slot (the earlier ones from the KV cache). Logits[i] asks for row i's
// logits; Forward returns them in row order. Hidden, when not nil, asks
// for rows' final hidden states (after the output norm) instead, for
// embeddings: a row may want logits or its hidden state, not both.
//
// Embeds and AttnPos, when not nil, feed input embeddings instead of tokens
// (image tokens of a multimodal prompt): see Media.
type Batch struct {
	Tokens []int32
	Slots  []int32
	Pos    []int32
	Logits []bool
	Hidden []bool
	// Argmax[i] (nil: none) asks for row i's argmax token instead of its
	// logits: the id of its largest logit above -Inf, the lowest on ties,
	// NaN never, -1 when there is none (a greedy sampling.Chain's pick,
	// sampling.Chain.SampleArgmax). The GPU computes it and reads back the
	// id alone; Output.Tokens holds the ids in row order. A row asks for
	// at most one of Logits, Argmax, TopK and Hidden.
	Argmax []bool
	// TopK[i] > 0 (nil: none) asks for row i's TopK[i] largest logits
	// and their ids instead of the whole row (a sampling.Chain whose
	// TopK is that k draws from those alone, SampleTopK), at most
	// ops.MaxTopK. The GPU selects them and reads back k ids and logits;
	// Output.TopIDs and TopLogits hold them, Output.TopN for each row (the
	// largest k asked: a row's first TopK[i] are its own).
	TopK []int32
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

// argmax reports whether row i asks for its argmax token.
func (b *Batch) argmax(i int) bool { return b.Argmax != nil && b.Argmax[i] }

// outputRows appends to rows the batch rows that want output, in the order
// both models lay their outputs out (argmax tokens, top logits, logits,
// hidden states), and returns them with the pass's shape: topK is the
// largest k asked, at most vocab. An encoder gives hidden states only.
func (b *Batch) outputRows(rows []int32, vocab int, encoder bool, arch string) ([]int32, passShape, error) {
	s, start := passShape{n: b.Len()}, len(rows)
	for i, want := range b.Argmax {
		if want {
			rows = append(rows, int32(i))
		}
	}
	s.argmax = len(rows) - start
	for i, k := range b.TopK {
		if k > 0 {
			rows = append(rows, int32(i))
			s.topK = max(s.topK, int(k))
		}
	}
	s.topK = min(s.topK, vocab)
	s.top = len(rows) - start - s.argmax
	for i, want := range b.Logits {
		if want {
			rows = append(rows, int32(i))
		}
	}
	s.logits = len(rows) - start - s.argmax - s.top
	if len(rows) > start && encoder {
		return rows, s, fmt.Errorf("engine: %s is an encoder (embeddings and rerank only): it gives hidden states, not logits, so it cannot generate", arch)
	}
	for i, want := range b.Hidden {
		if want {
			rows = append(rows, int32(i))
		}
	}
	s.hidden = len(rows) - start - s.argmax - s.top - s.logits
	return rows, s, nil
}

// topK is the k of row i's largest logits it asks for, 0 for none.
func (b *Batch) topK(i int) int {
	if b.TopK == nil {
		return 0
	}
	return int(b.TopK[i])
}

// check validates the batch against the model and cache sizes.
func (b *Batch) check(vocab, slots, ctx int) error {
	n := len(b.Tokens)
	if n == 0 {
		return fmt.Errorf("engine: empty batch")
	}
	if len(b.Slots) != n || len(b.Pos) != n || len(b.Logits) != n || b.Hidden != nil && len(b.Hidden) != n ||
		b.Argmax != nil && len(b.Argmax) != n || b.TopK != nil && len(b.TopK) != n || b.Embeds != nil && len(b.Embeds) != n || b.AttnPos != nil && len(b.AttnPos) != n {
		return fmt.Errorf("engine: batch has %d tokens but %d slots, %d positions, %d logit flags, %d hidden flags, %d argmax flags, %d top-k counts, %d embeddings, %d attention positions",
			n, len(b.Slots), len(b.Pos), len(b.Logits), len(b.Hidden), len(b.Argmax), len(b.TopK), len(b.Embeds), len(b.AttnPos))
	}
	if err := b.checkMedia(ctx); err != nil {
		return err
	}
	for i := range n {
		switch {
		case b.embeds(i) && len(b.Embeds[i]) == 0:
			return fmt.Errorf("engine: batch row %d: an empty input embedding", i)
		case !b.embeds(i) && (b.Tokens[i] < 0 || int(b.Tokens[i]) >= vocab):
			return fmt.Errorf("engine: batch row %d: token %d outside the vocabulary of %d", i, b.Tokens[i], vocab)
		case b.Slots[i] < 0 || int(b.Slots[i]) >= slots:
			return fmt.Errorf("engine: batch row %d: slot %d outside 0..%d", i, b.Slots[i], slots-1)
		case b.Pos[i] < 0 || int(b.Pos[i]) >= ctx:
			return fmt.Errorf("engine: batch row %d: position %d outside the context of %d", i, b.Pos[i], ctx)
		case b.Hidden != nil && b.Hidden[i] && b.Logits[i]:
			return fmt.Errorf("engine: batch row %d asks for both logits and its hidden state", i)
		case b.argmax(i) && (b.Logits[i] || b.Hidden != nil && b.Hidden[i]):
			return fmt.Errorf("engine: batch row %d asks for its argmax token and also for its logits or hidden state", i)
		case b.topK(i) < 0 || b.topK(i) > ops.MaxTopK:
			return fmt.Errorf("engine: batch row %d asks for its %d largest logits, want 0..%d", i, b.topK(i), ops.MaxTopK)
		case b.topK(i) > 0 && (b.argmax(i) || b.Logits[i] || b.Hidden != nil && b.Hidden[i]):
			return fmt.Errorf("engine: batch row %d asks for its largest logits and also for its argmax token, logits or hidden state", i)
		}
	}
	return nil
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

// CPUModel is the plain-Go reference of the forward pass: weights
// dequantized to f32, arithmetic accumulated in f64, an f32 KV cache. It
// runs the same architecture description as the GPU (cpuGraph). It is slow
// and exists to check the GPU path (tests and --verify).
type CPUModel struct {
	o      Options
	model  archModel
	slots  int
	ctx    int
	w      [][]float32 // every tensor, dequantized, by Tensor.idx
	kCache [][]float32 // per layer, the K page pool [page][pos in page][kvhead][dim]
	vCache [][]float32
	// kv maps slots' positions to pages: its own, or the GPU model's
	// (Model with Verify: useKV), which then reserves the pages.
	kv    *kvCache
	ownKV bool
	// kvTypes are the element types of the K and V pools it mirrors:
	// values written there round-trip through them (the GPU's quantized
	// cache), f16 ones are kept as f32.
	kvTypes [2]ops.KVType
	// q8Act rounds the activations of every product by a weight type with
	// an integer-dot kernel to Q8_1 (ops.QuantizeQ8_1Ref), as the GPU's
	// integer-dot matvec path does (tests of that path).
	q8Act bool
}

func dequant(t *Tensor) ([]float32, error) {
	if t == nil {
		return nil, nil
	}
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	out := make([]float32, n)
	if err := quant.Dequantize(t.Type, t.Data, out); err != nil {
		return nil, fmt.Errorf("engine: tensor %s: %w", t.Name, err)
	}
	return out, nil
}

// NewCPUModel dequantizes w and makes a paged KV cache with room for slots
// sequences of ctx positions each.
func NewCPUModel(o Options, w *Weights, ctx, slots int) (*CPUModel, error) {
	m := &CPUModel{o: o, model: w.model, slots: slots, ctx: ctx, w: make([][]float32, len(w.Tensors))}
	for i, t := range w.Tensors {
		if t.parts != nil {
			continue // the reference multiplies by the parts
		}
		var err error
		if m.w[i], err = dequant(t); err != nil {
			return nil, err
		}
	}
	if !o.Encoder {
		ps := ops.DefaultPageSize
		m.useKV(newKVCache(slots*((ctx+ps-1)/ps), ps, slots, ctx))
		m.ownKV = true
	}
	return m, nil
}

// useKV makes the model's pools follow kv's pages (contents are lost).
func (m *CPUModel) useKV(kv *kvCache) {
	o := m.o
	m.kv, m.ownKV = kv, false
	m.kCache, m.vCache = make([][]float32, o.Layers), make([][]float32, o.Layers)
	for l := range o.Layers {
		m.kCache[l] = make([]float32, kv.pages*kv.pageSize*o.KVHeads*o.HeadDim)
		m.vCache[l] = make([]float32, kv.pages*kv.pageSize*o.KVHeads*o.HeadDimV)
	}
}

// storeKV writes row (one position's keys or values) into dst as a pool of
// type t holds it: quantized and dequantized for the block types.
func storeKV(dst, row []float32, t ops.KVType) {
	if t == ops.KVF16 {
		copy(dst, row)
		return
	}
	gt := gguf.TypeQ8_0
	if t == ops.KVQ4_0 {
		gt = gguf.TypeQ4_0
	}
	b, err := quant.Quantize(gt, row)
	if err == nil {
		err = quant.Dequantize(gt, b, dst[:len(row)])
	}
	if err != nil {
		panic("BUG: engine: storeKV: " + err.Error())
	}
}

// applyCopies performs kv's pending copy-on-write page copies on the pools.
func (m *CPUModel) applyCopies() {
	kw, vw := m.kv.pageSize*m.o.KVHeads*m.o.HeadDim, m.kv.pageSize*m.o.KVHeads*m.o.HeadDimV
	for _, cp := range m.kv.copies {
		for l := range m.kCache {
			copy(m.kCache[l][int(cp.dst)*kw:int(cp.dst+1)*kw], m.kCache[l][int(cp.src)*kw:int(cp.src+1)*kw])
			copy(m.vCache[l][int(cp.dst)*vw:int(cp.dst+1)*vw], m.vCache[l][int(cp.src)*vw:int(cp.src+1)*vw])
		}
	}
}

// row returns the element offset of position pos of slot in a pool whose
// rows are w wide.
func (m *CPUModel) row(slot, pos int32, w int) int {
	ps := m.kv.pageSize
	return (int(m.kv.tables[slot][int(pos)/ps])*ps + int(pos)%ps) * w
}

// Options returns the model's hyper-parameters.
func (m *CPUModel) Options() Options { return m.o }

// Forward runs the batch and returns the logits of the rows that asked for
// them, concatenated in row order ([rows][vocab]).
func (m *CPUModel) Forward(b Batch) ([]float32, error) {
	var out Output
	err := m.ForwardInto(b, &out)
	return out.Logits, err
}

// Hidden runs the batch and returns every row's final hidden state (after
// the output norm), [rows][embd].
func (m *CPUModel) Hidden(b Batch) ([]float32, error) {
	h := Batch{Tokens: b.Tokens, Slots: b.Slots, Pos: b.Pos, Logits: make([]bool, b.Len()), Hidden: make([]bool, b.Len())}
	for i := range h.Hidden {
		h.Hidden[i] = true
	}
	var out Output
	err := m.ForwardInto(h, &out)
	return out.Hidden, err
}

// ForwardInto runs the batch and puts the logits and hidden states its
// rows ask for into out, as GPUModel.ForwardInto.
func (m *CPUModel) ForwardInto(b Batch, out *Output) error {
	if err := b.check(m.o.Vocab, m.slots, m.ctx); err != nil {
		return err
	}
	if m.kv != nil && m.ownKV {
		if err := m.kv.reserveRows(b); err != nil {
			return err
		}
		m.applyCopies()
		m.kv.copies = m.kv.copies[:0]
	}
	g := &cpuGraph{m: m, b: b}
	if m.o.Encoder {
		g.ends = make([]int32, b.Len())
		if err := encoderSeqEnds(b, g.ends); err != nil {
			return err
		}
	}
	rows, s, err := b.outputRows(nil, m.o.Vocab, m.o.Encoder, m.o.Arch)
	if err != nil {
		return err
	}
	g.rows, g.nLogits = rows, s.argmax+s.top+s.logits
	m.model.forward(g)
	if g.err != nil {
		return g.err
	}
	V, nArgmax, nTop, topK := m.o.Vocab, s.argmax, s.top, s.topK
	out.Tokens = make([]int32, nArgmax)
	for r := range nArgmax {
		out.Tokens[r] = argmaxRow(g.logits[r*V : (r+1)*V])
	}
	out.TopN = topK
	out.TopIDs, out.TopLogits = make([]int32, nTop*topK), make([]float32, nTop*topK)
	ids := make([]uint32, nTop*topK)
	if nTop > 0 {
		ops.RefTopK(ids, out.TopLogits, g.logits[nArgmax*V:(nArgmax+nTop)*V], nTop, V, topK)
	}
	for i, id := range ids {
		out.TopIDs[i] = int32(id)
	}
	out.Logits, out.Hidden = g.logits[(nArgmax+nTop)*V:], g.hidden
	out.ReadBytes = 4 * (len(out.Logits) + len(out.Tokens) + 2*len(ids) + len(out.Hidden))
	return nil
}

// argmaxRow is Batch.Argmax's pick on the CPU: the first largest logit
// above -Inf, -1 when there is none (ops.RefArgmax, sampling's greedy pick).
func argmaxRow(x []float32) int32 {
	best, id := float32(math.Inf(-1)), int32(-1)
	for i, v := range x {
		if v > best {
			best, id = v, int32(i)
		}
	}
	return id
}
