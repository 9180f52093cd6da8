package engine

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"

	"github.com/vkllm/vkllm/gguf/quant"
)

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
	// convState and ssmState are a hybrid model's recurrent states, per
	// recurrent layer: [slot][Recurrent.ConvLen()] and
	// [slot][Recurrent.SSMLen()] (ops.SSMConv, ops.GatedDeltaNet).
	convState, ssmState [][]float32
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
	if r := o.Recurrent; r != nil {
		// A state row per slot, then per checkpoint (kvCache.ckpts).
		n := len(kv.tables) + len(kv.ckpts)
		m.convState, m.ssmState = make([][]float32, r.Count), make([][]float32, r.Count)
		for l := range r.Count {
			m.convState[l], m.ssmState[l] = make([]float32, n*r.ConvLen()), make([]float32, n*r.SSMLen())
		}
	}
	m.kCache, m.vCache = make([][]float32, o.KVLayers), make([][]float32, o.KVLayers)
	for l := range o.KVLayers {
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
	if r := m.o.Recurrent; r != nil {
		cl, sl := r.ConvLen(), r.SSMLen()
		for _, cp := range m.kv.stateCopies {
			for l := range r.Count {
				copy(m.convState[l][int(cp.dst)*cl:int(cp.dst+1)*cl], m.convState[l][int(cp.src)*cl:int(cp.src+1)*cl])
				copy(m.ssmState[l][int(cp.dst)*sl:int(cp.dst+1)*sl], m.ssmState[l][int(cp.src)*sl:int(cp.src+1)*sl])
			}
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
	h := Batch{Tokens: b.Tokens, Slots: b.Slots, Pos: b.Pos, Out: make([]RowOut, b.Len())}
	for i := range h.Out {
		h.Out[i] = RowOut{Kind: OutHidden}
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
		m.kv.copies, m.kv.stateCopies = m.kv.copies[:0], m.kv.stateCopies[:0]
	}
	g := &cpuGraph{m: m, b: b}
	if m.o.Recurrent != nil {
		var err error
		if g.runs, err = b.seqRuns(nil); err != nil {
			return err
		}
	}
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
	picks := make([]uint32, nArgmax)
	ops.RefArgmax(picks, g.logits, nArgmax, V)
	for r, id := range picks {
		out.Tokens[r] = int32(id) // ops.ArgmaxNone is -1
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
