package vision

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/vk"
)

// gpuGraph records a family's forward pass into a vk.Cmd (graph's GPU
// implementation). Every activation of the pass gets a buffer of its own,
// sized by a dry run at load (no Cmd); the pass is the same for every
// image, so the n-th activation of a pass is always buffer n and the
// kernels' descriptor sets are reused. vk.Cmd puts a barrier before every
// command.
type gpuGraph struct {
	u     *GPU
	c     *vk.Cmd // nil in the dry run
	err   error
	next  int      // the next activation buffer
	sizes []uint64 // the dry run's activation sizes
	input int      // the activation that holds the input image
	// attnRows is the row count of the pass's attention (all of one
	// image's tokens; the same in every layer).
	attnRows int
}

func (g *gpuGraph) start(c *vk.Cmd) { g.c, g.err, g.next = c, nil, 0 }

func (g *gpuGraph) fail(err error) {
	if g.err == nil && err != nil {
		g.err = err
	}
}

func (g *gpuGraph) live() bool { return g.err == nil && g.c != nil }

func (g *gpuGraph) alloc(rows, cols int) act {
	i := g.next
	g.next++
	n := 4 * uint64(rows*cols)
	switch {
	case g.c == nil:
		g.sizes = append(g.sizes, n)
	case i >= len(g.sizes) || n > g.sizes[i]:
		g.fail(fmt.Errorf("BUG: vision: activation %d of %d bytes the dry run did not reserve", i, n))
	}
	return act{ref: i, rows: rows, cols: cols}
}

func (g *gpuGraph) actBytes() int64 {
	var n int64
	for _, s := range g.sizes {
		n += int64(s)
	}
	return n
}

// r returns the device range of a.
func (g *gpuGraph) r(a act) vk.Range {
	if !g.live() {
		return vk.Range{}
	}
	return g.u.acts[a.ref].Range(0, 4*uint64(a.rows*a.cols))
}

func (g *gpuGraph) vec(t *Tensor) vk.Range {
	if t == nil {
		return g.u.zeros
	}
	return g.u.vecs[t.idx]
}

func (g *gpuGraph) check(op string, ok bool) bool {
	if !ok {
		g.fail(fmt.Errorf("BUG: vision: %s: shapes do not match", op))
	}
	return ok && g.live()
}

func (g *gpuGraph) image() act {
	s := g.u.m.P.ImageSize
	x := g.alloc(3, s*s)
	g.input = x.ref
	return x
}

func (g *gpuGraph) im2col(x act, p ops.Im2ColParams) act {
	y := g.alloc(p.Patches(), p.PatchLen())
	if g.check("im2col", x.rows*x.cols == p.C*p.H*p.W) {
		g.fail(g.u.k.Im2Col(g.c, g.r(y), g.r(x), p))
	}
	return y
}

func (g *gpuGraph) linear(w, b *Tensor, x act) act {
	y := g.alloc(x.rows, w.Rows)
	if g.check("linear "+w.Name, x.cols == w.Cols && (b == nil || b.Cols == w.Rows)) {
		g.fail(g.u.k.MulMat(g.c, g.u.mats[w.idx], g.r(x), x.rows, g.r(y)))
		if b != nil {
			n := y.rows * y.cols
			g.fail(g.u.k.Add(g.c, g.r(y), g.r(y), g.vec(b), n, y.cols))
		}
	}
	return y
}

func (g *gpuGraph) add(dst, a act) {
	if g.check("add", dst.rows == a.rows && dst.cols == a.cols) {
		n := dst.rows * dst.cols
		g.fail(g.u.k.Add(g.c, g.r(dst), g.r(dst), g.r(a), n, n))
	}
}

func (g *gpuGraph) addTensor(dst act, t *Tensor) {
	if g.check("addTensor "+t.Name, t.Cols == dst.cols && t.Rows >= dst.rows) {
		n := dst.rows * dst.cols
		g.fail(g.u.k.Add(g.c, g.r(dst), g.r(dst), g.vec(t), n, n))
	}
}

func (g *gpuGraph) appendRow(x act, t *Tensor) act {
	y := g.alloc(x.rows+1, x.cols)
	if g.check("appendRow "+t.Name, t.Cols == x.cols && t.Rows == 1) {
		xb, rb := 4*uint64(x.rows*x.cols), 4*uint64(x.cols)
		g.c.Copy(g.r(y).Sub(0, xb), g.r(x))
		g.c.NoBarrier() // the two copies write disjoint bytes
		g.c.Copy(g.r(y).Sub(xb, rb), g.vec(t))
	}
	return y
}

func (g *gpuGraph) rows(x act, from, n int) act {
	y := g.alloc(n, x.cols)
	if g.check("rows", from >= 0 && from+n <= x.rows) {
		rb := 4 * uint64(x.cols)
		g.c.Copy(g.r(y), g.r(x).Sub(uint64(from)*rb, uint64(n)*rb))
	}
	return y
}

func (g *gpuGraph) layerNorm(x act, w, b *Tensor, eps float32) act {
	y := g.alloc(x.rows, x.cols)
	if g.check("layerNorm "+w.Name, w.Cols == x.cols) {
		g.fail(g.u.k.LayerNorm(g.c, g.r(y), g.r(x), g.vec(w), g.vec(b), x.rows, x.cols, eps))
	}
	return y
}

func (g *gpuGraph) rmsNorm(x act, w *Tensor, eps float32) act {
	y := g.alloc(x.rows, x.cols)
	if g.check("rmsNorm "+w.Name, w.Cols == x.cols) {
		g.fail(g.u.k.RMSNorm(g.c, g.r(y), g.r(x), g.vec(w), x.rows, x.cols, eps))
	}
	return y
}

func (g *gpuGraph) attention(q, k, v act, heads int) act {
	y := g.alloc(q.rows, q.cols)
	g.attnRows = q.rows
	if g.check("attention", q.rows == k.rows && k.rows == v.rows && q.cols == k.cols && k.cols == v.cols && q.cols%heads == 0) {
		p := ops.BatchAttnParams{Rows: q.rows, Heads: heads, KVHeads: heads, HeadDim: q.cols / heads, Scale: attnScale(&g.u.m.P)}
		g.fail(g.u.k.AttentionBatch(g.c, g.r(y), g.r(q), g.r(k), g.r(v), g.u.pos, g.u.end, p))
	}
	return y
}

func (g *gpuGraph) activate(x act, a Activation) {
	if !g.live() {
		return
	}
	n := x.rows * x.cols
	switch a {
	case QuickGELU:
		g.fail(g.u.k.QuickGELU(g.c, g.r(x), g.r(x), n))
	case GELU:
		g.fail(g.u.k.GELU(g.c, g.r(x), g.r(x), n))
	case SiLU:
		g.fail(g.u.k.SiLU(g.c, g.r(x), g.r(x), n))
	}
}

func (g *gpuGraph) avgPool(x act, p ops.PoolParams) act {
	y := g.alloc(p.Tokens(), p.C)
	if g.check("avgPool", x.rows == p.H*p.W && x.cols == p.C) {
		g.fail(g.u.k.AvgPool(g.c, g.r(y), g.r(x), p))
	}
	return y
}

func (g *gpuGraph) pixelShuffle(x act, p ops.PoolParams) act {
	y := g.alloc(p.Tokens(), p.C*p.K*p.K)
	if g.check("pixelShuffle", x.rows == p.H*p.W && x.cols == p.C) {
		g.fail(g.u.k.PixelShuffle(g.c, g.r(y), g.r(x), p))
	}
	return y
}
