package vision

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
)

// cpuGraph is the CPU reference of the encoder: plain Go over f32 slices,
// the ops' Ref functions (float64 accumulation), weights dequantized as the
// reference does.
type cpuGraph struct {
	m    *Model
	in   []float32
	vals [][]float32
	err  error
}

func (g *cpuGraph) fail(err error) {
	if g.err == nil && err != nil {
		g.err = err
	}
}

func (g *cpuGraph) new(rows, cols int) act {
	g.vals = append(g.vals, make([]float32, rows*cols))
	return act{ref: len(g.vals) - 1, rows: rows, cols: cols}
}

func (g *cpuGraph) v(a act) []float32 { return g.vals[a.ref][:a.rows*a.cols] }

func (g *cpuGraph) f32(t *Tensor) []float32 {
	v, err := t.f32()
	g.fail(err)
	if v == nil {
		v = make([]float32, t.Rows*t.Cols)
	}
	return v
}

func (g *cpuGraph) shape(op string, ok bool) bool {
	if !ok {
		g.fail(fmt.Errorf("BUG: vision: %s: shapes do not match", op))
	}
	return ok && g.err == nil
}

func (g *cpuGraph) image() act {
	s := g.m.P.ImageSize
	x := g.new(3, s*s)
	copy(g.v(x), g.in)
	return x
}

func (g *cpuGraph) im2col(x act, p ops.Im2ColParams) act {
	y := g.new(p.Patches(), p.PatchLen())
	if g.shape("im2col", x.rows*x.cols == p.C*p.H*p.W) {
		g.fail(ops.RefIm2Col(g.v(y), g.v(x), p))
	}
	return y
}

func (g *cpuGraph) linear(w, b *Tensor, x act) act {
	y := g.new(x.rows, w.Rows)
	if g.shape("linear "+w.Name, x.cols == w.Cols && (b == nil || b.Cols == w.Rows)) {
		g.fail(ops.MatMulRef(w.Type, w.Data, w.Rows, w.Cols, g.v(x), x.rows, g.v(y)))
		if b != nil {
			ops.RefAdd(g.v(y), g.v(y), g.f32(b), len(g.v(y)), b.Cols)
		}
	}
	return y
}

func (g *cpuGraph) add(dst, a act) {
	if g.shape("add", dst.rows == a.rows && dst.cols == a.cols) {
		ops.RefAdd(g.v(dst), g.v(dst), g.v(a), len(g.v(dst)), len(g.v(dst)))
	}
}

func (g *cpuGraph) addTensor(dst act, t *Tensor) {
	if g.shape("addTensor "+t.Name, t.Cols == dst.cols && t.Rows >= dst.rows) {
		n := len(g.v(dst))
		ops.RefAdd(g.v(dst), g.v(dst), g.f32(t)[:n], n, n)
	}
}

func (g *cpuGraph) appendRow(x act, t *Tensor) act {
	y := g.new(x.rows+1, x.cols)
	if g.shape("appendRow "+t.Name, t.Cols == x.cols && t.Rows == 1) {
		copy(g.v(y), g.v(x))
		copy(g.v(y)[x.rows*x.cols:], g.f32(t))
	}
	return y
}

func (g *cpuGraph) rows(x act, from, n int) act {
	y := g.new(n, x.cols)
	if g.shape("rows", from >= 0 && from+n <= x.rows) {
		copy(g.v(y), g.v(x)[from*x.cols:])
	}
	return y
}

func (g *cpuGraph) layerNorm(x act, w, b *Tensor, eps float32) act {
	y := g.new(x.rows, x.cols)
	if g.shape("layerNorm "+w.Name, w.Cols == x.cols) {
		bias := make([]float32, x.cols)
		if b != nil {
			bias = g.f32(b)
		}
		ops.RefLayerNorm(g.v(y), g.v(x), g.f32(w), bias, x.rows, x.cols, eps)
	}
	return y
}

func (g *cpuGraph) rmsNorm(x act, w *Tensor, eps float32) act {
	y := g.new(x.rows, x.cols)
	if g.shape("rmsNorm "+w.Name, w.Cols == x.cols) {
		ops.RefRMSNorm(g.v(y), g.v(x), g.f32(w), x.rows, x.cols, eps)
	}
	return y
}

func (g *cpuGraph) attention(q, k, v act, heads int) act {
	y := g.new(q.rows, q.cols)
	if g.shape("attention", q.rows == k.rows && k.rows == v.rows && q.cols == k.cols && k.cols == v.cols && q.cols%heads == 0) {
		pos, end := make([]int32, q.rows), make([]int32, q.rows)
		for i := range pos {
			pos[i], end[i] = int32(i), int32(q.rows)
		}
		g.fail(ops.RefAttentionBatch(g.v(y), g.v(q), g.v(k), g.v(v), pos, end,
			ops.BatchAttnParams{Rows: q.rows, Heads: heads, KVHeads: heads, HeadDim: q.cols / heads, Scale: attnScale(&g.m.P)}))
	}
	return y
}

func (g *cpuGraph) activate(x act, a Activation) {
	if g.err != nil {
		return
	}
	switch a {
	case QuickGELU:
		ops.RefQuickGELU(g.v(x), g.v(x))
	case GELU:
		ops.RefGELU(g.v(x), g.v(x))
	case SiLU:
		ops.RefSiLU(g.v(x), g.v(x))
	}
}

func (g *cpuGraph) avgPool(x act, p ops.PoolParams) act {
	y := g.new(p.Tokens(), p.C)
	if g.shape("avgPool", x.rows == p.H*p.W && x.cols == p.C) {
		g.fail(ops.RefAvgPool(g.v(y), g.v(x), p))
	}
	return y
}

func (g *cpuGraph) pixelShuffle(x act, p ops.PoolParams) act {
	y := g.new(p.Tokens(), p.C*p.K*p.K)
	if g.shape("pixelShuffle", x.rows == p.H*p.W && x.cols == p.C) {
		g.fail(ops.RefPixelShuffle(g.v(y), g.v(x), p))
	}
	return y
}

// EncodeCPU runs the encoder and projector on the preprocessed image in
// (Preprocess's output, [3][ImageSize][ImageSize]) in plain Go and returns
// the image embeddings, [Tokens][OutEmbd] row-major. It is the reference
// the GPU path is tested against (slow: for tests and --verify).
func (m *Model) EncodeCPU(in []float32) ([]float32, error) {
	s := m.P.ImageSize
	if len(in) != 3*s*s {
		return nil, fmt.Errorf("vision: EncodeCPU: %d input values, want 3x%dx%d", len(in), s, s)
	}
	g := &cpuGraph{m: m, in: in}
	out := m.fam.forward(g)
	if g.err != nil {
		return nil, g.err
	}
	if out.rows != m.Tokens() || out.cols != m.P.OutEmbd {
		return nil, fmt.Errorf("BUG: vision: the encoder gave %d x %d values, want %d x %d", out.rows, out.cols, m.Tokens(), m.P.OutEmbd)
	}
	return g.v(out), nil
}
