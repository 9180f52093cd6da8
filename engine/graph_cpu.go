package engine

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
)

// cpuGraph runs an architecture's forward pass in plain Go (Graph's CPU
// reference): f32 values, sums in f64, the KV cache in f32. It mirrors
// gpuGraph op by op; each op's math is its kernel's CPU reference, called
// from engine/ops (ops.MatMulF32Ref, ops.RefRMSNorm, ops.RefAttentionF32,
// ...), not written again here.
type cpuGraph struct {
	m       *CPUModel
	b       Batch
	ends    []int32 // encoder sequence ends (see encoderSeqEnds)
	vals    [][]float32
	base    int
	started bool
	rows    []int32 // the output rows: logits rows, then hidden ones (Batch.outputRows)
	nLogits int
	logits  []float32
	hidden  []float32
	in      []float32 // what Input reads (a Net's pass)
	runs    []ops.SeqRun
	err     error
}

func (g *cpuGraph) Mul(dst, a Act) {
	if dst.Rows*dst.Cols != a.Rows*a.Cols {
		g.fail(fmt.Errorf("engine: Mul: %d values by %d", dst.Rows*dst.Cols, a.Rows*a.Cols))
		return
	}
	n := dst.Rows * dst.Cols
	ops.RefMul(g.v(dst), g.v(dst), g.v(a), n, n)
}

func (g *cpuGraph) MulRows(dst, s Act) {
	if s.Rows != dst.Rows || s.Cols != 1 {
		g.fail(fmt.Errorf("engine: MulRows: scales [%d][%d] for %d rows", s.Rows, s.Cols, dst.Rows))
		return
	}
	ops.RefMulRows(g.v(dst), g.v(dst), g.v(s), dst.Rows, dst.Cols)
}

func (g *cpuGraph) Sigmoid(x Act) { ops.RefSigmoid(g.v(x), g.v(x)) }

func (g *cpuGraph) SSMConv(x Act, w *Tensor, layer int) Act {
	y := g.new(x.Rows, x.Cols)
	p := ops.SSMConvParams{Channels: x.Cols, Kernel: w.Cols(), Slots: g.m.slots}
	if w.Rows() != x.Cols {
		g.fail(fmt.Errorf("engine: SSMConv %s: %d channels, want %d", w.Name, w.Rows(), x.Cols))
		return y
	}
	g.fail(ops.RefSSMConv(g.v(y), g.v(x), g.w(w), g.m.convState[layer], g.runs, p))
	return y
}

func (g *cpuGraph) DeltaNet(qkv, beta, alpha Act, d *DeltaNet) Act {
	p := d.Params
	p.Slots = g.m.slots
	y := g.new(qkv.Rows, p.VHeads*p.HeadV)
	g.fail(ops.RefGatedDeltaNet(g.v(y), g.v(qkv), g.v(beta), g.v(alpha), g.w(d.DtBias), g.w(d.A), g.m.ssmState[d.Layer], g.runs, p))
	return y
}

func (g *cpuGraph) fail(err error) {
	if g.err == nil && err != nil {
		g.err = err
	}
}

func (g *cpuGraph) new(rows, cols int) Act {
	g.vals = append(g.vals, make([]float32, rows*cols))
	return Act{ref: len(g.vals) - 1, Rows: rows, Cols: cols}
}

func (g *cpuGraph) v(a Act) []float32 { return g.vals[a.ref][:a.Rows*a.Cols] }

func (g *cpuGraph) w(t *Tensor) []float32 {
	if t == nil {
		return nil
	}
	return g.m.w[t.idx]
}

func (g *cpuGraph) CtxSize() int { return g.m.ctx }

func (g *cpuGraph) Layer() {
	if !g.started {
		g.base, g.started = len(g.vals), true
	}
	clear(g.vals[g.base:])
	g.vals = g.vals[:g.base]
}

func (g *cpuGraph) rowsOf(t *Tensor, idx []int32) Act {
	E := t.Cols()
	x := g.new(len(idx), E)
	w, xv := g.w(t), g.v(x)
	for i, id := range idx {
		if id >= 0 && int(id) < t.Rows() {
			copy(xv[i*E:(i+1)*E], w[int(id)*E:(int(id)+1)*E])
		}
	}
	return x
}

func (g *cpuGraph) Embed(w *Tensor) Act          { return g.rowsOf(w, g.b.Tokens) }
func (g *cpuGraph) EmbedPositions(w *Tensor) Act { return g.rowsOf(w, g.b.Pos) }

// matmul writes (or with add adds) x's rows times t's transpose to y
// ([x.Rows][t.Rows()]): ops.MatMulF32Ref, or with q8Act, for the weight
// types of the integer-dot path, ops.MatVecQ8_1F32Ref of x's rows rounded
// to Q8_1 (ops.QuantizeQ8_1Ref) as that path sees them.
func (g *cpuGraph) matmul(y []float32, t *Tensor, x Act, add bool) {
	w, xv := g.w(t), g.v(x)
	R, C, n := t.Rows(), t.Cols(), x.Rows
	if x.Cols != C {
		g.fail(fmt.Errorf("engine: MatMul %s: width %d, want %d", t.Name, x.Cols, C))
		return
	}
	out := y[:n*R]
	if add {
		out = make([]float32, n*R)
	}
	var err error
	if g.m.q8Act && ops.HasIntegerDot(t.Type) {
		q, ds := make([]int8, n*C), make([]float32, 2*n*C/32)
		for i := 0; i < n && err == nil; i++ {
			err = ops.QuantizeQ8_1Ref(xv[i*C:(i+1)*C], q[i*C:(i+1)*C], ds[2*i*C/32:2*(i+1)*C/32])
		}
		if err == nil {
			err = ops.MatVecQ8_1F32Ref(w, R, C, q, ds, n, out)
		}
	} else {
		err = ops.MatMulF32Ref(w, R, C, xv, n, out)
	}
	if err != nil {
		g.fail(fmt.Errorf("engine: MatMul %s: %w", t.Name, err))
		return
	}
	if add {
		for i, v := range out {
			y[i] += v
		}
	}
}

func (g *cpuGraph) MatMul(w *Tensor, x Act) Act {
	y := g.new(x.Rows, w.Rows())
	g.matmul(g.v(y), w, x, false)
	return y
}

func (g *cpuGraph) MatMulAdd(dst Act, w *Tensor, x Act) { g.matmul(g.v(dst), w, x, true) }

func (g *cpuGraph) QKV(x Act, w, b [3]*Tensor) [3]Act { return qkvApart(g, x, w, b) }

func (g *cpuGraph) GLU(x Act, gate, up *Tensor, gelu bool) Act {
	y, u := g.MatMul(gate, x), g.MatMul(up, x)
	if gelu {
		ops.RefGeGLU(g.v(y), g.v(y), g.v(u))
	} else {
		ops.RefSwiGLU(g.v(y), g.v(y), g.v(u))
	}
	return y
}

func (g *cpuGraph) Add(dst, a Act) {
	d := g.v(dst)
	ops.RefAdd(d, d, g.v(a), len(d), len(d))
}

func (g *cpuGraph) AddBias(x Act, b *Tensor) {
	xv, bv := g.v(x), g.w(b)
	ops.RefAdd(xv, xv, bv, len(xv), len(bv))
}

func (g *cpuGraph) Scale(x Act, s float32) { ops.RefScale(g.v(x), g.v(x), s) }

func (g *cpuGraph) RMSNorm(x Act, w *Tensor, eps float32) Act {
	y := g.new(x.Rows, x.Cols)
	ops.RefRMSNorm(g.v(y), g.v(x), g.w(w), x.Rows, x.Cols, eps)
	return y
}

func (g *cpuGraph) RMSNormInPlace(x Act, w *Tensor, eps float32) {
	ops.RefRMSNorm(g.v(x), g.v(x), g.w(w), x.Rows, x.Cols, eps)
}

func (g *cpuGraph) LayerNorm(x Act, w, b *Tensor, eps float32) Act {
	y := g.new(x.Rows, x.Cols)
	ops.RefLayerNorm(g.v(y), g.v(x), g.w(w), g.w(b), x.Rows, x.Cols, eps)
	return y
}

func (g *cpuGraph) LayerNormInPlace(x Act, w, b *Tensor, eps float32) {
	ops.RefLayerNorm(g.v(x), g.v(x), g.w(w), g.w(b), x.Rows, x.Cols, eps)
}

// rope rotates x ([rows][heads*r.HeadDim]) by each row's position (the
// GPU's RoPEKV, for Attention).
func (g *cpuGraph) rope(x Act, r Rope) {
	p := ropeParams(r, x.Rows, x.Cols/r.HeadDim)
	src := append([]float32(nil), g.v(x)...)
	g.fail(ops.RefRoPE(g.v(x), src, g.b.Pos, g.w(r.Factors), p))
}

func (g *cpuGraph) Attention(q, k, v Act, a Attn) Act {
	n, D := q.Rows, a.HeadDim
	out := g.new(n, a.Heads*D)
	qv, kv, vv, ov := g.v(q), g.v(k), g.v(v), g.v(out)
	kw := a.KVHeads * D
	if err := a.checkSinks(); err != nil {
		g.fail(err)
		return out
	}
	if a.Kind == Bidirectional {
		if a.Rope != nil {
			g.fail(fmt.Errorf("engine: Attention: a RoPE fused into bidirectional attention"))
			return out
		}
		g.fail(ops.RefAttentionBatch(ov, qv, kv, vv, g.b.Pos, g.ends, g.w(a.Sinks),
			ops.BatchAttnParams{Rows: n, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: D, Scale: a.Scale}))
		return out
	}
	if a.Rope != nil {
		// As the GPU's RoPEKV: q turns in place, k only in the cache.
		g.rope(q, *a.Rope)
		rk := g.new(k.Rows, k.Cols)
		copy(g.v(rk), kv)
		g.rope(rk, *a.Rope)
		kv = g.v(rk)
	}
	if n == 0 {
		return out
	}
	m := g.m
	kc, vc := m.kCache[a.Layer], m.vCache[a.Layer]
	for i := range n {
		at := m.row(g.b.Slots[i], g.b.Pos[i], kw)
		storeKV(kc[at:at+kw], kv[i*kw:(i+1)*kw], m.kvTypes[0])
		storeKV(vc[at:at+kw], vv[i*kw:(i+1)*kw], m.kvTypes[1])
	}
	// The f32 pools hold what the GPU's pools would (storeKV); attention
	// reads them through the same page tables (as the GPU's inputs).
	pos := g.b.Pos
	if g.b.AttnPos != nil {
		pos = g.b.AttnPos // a non-causal image (Batch.AttnPos)
	}
	cache := ops.KVParams{Slots: m.slots, NCtx: m.ctx, KVDim: kw, Pages: m.kv.pages, PageSize: m.kv.pageSize, Type: m.kvTypes[0]}
	table := make([]int32, m.slots*cache.TablePages())
	for s := range m.slots {
		m.kv.tableRow(s, table[s*cache.TablePages():(s+1)*cache.TablePages()])
	}
	g.fail(ops.RefAttentionF32(ov, qv, kc, vc, g.b.Slots, pos, table, g.w(a.Sinks), ops.AttnParams{Rows: n, Heads: a.Heads, KVHeads: a.KVHeads,
		HeadDim: D, Cache: cache, VType: m.kvTypes[1], Causal: true, Scale: a.Scale, Window: a.Window, SoftCap: a.SoftCap}))
	return out
}

func (g *cpuGraph) GELU(x Act) { ops.RefGELU(g.v(x), g.v(x)) }

func (g *cpuGraph) OutputRows(x Act) Act {
	h := g.new(len(g.rows), x.Cols)
	xv, hv, E := g.v(x), g.v(h), x.Cols
	for i, r := range g.rows {
		copy(hv[i*E:(i+1)*E], xv[int(r)*E:(int(r)+1)*E])
	}
	return h
}

func (g *cpuGraph) Hidden(h Act) {
	g.hidden = append([]float32(nil), g.v(h)[g.nLogits*h.Cols:]...)
}

func (g *cpuGraph) Logits(w *Tensor, h Act, softcap float32) {
	if g.nLogits == 0 {
		return
	}
	rows := Act{ref: h.ref, Rows: g.nLogits, Cols: h.Cols}
	g.logits = make([]float32, g.nLogits*w.Rows())
	g.matmul(g.logits, w, rows, false)
	if softcap > 0 {
		ops.RefSoftCap(g.logits, g.logits, softcap)
	}
}

func (g *cpuGraph) EmbedInputs(x Act) {
	if g.b.Embeds == nil {
		return
	}
	if x.Cols != g.m.o.Embd {
		g.fail(fmt.Errorf("engine: EmbedInputs: width %d, want %d", x.Cols, g.m.o.Embd))
		return
	}
	xv := g.v(x)
	for i, e := range g.b.Embeds {
		if e != nil {
			if len(e) != x.Cols {
				g.fail(fmt.Errorf("engine: batch row %d: an input embedding of %d values, want %d", i, len(e), x.Cols))
				return
			}
			copy(xv[i*x.Cols:(i+1)*x.Cols], e)
		}
	}
}
