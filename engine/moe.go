package engine

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// maxExpertsUsed is the most experts one token may use (the kernels'
// limit, ops MoEShape).
const maxExpertsUsed = 32

// MoE is the mixture-of-experts FFN of one layer: a router picks Used of
// the experts for each row, each picked expert's GLU FFN runs on the row,
// and the outputs are summed with the router's weights. Gate, Up and Down
// are 3-D tensors, one matrix per expert ([cols rows experts], expert
// outermost); the biases, where present, one row per expert.
type MoE struct {
	Router, RouterBias         *Tensor // [Embd -> experts], [experts]
	Gate, Up, Down             *Tensor
	GateBias, UpBias, DownBias *Tensor
	Used                       int
	Gating                     ops.MoEGating
	Norm                       bool // renormalise the picked weights (GatingSoftmax)
	// OAI selects gpt-oss's clamped SwiGLU (ops.SwiGLUOAI) over SwiGLU.
	OAI bool
}

// experts returns the number of experts.
func (f *MoE) experts() int { return int(f.Gate.Dims[2]) }

// shape returns the routing of rows rows.
func (f *MoE) shape(rows int) ops.MoEShape {
	return ops.MoEShape{Rows: rows, Experts: f.experts(), Used: f.Used, Gating: f.Gating, Norm: f.Norm}
}

// fuseExperts returns a tensor named name that joins the expert tensors
// gate and up (of one type and shape: gate's experts, then up's), so the
// GPU multiplies by both and applies the GLU in one dispatch
// (ops.MatVecIDGLU); nil where they do not fuse. The parts stay tensors of
// their own, views of the joined buffer on the GPU.
func fuseExperts(name string, gate, up *Tensor) *Tensor {
	if gate == nil || up == nil || gate.fused != nil || up.fused != nil || gate.Type != up.Type ||
		len(gate.Dims) != 3 || fmt.Sprint(gate.Dims) != fmt.Sprint(up.Dims) {
		return nil
	}
	f := &Tensor{Name: name, Type: gate.Type, Dims: []uint64{gate.Dims[0], gate.Dims[1], 2 * gate.Dims[2]}, parts: []*Tensor{gate, up}}
	gate.fused, up.fused = f, f
	return f
}

// checkMoE checks what the tensors' shape tags cannot: the experts used
// of experts, and that expert biases are F32.
func checkMoE(f *MoE, experts int) error {
	for _, t := range []*Tensor{f.GateBias, f.UpBias, f.DownBias} {
		if t != nil && t.Type != gguf.TypeF32 {
			return fmt.Errorf("engine: expert biases %s have type %v; only F32 is supported", t.Name, t.Type)
		}
	}
	if f.Used < 1 || f.Used > min(experts, maxExpertsUsed) {
		return fmt.Errorf("engine: %d experts used of %d (want 1..%d)", f.Used, experts, min(experts, maxExpertsUsed))
	}
	return nil
}

// MoEAdd is the GPU's MoE FFN: router product, routing, the gate and up
// expert products of each row's picked experts, the GLU, the down
// products, and their weighted sum added to dst.
func (g *gpuGraph) MoEAdd(dst, x Act, f *MoE) {
	logits := g.MatMul(f.Router, x)
	if f.RouterBias != nil {
		g.AddBias(logits, f.RouterBias)
	}
	B, k, E, F := g.m.cfg.BatchSize, f.Used, f.experts(), f.Gate.Rows()
	s := f.shape(x.Rows)
	sel, wts := g.alloc(x.Rows, k, 4*B*k), g.alloc(x.Rows, k, 4*B*k)
	routes := g.alloc(1, s.RoutesLen(), 4*f.shape(B).RoutesLen())
	gate, up := g.alloc(x.Rows*k, F, 4*B*k*F), g.alloc(x.Rows*k, F, 4*B*k*F)
	down := g.alloc(x.Rows*k, dst.Cols, 4*B*k*dst.Cols)
	if x.Cols != f.Gate.Cols() || dst.Cols != f.Down.Rows() || dst.Rows != x.Rows {
		g.shapeErr("MoE "+f.Gate.Name, f.Gate.Cols(), x.Cols)
		return
	}
	g.expertBytes(f)
	if !g.live() || x.Rows == 0 {
		return
	}
	g.deps([3]vk.Range{g.r(sel), g.r(wts), g.r(routes)}, g.r(logits))
	g.fail(g.m.k.MoERoute(g.c, g.r(logits), s, g.r(sel), g.r(wts), g.r(routes)))
	if fusedOf(f.Gate, f.Up) != nil && g.m.k.CanFuseExperts(g.weight(f.Gate), g.weight(f.Up), E) {
		// Gate, up and the GLU in one dispatch per pass.
		g.label(fusedOf(f.Gate, f.Up))
		g.dep(g.r(gate), g.r(x), g.r(routes))
		g.fail(g.m.k.MatVecIDGLU(g.c, g.weight(f.Gate), g.weight(f.Up), s, g.r(x), g.r(routes), g.vec(f.GateBias), g.vec(f.UpBias), g.r(gate), f.OAI))
	} else {
		g.label(f.Gate)
		g.dep(g.r(gate), g.r(x), g.r(routes))
		g.fail(g.m.k.MatVecID(g.c, g.weight(f.Gate), s, g.r(x), k, g.r(routes), g.vec(f.GateBias), g.r(gate)))
		g.label(f.Up)
		g.dep(g.r(up), g.r(x), g.r(routes))
		g.fail(g.m.k.MatVecID(g.c, g.weight(f.Up), s, g.r(x), k, g.r(routes), g.vec(f.UpBias), g.r(up)))
		g.unlabel()
		g.dep(g.r(gate), g.r(gate), g.r(up))
		if f.OAI {
			g.fail(g.m.k.SwiGLUOAI(g.c, g.r(gate), g.r(gate), g.r(up), gate.Rows*gate.Cols))
		} else {
			g.fail(g.m.k.SwiGLU(g.c, g.r(gate), g.r(gate), g.r(up), gate.Rows*gate.Cols))
		}
	}
	g.label(f.Down)
	g.dep(g.r(down), g.r(gate), g.r(routes))
	g.fail(g.m.k.MatVecID(g.c, g.weight(f.Down), s, g.r(gate), 1, g.r(routes), g.vec(f.DownBias), g.r(down)))
	g.unlabel()
	g.dep(g.r(dst), g.r(down), g.r(wts), g.r(dst))
	g.fail(g.m.k.MoESum(g.c, g.r(down), g.r(wts), s, dst.Cols, g.r(dst), true))
}

// expertBytes notes, in the dry run, the bytes one row reads of f's
// experts (Used of them) for the profile (MatrixBytes).
func (g *gpuGraph) expertBytes(f *MoE) {
	if g.c != nil || g.matBytes == nil {
		return
	}
	for _, t := range []*Tensor{f.Gate, f.Up, f.Down} {
		kind := weightKind(t.Name)
		if gu := fusedOf(f.Gate, f.Up); gu != nil && t != f.Down {
			kind = weightKind(gu.Name) // one dispatch reads both (MoEAdd)
		}
		g.matBytes[kind] += int64(len(t.Data)) * int64(f.Used) / int64(f.experts())
	}
}

// label names t's kind on the dispatches of a profiled pass.
func (g *gpuGraph) label(t *Tensor) {
	if g.live() && g.c.Profiling() {
		g.c.Label(weightKind(t.Name))
	}
}

// MoEAdd is the CPU reference's MoE FFN, from the ops references of each
// kernel.
func (g *cpuGraph) MoEAdd(dst, x Act, f *MoE) {
	logits := g.MatMul(f.Router, x)
	if f.RouterBias != nil {
		g.AddBias(logits, f.RouterBias)
	}
	if g.err != nil {
		return
	}
	s, F := f.shape(x.Rows), f.Gate.Rows()
	sel, w := make([]int32, s.Pairs()), make([]float32, s.Pairs())
	if err := ops.RefMoERoute(g.v(logits), s, sel, w); err != nil {
		g.fail(err)
		return
	}
	gate, up := make([]float32, s.Pairs()*F), make([]float32, s.Pairs()*F)
	down := make([]float32, s.Pairs()*dst.Cols)
	g.fail(ops.RefMatVecID(g.w(f.Gate), F, x.Cols, s, sel, g.v(x), f.Used, g.w(f.GateBias), gate))
	g.fail(ops.RefMatVecID(g.w(f.Up), F, x.Cols, s, sel, g.v(x), f.Used, g.w(f.UpBias), up))
	if f.OAI {
		ops.RefSwiGLUOAI(gate, gate, up)
	} else {
		ops.RefSwiGLU(gate, gate, up)
	}
	g.fail(ops.RefMatVecID(g.w(f.Down), dst.Cols, F, s, sel, gate, 1, g.w(f.DownBias), down))
	if g.err == nil {
		ops.RefMoESum(down, w, s, dst.Cols, g.v(dst), true)
	}
}
