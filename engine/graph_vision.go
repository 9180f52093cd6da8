package engine

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
)

// The Graph ops of Nets (a vision tower and projector, net.go): on the GPU
// (gpuGraph) and in the CPU reference (cpuGraph). A Net's pass has one
// shape, so each Act they make is reserved for exactly its own rows.

func (g *gpuGraph) Input(rows, cols int) Act {
	n := 4 * uint64(rows*cols)
	x := g.alloc(rows, cols, int(n))
	if g.c == nil {
		g.inputBytes = max(g.inputBytes, n)
		return x
	}
	if g.input.Size < n {
		g.fail(fmt.Errorf("engine: Input: %d values; the pass has %d", rows*cols, g.input.Size/4))
	}
	if g.live() {
		src := g.input.Sub(0, n)
		g.dep(g.r(x), src)
		g.c.Copy(g.r(x), src)
	}
	return x
}

func (g *gpuGraph) Im2Col(x Act, p ops.Im2ColParams) Act {
	y := g.alloc(p.Patches(), p.PatchLen(), 4*p.Patches()*p.PatchLen())
	if x.Rows*x.Cols != p.C*p.H*p.W {
		g.shapeErr("Im2Col", p.C*p.H*p.W, x.Rows*x.Cols)
	}
	if g.live() {
		g.dep(g.r(y), g.r(x))
		g.fail(g.m.k.Im2Col(g.c, g.r(y), g.r(x), p))
	}
	return y
}

func (g *gpuGraph) AvgPool(x Act, p ops.PoolParams) Act {
	y := g.alloc(p.Tokens(), p.C, 4*p.Tokens()*p.C)
	if x.Rows != p.H*p.W || x.Cols != p.C {
		g.shapeErr("AvgPool", p.H*p.W*p.C, x.Rows*x.Cols)
	}
	if g.live() {
		g.dep(g.r(y), g.r(x))
		g.fail(g.m.k.AvgPool(g.c, g.r(y), g.r(x), p))
	}
	return y
}

func (g *gpuGraph) PixelShuffle(x Act, p ops.PoolParams) Act {
	y := g.alloc(p.Tokens(), p.C*p.K*p.K, 4*p.Tokens()*p.C*p.K*p.K)
	if x.Rows != p.H*p.W || x.Cols != p.C {
		g.shapeErr("PixelShuffle", p.H*p.W*p.C, x.Rows*x.Cols)
	}
	if g.live() {
		g.dep(g.r(y), g.r(x))
		g.fail(g.m.k.PixelShuffle(g.c, g.r(y), g.r(x), p))
	}
	return y
}

func (g *gpuGraph) AppendRows(x Act, t *Tensor) Act {
	y := g.alloc(x.Rows+t.Rows(), x.Cols, x.cap+4*t.Rows()*x.Cols)
	if t.Cols() != x.Cols || t.Type != gguf.TypeF32 {
		g.fail(fmt.Errorf("engine: AppendRows %s: %v rows of %d, want f32 rows of %d", t.Name, t.Type, t.Cols(), x.Cols))
	}
	if g.live() {
		xb := 4 * uint64(x.Rows*x.Cols)
		head, tail := g.r(y).Sub(0, xb), g.r(y).Sub(xb, 4*uint64(t.Rows()*x.Cols))
		g.dep(head, g.r(x))
		g.c.Copy(head, g.r(x))
		g.dep(tail, g.vec(t)) // disjoint from head: no barrier
		g.c.Copy(tail, g.vec(t))
	}
	return y
}

func (g *gpuGraph) SliceRows(x Act, from, n int) Act {
	y := g.alloc(n, x.Cols, x.cap)
	if from < 0 || n <= 0 || from+n > x.Rows {
		g.fail(fmt.Errorf("engine: SliceRows: rows %d..%d of %d", from, from+n-1, x.Rows))
	}
	if g.live() {
		row := 4 * uint64(x.Cols)
		src := g.r(x).Sub(uint64(from)*row, uint64(n)*row)
		g.dep(g.r(y), src)
		g.c.Copy(g.r(y), src)
	}
	return y
}

func (g *gpuGraph) QuickGELU(x Act) {
	if g.live() && x.Rows > 0 {
		g.dep(g.r(x), g.r(x))
		g.fail(g.m.k.QuickGELU(g.c, g.r(x), g.r(x), x.Rows*x.Cols))
	}
}

func (g *gpuGraph) SiLU(x Act) {
	if g.live() && x.Rows > 0 {
		g.dep(g.r(x), g.r(x))
		g.fail(g.m.k.SiLU(g.c, g.r(x), g.r(x), x.Rows*x.Cols))
	}
}

func (g *cpuGraph) Input(rows, cols int) Act {
	x := g.new(rows, cols)
	if len(g.in) != rows*cols {
		g.fail(fmt.Errorf("engine: Input: %d values; the pass has %d", rows*cols, len(g.in)))
		return x
	}
	copy(g.v(x), g.in)
	return x
}

// shape fails the pass with op's error when ok is false.
func (g *cpuGraph) shape(op string, ok bool) bool {
	if !ok {
		g.fail(fmt.Errorf("engine: %s: shapes do not match", op))
	}
	return ok && g.err == nil
}

func (g *cpuGraph) Im2Col(x Act, p ops.Im2ColParams) Act {
	y := g.new(p.Patches(), p.PatchLen())
	if g.shape("Im2Col", x.Rows*x.Cols == p.C*p.H*p.W) {
		g.fail(ops.RefIm2Col(g.v(y), g.v(x), p))
	}
	return y
}

func (g *cpuGraph) AvgPool(x Act, p ops.PoolParams) Act {
	y := g.new(p.Tokens(), p.C)
	if g.shape("AvgPool", x.Rows == p.H*p.W && x.Cols == p.C) {
		g.fail(ops.RefAvgPool(g.v(y), g.v(x), p))
	}
	return y
}

func (g *cpuGraph) PixelShuffle(x Act, p ops.PoolParams) Act {
	y := g.new(p.Tokens(), p.C*p.K*p.K)
	if g.shape("PixelShuffle", x.Rows == p.H*p.W && x.Cols == p.C) {
		g.fail(ops.RefPixelShuffle(g.v(y), g.v(x), p))
	}
	return y
}

func (g *cpuGraph) AppendRows(x Act, t *Tensor) Act {
	y := g.new(x.Rows+t.Rows(), x.Cols)
	if g.shape("AppendRows "+t.Name, t.Cols() == x.Cols) {
		copy(g.v(y), g.v(x))
		copy(g.v(y)[x.Rows*x.Cols:], g.w(t))
	}
	return y
}

func (g *cpuGraph) SliceRows(x Act, from, n int) Act {
	y := g.new(n, x.Cols)
	if g.shape("SliceRows", from >= 0 && n > 0 && from+n <= x.Rows) {
		copy(g.v(y), g.v(x)[from*x.Cols:])
	}
	return y
}

func (g *cpuGraph) QuickGELU(x Act) { ops.RefQuickGELU(g.v(x), g.v(x)) }

func (g *cpuGraph) SiLU(x Act) { ops.RefSiLU(g.v(x), g.v(x)) }
