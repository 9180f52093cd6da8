package engine

import (
	"fmt"
	"strings"

	"github.com/vkllm/vkllm/vk"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
)

// gpuGraph records an architecture's forward pass into a vk.Cmd (Graph's
// GPU implementation). Activations are handed out by a bump pointer over a
// virtual arena that Layer rewinds; every Act is reserved for BatchSize
// rows, so its offset does not depend on the batch. Each offset the pass
// uses gets a device buffer of its own (sized for the largest Act there),
// so the kernels' cached descriptor sets are reused from step to step and
// the validation layer sees exactly which activation a kernel binds. A dry
// run (no Cmd) at load lists the offsets and the matrix shapes.
//
// Barriers: vk.Cmd puts one before every command unless told otherwise.
// The graph tracks the activation and cache ranges read and written since
// the last barrier and skips it for a command that touches none of what
// those wrote, and writes none of what they read (the q, k and v
// projections, their biases, the q and k norms and rotations, the K and V
// cache writes, the gate and up projections).
type gpuGraph struct {
	m   *GPUModel
	c   *vk.Cmd // nil in the dry run
	err error
	n   int // batch rows
	// out is the pass's output rows: how many want their argmax token,
	// their topK largest logits, their logits and their hidden states (in
	// that order).
	out       passShape
	top, base uint64 // the arena's bump pointer, and where blocks start
	inLayers  bool
	slotOf    map[uint64]int // arena offset -> activation buffer (GPUModel.acts)
	slotSize  []uint64       // bytes of each activation buffer
	pend      [maxPending]access
	npend     int
	// shapes collects the matrix shapes of the dry run, and matBytes the
	// bytes of the weights its matrix products read, by weight kind.
	shapes   map[matShape]bool
	matBytes map[string]int64
	// keys is the most positions a row of the pass attends to (the
	// longest row's); split attention divides that many keys.
	keys int
	// attnScratch is the most scratch a split attention dispatch of the
	// pass may need (set by the dry run, reserved by GPUModel.reserve).
	attnScratch uint64
	// fusedKinds lists the fused weights the dry run met, with their
	// epilogue (gluNone: the q|k|v split), for PrepareFused.
	fusedKinds map[*Tensor]uint8
	// input holds the values Input reads (a Net's, host-visible; see
	// GPUNet), inputBytes the most the dry run's Input calls read.
	input      vk.Range
	inputBytes uint64
}

// The epilogues of the fused weights (gpuGraph.fusedKinds).
const (
	gluNone = iota
	gluSwiGLU
	gluGeGLU
)

// matShape is one matrix-kernel configuration PrepareWeight compiles.
type matShape struct {
	t          gguf.GGMLType
	rows, cols int
	add        bool
}

// access is a byte range a recorded command reads or writes.
type access struct {
	buf    *vk.Buffer
	lo, hi uint64
	write  bool
}

const maxPending = 16

// start readies the graph for a pass of n rows whose rows attend to at
// most keys positions (c nil: the dry run, of the largest case).
func (g *gpuGraph) start(c *vk.Cmd, s passShape, keys int) {
	g.c, g.err, g.n, g.out, g.keys = c, nil, s.n, s, keys
	g.top, g.base, g.inLayers, g.npend = 0, 0, false, 0
}

func (g *gpuGraph) fail(err error) {
	if g.err == nil && err != nil {
		g.err = err
	}
}

// live reports whether ops should record: no error so far and not a dry run.
func (g *gpuGraph) live() bool { return g.err == nil && g.c != nil }

// alloc reserves an activation of rows x cols values and bytes bytes (room
// for the largest batch).
func (g *gpuGraph) alloc(rows, cols, bytes int) Act {
	off := g.top
	g.top += (uint64(bytes) + 255) &^ 255
	i, ok := g.slotOf[off]
	switch {
	case g.c == nil && !ok:
		i = len(g.slotSize)
		g.slotOf[off] = i
		g.slotSize = append(g.slotSize, uint64(bytes))
	case g.c == nil:
		g.slotSize[i] = max(g.slotSize[i], uint64(bytes))
	case !ok || uint64(bytes) > g.slotSize[i]:
		g.fail(fmt.Errorf("BUG: engine: an activation of %d bytes at offset %d the dry run did not reserve", bytes, off))
		i = 0
	}
	return Act{ref: i, cap: bytes, Rows: rows, Cols: cols}
}

// actBytes is the total size of the activation buffers.
func (g *gpuGraph) actBytes() int64 {
	var n int64
	for _, s := range g.slotSize {
		n += int64(s)
	}
	return n
}

// like reserves an activation of x's rows and cols columns.
func (g *gpuGraph) like(x Act, cols int) Act {
	return g.alloc(x.Rows, cols, x.cap/x.Cols*cols)
}

// r returns the device range of a.
func (g *gpuGraph) r(a Act) vk.Range {
	if g.c == nil || g.err != nil {
		return vk.Range{}
	}
	return g.m.acts[a.ref].Range(0, 4*uint64(a.Rows*a.Cols))
}

func (g *gpuGraph) weight(t *Tensor) ops.Weight { return g.m.weights[t.idx] }

// vec returns the device range of the vector t (none for nil).
func (g *gpuGraph) vec(t *Tensor) vk.Range {
	if t == nil {
		return vk.Range{}
	}
	return g.m.weights[t.idx].Data
}

func overlaps(a access, r vk.Range) bool {
	return a.buf == r.Buf && a.lo < r.Offset+r.Size && r.Offset < a.hi
}

// dep prepares for a command that writes w and reads reads: it skips the
// barrier before it when nothing pending conflicts.
func (g *gpuGraph) dep(w vk.Range, reads ...vk.Range) {
	g.deps([3]vk.Range{w}, reads...)
}

// deps is dep for a command that writes up to three ranges (those with a
// buffer).
func (g *gpuGraph) deps(ws [3]vk.Range, reads ...vk.Range) {
	nw := 0
	for _, w := range ws {
		if w.Buf != nil {
			nw++
		}
	}
	conflict := g.npend+nw+len(reads) > maxPending
	for _, p := range g.pend[:g.npend] {
		if conflict {
			break
		}
		for _, w := range ws {
			conflict = conflict || w.Buf != nil && overlaps(p, w)
		}
		if p.write {
			for _, r := range reads {
				conflict = conflict || overlaps(p, r)
			}
		}
	}
	if conflict {
		g.npend = 0 // the barrier vk.Cmd puts before the command syncs them
	} else if g.npend > 0 {
		g.c.NoBarrier()
	}
	for _, w := range ws {
		if w.Buf != nil {
			g.pend[g.npend] = access{buf: w.Buf, lo: w.Offset, hi: w.Offset + w.Size, write: true}
			g.npend++
		}
	}
	for _, r := range reads {
		g.pend[g.npend] = access{buf: r.Buf, lo: r.Offset, hi: r.Offset + r.Size}
		g.npend++
	}
}

func (g *gpuGraph) shapeErr(op string, want, got int) {
	g.fail(fmt.Errorf("engine: %s: width %d, want %d", op, got, want))
}

func (g *gpuGraph) CtxSize() int { return g.m.cfg.CtxSize }

func (g *gpuGraph) Layer() {
	if !g.inLayers {
		g.base, g.inLayers = g.top, true
	}
	g.top = g.base
}

func (g *gpuGraph) embedRows(w *Tensor, input int) Act {
	x := g.alloc(g.n, w.Cols(), 4*g.m.cfg.BatchSize*w.Cols())
	if g.live() {
		dst := g.r(x)
		g.dep(dst)
		g.fail(g.m.k.GetRows(g.c, g.weight(w), g.m.input(input, g.n), g.n, dst))
	}
	return x
}

func (g *gpuGraph) Embed(w *Tensor) Act { return g.embedRows(w, inIDs) }

func (g *gpuGraph) EmbedPositions(w *Tensor) Act { return g.embedRows(w, inPos) }

// mat notes w's matrix product: in the dry run its shape and bytes, while
// recording a profiled pass the weight kind that labels its dispatches
// (unlabel clears it).
func (g *gpuGraph) mat(w *Tensor, add bool) {
	if g.c == nil && g.shapes != nil {
		g.shapes[matShape{w.Type, w.Rows(), w.Cols(), add}] = true
		if g.matBytes != nil {
			g.matBytes[weightKind(w.Name)] += int64(len(w.Data))
		}
	}
	if g.live() && g.c.Profiling() {
		g.c.Label(weightKind(w.Name))
	}
}

func (g *gpuGraph) unlabel() {
	if g.live() && g.c.Profiling() {
		g.c.Label("")
	}
}

// weightKind is a tensor's name without its block prefix and ".weight"
// ("blk.3.attn_q.weight" -> "attn_q", "output.weight" -> "output"): what
// every layer's copy of the weight shares. It allocates nothing.
func weightKind(name string) string {
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			name = rest[i+1:]
		}
	}
	return strings.TrimSuffix(name, ".weight")
}

func (g *gpuGraph) MatMul(w *Tensor, x Act) Act {
	y := g.like(x, w.Rows())
	g.matInto(y, w, x)
	return y
}

// matInto records y = x times w transposed.
func (g *gpuGraph) matInto(y Act, w *Tensor, x Act) {
	if x.Cols != w.Cols() || y.Cols != w.Rows() {
		g.shapeErr("MatMul "+w.Name, w.Cols(), x.Cols)
	}
	g.mat(w, false)
	if g.live() && x.Rows > 0 {
		g.dep(g.r(y), g.r(x))
		g.fail(g.m.k.MulMat(g.c, g.weight(w), g.r(x), x.Rows, g.r(y)))
	}
	g.unlabel()
}

// fuses reports whether the fused weight f takes this pass's rows of x
// (decode-shaped batches; see ops.Kernels.CanFuse); in the dry run it
// notes f's epilogue for PrepareFused and its bytes for the profile.
func (g *gpuGraph) fuses(f *Tensor, x Act, kind uint8) bool {
	if g.c == nil {
		if g.fusedKinds != nil {
			g.fusedKinds[f] = kind
		}
		if g.matBytes != nil {
			for _, p := range f.parts {
				g.matBytes[weightKind(f.Name)] += int64(len(p.Data))
				g.matBytes[weightKind(p.Name)] -= int64(len(p.Data)) // counted by the parts' own products
			}
		}
		return false
	}
	return g.live() && x.Rows > 0 && g.m.k.CanFuse(g.weight(f), x.Rows)
}

func (g *gpuGraph) QKV(x Act, w, b [3]*Tensor) [3]Act {
	f := fusedOf(w[:]...)
	if f == nil {
		return qkvApart(g, x, w, b)
	}
	// The same activations either way, so that the arena's layout does
	// not depend on the batch.
	out := [3]Act{g.like(x, w[0].Rows()), g.like(x, w[1].Rows()), g.like(x, w[2].Rows())}
	fb := fusedOf(b[:]...)
	if !g.fuses(f, x, gluNone) {
		for i := range w {
			g.matInto(out[i], w[i], x)
		}
		for i := range b {
			if b[i] != nil {
				g.AddBias(out[i], b[i])
			}
		}
		return out
	}
	if x.Cols != f.Cols() {
		g.shapeErr("QKV "+f.Name, f.Cols(), x.Cols)
		return out
	}
	g.mat(f, false)
	g.deps([3]vk.Range{g.r(out[0]), g.r(out[1]), g.r(out[2])}, g.r(x))
	var bias vk.Range
	if fb != nil {
		bias = g.vec(fb)
	}
	g.fail(g.m.k.MatVecSplit(g.c, g.weight(f), g.r(x), x.Rows, [3]int{out[0].Cols, out[1].Cols, out[2].Cols},
		[3]vk.Range{g.r(out[0]), g.r(out[1]), g.r(out[2])}, bias))
	g.unlabel()
	if fb == nil {
		for i := range b {
			if b[i] != nil {
				g.AddBias(out[i], b[i])
			}
		}
	}
	return out
}

func (g *gpuGraph) GLU(x Act, gate, up *Tensor, gelu bool) Act {
	kind := uint8(gluSwiGLU)
	if gelu {
		kind = gluGeGLU
	}
	f := fusedOf(gate, up)
	if f == nil || !g.fuses(f, x, kind) {
		return g.glu(g.MatMul(gate, x), g.MatMul(up, x), gelu)
	}
	// The same activations as the unfused products, so that the arena's
	// layout does not depend on the batch.
	y, _ := g.like(x, gate.Rows()), g.like(x, up.Rows())
	if x.Cols != f.Cols() || gate.Rows() != up.Rows() {
		g.shapeErr("GLU "+f.Name, f.Cols(), x.Cols)
		return y
	}
	g.mat(f, false)
	g.dep(g.r(y), g.r(x))
	g.fail(g.m.k.MatVecGLU(g.c, g.weight(f), g.r(x), x.Rows, g.r(y), gelu))
	g.unlabel()
	return y
}

func (g *gpuGraph) MatMulAdd(dst Act, w *Tensor, x Act) {
	if x.Cols != w.Cols() || dst.Cols != w.Rows() || dst.Rows != x.Rows {
		g.shapeErr("MatMulAdd "+w.Name, w.Cols(), x.Cols)
	}
	g.mat(w, true)
	if g.live() && x.Rows > 0 {
		g.dep(g.r(dst), g.r(x), g.r(dst))
		g.fail(g.m.k.MulMatAdd(g.c, g.weight(w), g.r(x), x.Rows, g.r(dst)))
	}
	g.unlabel()
}

func (g *gpuGraph) Add(dst, a Act) {
	if dst.Rows*dst.Cols != a.Rows*a.Cols {
		g.shapeErr("Add", dst.Rows*dst.Cols, a.Rows*a.Cols)
	}
	if g.live() && dst.Rows > 0 {
		n := dst.Rows * dst.Cols
		g.dep(g.r(dst), g.r(dst), g.r(a))
		g.fail(g.m.k.Add(g.c, g.r(dst), g.r(dst), g.r(a), n, n))
	}
}

func (g *gpuGraph) AddBias(x Act, b *Tensor) {
	if b.Cols() != x.Cols {
		g.shapeErr("AddBias "+b.Name, x.Cols, b.Cols())
	}
	if g.live() && x.Rows > 0 {
		g.dep(g.r(x), g.r(x))
		g.fail(g.m.k.Add(g.c, g.r(x), g.r(x), g.vec(b), x.Rows*x.Cols, x.Cols))
	}
}

func (g *gpuGraph) Scale(x Act, s float32) {
	if g.live() && x.Rows > 0 {
		g.dep(g.r(x), g.r(x))
		g.fail(g.m.k.Scale(g.c, g.r(x), g.r(x), x.Rows*x.Cols, s))
	}
}

func (g *gpuGraph) rmsNorm(dst, x Act, w *Tensor, eps float32) {
	if w != nil && w.Cols() != x.Cols {
		g.shapeErr("RMSNorm "+w.Name, x.Cols, w.Cols())
	}
	if g.live() && x.Rows > 0 {
		g.dep(g.r(dst), g.r(x))
		g.fail(g.m.k.RMSNorm(g.c, g.r(dst), g.r(x), g.vec(w), x.Rows, x.Cols, eps))
	}
}

func (g *gpuGraph) RMSNorm(x Act, w *Tensor, eps float32) Act {
	y := g.like(x, x.Cols)
	g.rmsNorm(y, x, w, eps)
	return y
}

func (g *gpuGraph) RMSNormInPlace(x Act, w *Tensor, eps float32) { g.rmsNorm(x, x, w, eps) }

func (g *gpuGraph) layerNorm(dst, x Act, w, b *Tensor, eps float32) {
	if w.Cols() != x.Cols || b.Cols() != x.Cols {
		g.shapeErr("LayerNorm "+w.Name, x.Cols, w.Cols())
	}
	if g.live() && x.Rows > 0 {
		g.dep(g.r(dst), g.r(x))
		g.fail(g.m.k.LayerNorm(g.c, g.r(dst), g.r(x), g.vec(w), g.vec(b), x.Rows, x.Cols, eps))
	}
}

func (g *gpuGraph) LayerNorm(x Act, w, b *Tensor, eps float32) Act {
	y := g.like(x, x.Cols)
	g.layerNorm(y, x, w, b, eps)
	return y
}

func (g *gpuGraph) LayerNormInPlace(x Act, w, b *Tensor, eps float32) { g.layerNorm(x, x, w, b, eps) }

// ropeParams are the kernels' parameters of r over rows of heads heads.
func ropeParams(r Rope, rows, heads int) ops.RoPEParams {
	return ops.RoPEParams{Rows: rows, Heads: heads, HeadDim: r.HeadDim, RotDims: r.Dims, NeoX: r.NeoX,
		FreqBase: r.Base, FreqScale: r.Scale, AttnFactor: r.AttnFactor, ExtFactor: r.ExtFactor, CorrDims: r.CorrDims}
}

func (g *gpuGraph) Attention(q, k, v Act, a Attn) Act {
	out := g.like(q, a.Heads*a.HeadDim)
	if q.Cols != a.Heads*a.HeadDim || k.Cols != a.KVHeads*a.HeadDim || v.Cols != k.Cols {
		g.shapeErr("Attention", a.Heads*a.HeadDim, q.Cols)
	}
	if err := a.checkSinks(); err != nil {
		g.fail(err)
		return out
	}
	m := g.m
	if g.c == nil && g.err == nil && a.Kind != Bidirectional {
		// The dry run: the split attention of any batch up to this one,
		// its rows up to the whole context, must find its scratch.
		p := g.attnParams(q.Rows, k.Cols, a)
		p.Keys = m.cfg.CtxSize
		g.attnScratch = max(g.attnScratch, m.k.MaxAttentionScratch(p))
	}
	if !g.live() || q.Rows == 0 {
		return out
	}
	c, n := g.c, q.Rows
	slot, pos := m.input(inSlots, n), m.input(inPos, n)
	attnPos := g.attnPos(pos) // Batch.AttnPos where set
	if a.Kind == Bidirectional {
		if a.Rope != nil {
			g.fail(fmt.Errorf("engine: Attention: a RoPE fused into bidirectional attention"))
			return out
		}
		g.dep(g.r(out), g.r(q), g.r(k), g.r(v))
		g.fail(m.k.AttentionBatch(c, g.r(out), g.r(q), g.r(k), g.r(v), pos, m.input(inSeqEnd, n),
			ops.BatchAttnParams{Rows: n, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Scale: a.Scale, Sinks: g.vec(a.Sinks)}))
		return out
	}
	if a.Layer < 0 || a.Layer >= len(m.kCache) {
		g.fail(fmt.Errorf("BUG: engine: attention of layer %d, %d KV-cache layers", a.Layer, len(m.kCache)))
		return out
	}
	kc, vc := m.kCache[a.Layer], m.vCache[a.Layer]
	p := g.attnParams(n, k.Cols, a)
	p.Sinks = g.vec(a.Sinks)
	vCache := p.Cache
	vCache.Type = m.cfg.TypeV
	table := m.input(inTable, m.cfg.Slots*m.kv.tableLen)
	if r := a.Rope; r != nil {
		if r.HeadDim != a.HeadDim {
			g.shapeErr("Attention RoPE", a.HeadDim, r.HeadDim)
			return out
		}
		rp := ops.RoPEKVParams{Rope: ropeParams(*r, n, a.Heads), KVHeads: a.KVHeads, K: p.Cache, V: vCache}
		g.deps([3]vk.Range{g.r(q), kc, vc}, g.r(q), g.r(k), g.r(v))
		g.fail(m.k.RoPEKV(c, g.r(q), g.r(k), g.r(v), pos, slot, table, g.vec(r.Factors), kc, vc, rp))
	} else {
		g.dep(kc, g.r(k))
		g.fail(m.k.KVWrite(c, kc, g.r(k), slot, pos, table, n, p.Cache))
		g.dep(vc, g.r(v))
		g.fail(m.k.KVWrite(c, vc, g.r(v), slot, pos, table, n, vCache))
	}
	// Decode-shaped batches on GPUs split the rows' keys over more
	// workgroups (flash decoding); the partial results go to the scratch
	// the dry run reserved, which the split kernel writes: a read here,
	// so that the next layer's split waits for this one's merge.
	p.Splits = m.k.AttentionSplits(p)
	if p.Splits > 1 {
		if m.attnScratch == nil || ops.AttentionScratchBytes(p) > m.attnScratch.Size() {
			g.fail(fmt.Errorf("BUG: engine: split attention of %d rows, %d keys, %d splits: scratch not reserved", n, p.Keys, p.Splits))
			return out
		}
		p.Scratch = m.attnScratch.Range(0, m.attnScratch.Size())
		g.dep(g.r(out), g.r(q), kc, vc, p.Scratch)
	} else {
		g.dep(g.r(out), g.r(q), kc, vc)
	}
	g.fail(m.k.Attention(c, g.r(out), g.r(q), kc, vc, slot, attnPos, table, p))
	return out
}

// attnParams are the parameters of a causal attention over the KV cache
// for rows rows of a (kvDim values per position), the rows attending to
// at most g.keys positions; no splits and no sinks yet (the dry run has
// no weights on the device).
func (g *gpuGraph) attnParams(rows, kvDim int, a Attn) ops.AttnParams {
	m := g.m
	cache := ops.KVParams{Slots: m.cfg.Slots, NCtx: m.cfg.CtxSize, KVDim: kvDim, Pages: m.cfg.Pages, PageSize: m.cfg.PageSize, Type: m.cfg.TypeK}
	return ops.AttnParams{Rows: rows, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Cache: cache, VType: m.cfg.TypeV,
		Causal: true, Scale: a.Scale, Window: a.Window, SoftCap: a.SoftCap, Keys: g.keys}
}

// glu returns act(gate) * up in gate's memory: SiLU, or with gelu the
// tanh GELU (GLU's unfused epilogue).
func (g *gpuGraph) glu(gate, up Act, gelu bool) Act {
	if gate.Rows*gate.Cols != up.Rows*up.Cols {
		g.shapeErr("GLU", gate.Cols, up.Cols)
	}
	if g.live() && gate.Rows > 0 {
		g.dep(g.r(gate), g.r(gate), g.r(up))
		n := gate.Rows * gate.Cols
		if gelu {
			g.fail(g.m.k.GeGLU(g.c, g.r(gate), g.r(gate), g.r(up), n))
		} else {
			g.fail(g.m.k.SwiGLU(g.c, g.r(gate), g.r(gate), g.r(up), n))
		}
	}
	return gate
}

func (g *gpuGraph) GELU(x Act) {
	if g.live() && x.Rows > 0 {
		g.dep(g.r(x), g.r(x))
		g.fail(g.m.k.GELU(g.c, g.r(x), g.r(x), x.Rows*x.Cols))
	}
}

func (g *gpuGraph) OutputRows(x Act) Act {
	nOut := g.out.outRows()
	h := g.alloc(nOut, x.Cols, 4*g.m.cfg.BatchSize*x.Cols)
	if g.live() && nOut > 0 {
		g.dep(g.r(h), g.r(x))
		rows := ops.Weight{Type: gguf.TypeF32, Rows: x.Rows, Cols: x.Cols, Data: g.r(x)}
		g.fail(g.m.k.GetRows(g.c, rows, g.m.input(inRows, nOut), nOut, g.r(h)))
	}
	return h
}

func (g *gpuGraph) Hidden(h Act) {
	if h.Cols != g.m.o.Embd {
		g.shapeErr("Hidden", g.m.o.Embd, h.Cols)
	}
	if h.Rows < g.out.outRows() {
		g.fail(fmt.Errorf("engine: Hidden: %d rows, want %d", h.Rows, g.out.outRows()))
	}
	if !g.live() || g.out.hidden == 0 {
		return
	}
	size := 4 * uint64(g.out.hidden*h.Cols)
	dst, src := g.m.hidden.Range(0, size), g.r(h).Sub(4*uint64((g.out.argmax+g.out.top+g.out.logits)*h.Cols), size)
	g.dep(dst, src)
	g.c.Copy(dst, src)
}

func (g *gpuGraph) Logits(w *Tensor, h Act, softcap float32) {
	if w.Rows() != g.m.o.Vocab || h.Cols != w.Cols() {
		g.shapeErr("Logits "+w.Name, w.Cols(), h.Cols)
	}
	g.mat(w, false)
	rows := g.out.argmax + g.out.top + g.out.logits
	if !g.live() || rows == 0 {
		g.unlabel()
		return
	}
	// The output rows: argmax rows first, then top-k rows, then logits
	// rows (OutputRows).
	V := w.Rows()
	dst := g.m.logits.Range(0, 4*uint64(rows*V))
	g.dep(dst, g.r(h))
	g.fail(g.m.k.MulMat(g.c, g.weight(w), g.r(h).Sub(0, 4*uint64(rows*h.Cols)), rows, dst))
	g.unlabel()
	if softcap > 0 {
		g.dep(dst, dst)
		g.fail(g.m.k.SoftCap(g.c, dst, dst, rows*V, softcap))
	}
	if g.out.argmax > 0 {
		src, ids := dst.Sub(0, 4*uint64(g.out.argmax*V)), g.m.logits.Range(g.m.tokOff, 4*uint64(g.out.argmax))
		g.dep(ids, src)
		g.fail(g.m.k.Argmax(g.c, ids, src, g.out.argmax, V))
	}
	if g.out.top > 0 {
		src := dst.Sub(4*uint64(g.out.argmax*V), 4*uint64(g.out.top*V))
		n := 4 * uint64(g.out.top*g.out.topK)
		ids, vals := g.m.logits.Range(g.m.topIDOff, n), g.m.logits.Range(g.m.topValOff, n)
		g.deps([3]vk.Range{ids, vals}, src)
		g.fail(g.m.k.TopK(g.c, ids, vals, src, g.out.top, V, g.out.topK))
	}
}

// attnPos returns the attention's positions: Batch.AttnPos when the batch
// has them, else pos.
func (g *gpuGraph) attnPos(pos vk.Range) vk.Range {
	if !g.m.useAttnPos {
		return pos
	}
	return g.m.attnPos.Range(0, pos.Size)
}

func (g *gpuGraph) EmbedInputs(x Act) {
	if x.Cols != g.m.o.Embd {
		g.shapeErr("EmbedInputs", g.m.o.Embd, x.Cols)
	}
	if !g.live() {
		return
	}
	row := 4 * uint64(x.Cols)
	for _, r := range g.m.mediaRuns {
		dst := g.r(x).Sub(uint64(r.start)*row, uint64(r.n)*row)
		src := g.m.embIn.Range(uint64(r.start)*row, uint64(r.n)*row)
		g.dep(dst, src)
		g.c.Copy(dst, src)
	}
}

func (g *gpuGraph) Mul(dst, a Act) {
	if dst.Rows*dst.Cols != a.Rows*a.Cols {
		g.shapeErr("Mul", dst.Rows*dst.Cols, a.Rows*a.Cols)
	}
	if g.live() && dst.Rows > 0 {
		n := dst.Rows * dst.Cols
		g.dep(g.r(dst), g.r(dst), g.r(a))
		g.fail(g.m.k.Mul(g.c, g.r(dst), g.r(dst), g.r(a), n, n))
	}
}

func (g *gpuGraph) MulRows(dst, s Act) {
	if s.Rows != dst.Rows || s.Cols != 1 {
		g.shapeErr("MulRows", 1, s.Cols)
	}
	if g.live() && dst.Rows > 0 {
		g.dep(g.r(dst), g.r(dst), g.r(s))
		g.fail(g.m.k.MulRows(g.c, g.r(dst), g.r(dst), g.r(s), dst.Rows, dst.Cols))
	}
}

func (g *gpuGraph) Sigmoid(x Act) {
	if g.live() && x.Rows > 0 {
		g.dep(g.r(x), g.r(x))
		g.fail(g.m.k.Sigmoid(g.c, g.r(x), g.r(x), x.Rows*x.Cols))
	}
}

// runsRange is the pass's sequence runs (inRuns) and their count.
func (g *gpuGraph) runsRange() (vk.Range, int) {
	n := g.m.maxRuns(g.n)
	return g.m.input(inRuns, 4*n), n
}

func (g *gpuGraph) SSMConv(x Act, w *Tensor, layer int) Act {
	y := g.like(x, x.Cols)
	if w.Rows() != x.Cols {
		g.shapeErr("SSMConv "+w.Name, w.Rows(), x.Cols)
		return y
	}
	if !g.live() || x.Rows == 0 {
		return y
	}
	m := g.m
	st := m.convState[layer]
	runs, n := g.runsRange()
	g.deps([3]vk.Range{g.r(y), st}, g.r(x), st)
	g.fail(m.k.SSMConv(g.c, g.r(y), g.r(x), g.vec(w), st, runs, n, ops.SSMConvParams{Channels: x.Cols, Kernel: w.Cols(), Slots: m.cfg.Slots}))
	return y
}

func (g *gpuGraph) DeltaNet(qkv, beta, alpha Act, d *DeltaNet) Act {
	p := d.Params
	p.Slots = g.m.cfg.Slots
	y := g.like(qkv, p.VHeads*p.HeadV)
	if qkv.Cols != p.QKVCols() || beta.Cols != p.VHeads || alpha.Cols != p.VHeads {
		g.shapeErr("DeltaNet", p.QKVCols(), qkv.Cols)
		return y
	}
	if !g.live() || qkv.Rows == 0 {
		return y
	}
	m := g.m
	st := m.ssmState[d.Layer]
	runs, n := g.runsRange()
	g.deps([3]vk.Range{g.r(y), st}, g.r(qkv), g.r(beta), g.r(alpha), st)
	op := m.k.GatedDeltaNet
	if c := m.k.DeltaNetChunkRows(p); c > 0 && qkv.Rows >= 2*c && m.cfg.chunkedDelta.or(m.dev.Info().Type != vk.TypeCPU) {
		op = m.k.GatedDeltaNetChunked // prompt-shaped: parallel within chunks of c rows
	}
	g.fail(op(g.c, g.r(y), g.r(qkv), g.r(beta), g.r(alpha), g.vec(d.DtBias), g.vec(d.A), st, runs, n, p))
	return y
}
