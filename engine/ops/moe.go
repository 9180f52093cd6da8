package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// A mixture-of-experts FFN on the device, for Rows tokens each routed to
// Used of Experts experts (a "pair" is one token's slot: index row*Used +
// slot):
//
//  1. MoERoute turns the router logits into each row's experts and weights
//     and lists, per expert, the pairs routed to it (the routes).
//  2. MatVecID multiplies each expert's matrix by the columns of its pairs
//     only: an expert nobody chose is never read, and an expert chosen by
//     many rows reads its weights once per pass of columns.
//  3. SwiGLU or SwiGLUOAI on the pairs' gate and up products, MatVecID by
//     the down experts, and MoESum adds each row's weighted pairs.

// MoEGating is how router logits become expert weights.
type MoEGating uint32

const (
	// GatingSoftmax: softmax over every expert's logit, the Used largest
	// probabilities, renormalised to sum 1 where Norm is set (Qwen3-MoE,
	// Mixtral).
	GatingSoftmax MoEGating = iota
	// GatingSoftmaxWeight: the Used largest logits, their weights a
	// softmax over those (gpt-oss).
	GatingSoftmaxWeight
)

// MoEShape is the routing of one batch.
type MoEShape struct {
	Rows, Experts, Used int
	Gating              MoEGating
	Norm                bool // GatingSoftmax: renormalise the selected weights
}

// Pairs returns Rows*Used.
func (s MoEShape) Pairs() int { return s.Rows * s.Used }

// RoutesLen is the uint32 entries of a routes buffer (MoERoute): the
// count of each expert's pairs, then each expert's list of up to Rows
// pairs, then each expert's rank among the active experts (those some
// pair chose; Experts+1 entries, the last their number) and the active
// experts in ascending order.
func (s MoEShape) RoutesLen() int { return s.actList() + s.Experts }

// actOff and actList are where the ranks and the active list start in a
// routes buffer.
func (s MoEShape) actOff() int  { return s.Experts + s.Experts*s.Rows }
func (s MoEShape) actList() int { return s.actOff() + s.Experts + 1 }

// gridExperts is the expert slots of a window of ne experts in the expert
// products' grid: no more than the pairs can make active.
func (s MoEShape) gridExperts(ne int) uint32 { return uint32(min(ne, s.Pairs())) }

func (s MoEShape) check(op string) error {
	if s.Rows <= 0 || s.Experts <= 0 || s.Used <= 0 || s.Used > s.Experts || s.Used > moeMaxUsed {
		return fmt.Errorf("ops: %s: %d rows, %d experts, %d used (want 1..%d used of the experts)", op, s.Rows, s.Experts, s.Used, moeMaxUsed)
	}
	if s.Gating > GatingSoftmaxWeight {
		return fmt.Errorf("ops: %s: unknown gating %d", op, s.Gating)
	}
	return nil
}

// moeMaxUsed is the most experts one row uses (MAX_K of shaders/moe.comp).
const moeMaxUsed = 32

type moeRoutePush struct {
	Rows, Experts, K, Mode, Norm, ListOff, ListStride, ActOff uint32
}

type moeSumPush struct {
	Rows, N, K, Acc uint32
}

// IDPush mirrors the push constants of matvec.comp's matvec_id variants:
// MatVecPush's, then ID_PARAMS (see fused_epilogue.glsl).
type IDPush struct {
	MatVecPush
	XDiv, ListOff, ListStride, E0, NE, WEStride, HasBias uint32
	ActOff, ActList, NA                                  uint32
}

// MoERoute records the routing of s.Rows rows of router logits ([Rows]
// [Experts] f32): each row's Used experts into sel ([Pairs] uint32) and
// their weights into w ([Pairs] f32), slot 0 the largest; then the routes
// ([RoutesLen] uint32): routes[e] is how many pairs chose expert e and
// routes[Experts + e*Rows + i] the i-th of them, in ascending order, then
// the active experts' ranks and list (RoutesLen). One workgroup does it
// all, so the whole routing is one dispatch.
func (k *Kernels) MoERoute(c *vk.Cmd, logits vk.Range, s MoEShape, sel, w, routes vk.Range) error {
	if err := s.check("MoERoute"); err != nil {
		return err
	}
	for _, b := range []struct {
		what string
		r    vk.Range
		n    int
	}{{"logits", logits, s.Rows * s.Experts}, {"sel", sel, s.Pairs()}, {"weights", w, s.Pairs()}, {"routes", routes, s.RoutesLen()}} {
		if err := k.oneBinding("MoERoute", b.what, b.r, 4*uint64(b.n)); err != nil {
			return err
		}
	}
	push := moeRoutePush{Rows: uint32(s.Rows), Experts: uint32(s.Experts), K: uint32(s.Used), Mode: uint32(s.Gating), Norm: b2u(s.Norm),
		ListOff: uint32(s.Experts), ListStride: uint32(s.Rows), ActOff: uint32(s.actOff())}
	return Record(k, c, "moe_route", []uint32{min(k.wg, 64)}, [3]uint32{1, 1, 1}, &push,
		k.window(logits, 0, 4*uint64(s.Rows*s.Experts)), k.window(sel, 0, 4*uint64(s.Pairs())), k.window(w, 0, 4*uint64(s.Pairs())),
		k.window(routes, 0, 4*uint64(s.RoutesLen())))
}

// MoESum records y[row] = sum over the row's slots of w[pair] * x[pair]
// (x [Pairs][n], y [Rows][n]), or with acc y[row] += that (the FFN added
// to the residual stream).
func (k *Kernels) MoESum(c *vk.Cmd, x, w vk.Range, s MoEShape, n int, y vk.Range, acc bool) error {
	if err := s.check("MoESum"); err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("ops: MoESum: %d values per row", n)
	}
	for _, b := range []struct {
		what string
		r    vk.Range
		n    int
	}{{"x", x, s.Pairs() * n}, {"weights", w, s.Pairs()}, {"y", y, s.Rows * n}} {
		if err := k.oneBinding("MoESum", b.what, b.r, 4*uint64(b.n)); err != nil {
			return err
		}
	}
	push := moeSumPush{Rows: uint32(s.Rows), N: uint32(n), K: uint32(s.Used), Acc: b2u(acc)}
	return Record(k, c, "moe_sum", []uint32{k.wg}, k.Groups(ceilDiv(uint32(s.Rows*n), k.wg)), &push,
		k.window(x, 0, 4*uint64(s.Pairs()*n)), k.window(w, 0, 4*uint64(s.Pairs())), k.window(y, 0, 4*uint64(s.Rows*n)))
}

// SwiGLUOAI records dst = gpt-oss's clamped SwiGLU of gate and up (n
// elements): (clamp(u, -7, 7) + 1) * g' * sigmoid(1.702 g'), g' = min(g, 7).
func (k *Kernels) SwiGLUOAI(c *vk.Cmd, dst, gate, up vk.Range, n int) error {
	if n <= 0 {
		return fmt.Errorf("ops: SwiGLUOAI: %d elements", n)
	}
	for _, o := range []struct {
		what string
		r    vk.Range
	}{{"dst", dst}, {"gate", gate}, {"up", up}} {
		if err := sized("SwiGLUOAI", o.what, o.r, 4*uint64(n)); err != nil {
			return err
		}
	}
	return k.chunks("SwiGLUOAI", uint64(n), 4, func(off, cnt uint64) error {
		push := CountPush{N: uint32(cnt)}
		return Record(k, c, "swiglu_oai_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push,
			k.window(gate, 4*off, 4*cnt), k.window(up, 4*off, 4*cnt), k.window(dst, 4*off, 4*cnt))
	})
}

// oneBinding checks that r holds n bytes and that they fit one storage
// binding (the MoE kernels index their buffers whole).
func (k *Kernels) oneBinding(op, what string, r vk.Range, n uint64) error {
	if err := sized(op, what, r, n); err != nil {
		return err
	}
	if n > k.dev.MaxBinding() {
		return fmt.Errorf("ops: %s: %s of %d bytes exceeds the %d-byte binding limit", op, what, n, k.dev.MaxBinding())
	}
	return nil
}

// matvecIDKernels returns the matvec_id variants for weight type t, plain
// and subgroup.
func matvecIDKernels(t gguf.GGMLType) (plain, sg string, ok bool) {
	switch t {
	case gguf.TypeF32:
		return "matvec_id_f32_f32", "matvec_id_f32_f32_sg", true
	case gguf.TypeF16:
		return "matvec_id_f16_f32", "matvec_id_f16_f32_sg", true
	case gguf.TypeBF16:
		return "matvec_id_bf16_f32", "matvec_id_bf16_f32_sg", true
	case gguf.TypeQ4_0:
		return "matvec_id_q4_0_f32", "matvec_id_q4_0_f32_sg", true
	case gguf.TypeQ4_1:
		return "matvec_id_q4_1_f32", "matvec_id_q4_1_f32_sg", true
	case gguf.TypeQ5_0:
		return "matvec_id_q5_0_f32", "matvec_id_q5_0_f32_sg", true
	case gguf.TypeQ5_1:
		return "matvec_id_q5_1_f32", "matvec_id_q5_1_f32_sg", true
	case gguf.TypeQ8_0:
		return "matvec_id_q8_0_f32", "matvec_id_q8_0_f32_sg", true
	case gguf.TypeQ2_K:
		return "matvec_id_q2_k_f32", "matvec_id_q2_k_f32_sg", true
	case gguf.TypeQ3_K:
		return "matvec_id_q3_k_f32", "matvec_id_q3_k_f32_sg", true
	case gguf.TypeQ4_K:
		return "matvec_id_q4_k_f32", "matvec_id_q4_k_f32_sg", true
	case gguf.TypeQ5_K:
		return "matvec_id_q5_k_f32", "matvec_id_q5_k_f32_sg", true
	case gguf.TypeQ6_K:
		return "matvec_id_q6_k_f32", "matvec_id_q6_k_f32_sg", true
	case gguf.TypeIQ4_NL:
		return "matvec_id_iq4_nl_f32", "matvec_id_iq4_nl_f32_sg", true
	case gguf.TypeIQ4_XS:
		return "matvec_id_iq4_xs_f32", "matvec_id_iq4_xs_f32_sg", true
	case gguf.TypeMXFP4:
		return "matvec_id_mxfp4_f32", "matvec_id_mxfp4_f32_sg", true
	}
	return "", "", false
}

// MatVecID records the expert products of a mixture of experts: w holds
// s.Experts matrices of w.Rows x w.Cols, one after another (a GGUF 3-D
// expert tensor), routes is MoERoute's, and for every pair p
// (row*Used + slot) routed to expert e, y[p] = W_e x[p / xDiv] (+ bias[e]
// where bias is not empty: [Experts][w.Rows] f32). xDiv is s.Used when x
// holds one column per row ([Rows][Cols]: the gate and up products) or 1
// when it holds one per pair ([Pairs][Cols]: the down product); y is
// [Pairs][w.Rows]. Each expert's columns go in passes of up to the
// matvec pass width; the grid has a slot per expert the pairs can make
// active (at most Pairs), taken by the active experts in order, and a
// slot left over costs one empty workgroup per pass and row group and
// reads no weights.
func (k *Kernels) MatVecID(c *vk.Cmd, w Weight, s MoEShape, x vk.Range, xDiv int, routes, bias, y vk.Range) error {
	const op = "MatVecID"
	if err := s.check(op); err != nil {
		return err
	}
	plainName, sgName, ok := matvecIDKernels(w.Type)
	if !ok {
		return fmt.Errorf("ops: %s: no expert kernels for weight type %v", op, w.Type)
	}
	rowBytes, err := weightRowBytes(w.Type, w.Cols)
	if err != nil {
		return fmt.Errorf("ops: %s: %w", op, err)
	}
	if w.Rows <= 0 {
		return fmt.Errorf("ops: %s: experts of %d rows", op, w.Rows)
	}
	if xDiv != 1 && xDiv != s.Used {
		return fmt.Errorf("ops: %s: xDiv %d, want 1 or %d", op, xDiv, s.Used)
	}
	perExpert := rowBytes * uint64(w.Rows)
	if err := sized(op, "weight", w.Data, perExpert*uint64(s.Experts)); err != nil {
		return err
	}
	xCols := s.Pairs() / xDiv
	if err := k.oneBinding(op, "x", x, 4*uint64(xCols)*uint64(w.Cols)); err != nil {
		return err
	}
	if err := k.oneBinding(op, "y", y, 4*uint64(s.Pairs())*uint64(w.Rows)); err != nil {
		return err
	}
	if err := k.oneBinding(op, "routes", routes, 4*uint64(s.RoutesLen())); err != nil {
		return err
	}
	hasBias := bias.Buf != nil
	if hasBias {
		if err := k.oneBinding(op, "bias", bias, 4*uint64(s.Experts)*uint64(w.Rows)); err != nil {
			return err
		}
	} else {
		bias = routes // bound, never read
	}
	maxRange, align, _, err := k.bindLimits(op, k.dev.MaxBinding())
	if err != nil {
		return err
	}
	if x.Offset%4 != 0 || y.Offset%4 != 0 {
		return fmt.Errorf("ops: %s: x offset %d or y offset %d is not a multiple of 4", op, x.Offset, y.Offset)
	}
	name := plainName
	if k.sg {
		name = sgName
	}
	plain := !w.Type.IsQuantized()
	tpr := k.matvecTPR(w.Type, w.Cols)
	// On CPU devices the activations go in a uniform buffer and the
	// weights in a texel buffer where they fit (the _xt variants, as
	// MulMat's).
	wRange, wAlign := maxRange, align
	xuRange, xuAlign := k.xuLimits(tpr, w.Cols, xCols, mulOpts{})
	xRange, xAlign := maxRange, align
	rr := k.window(routes, 0, 4*uint64(s.RoutesLen()))
	if ur, ok := k.uniformRoutes(routes, s); xuRange > 0 && k.texel && !k.idStorage && ok {
		name = matvecIDNames[w.Type].xt
		wRange, wAlign = k.texelLimits(maxRange, align)
		xRange, xAlign = xuRange, xuAlign
		rr = ur
	}
	ncols := colBucket(min(k.matvecPass, s.Rows))
	chunks := ceilDiv(uint32(s.Rows), ncols)
	rpl := k.rowsPerLane(tpr, w.Rows, int(ncols))
	wg := k.matvecGroup(tpr)
	groups := k.Groups(ceilDiv(uint32(w.Rows), wg/tpr*rpl))
	if groups[1] != 1 {
		return fmt.Errorf("ops: %s: %d rows per expert exceed one row of workgroups", op, w.Rows)
	}
	xr, xOff := bindWindow(x, 0, 4*uint64(xCols)*uint64(w.Cols), xAlign, xRange)
	yr, yOff := bindWindow(y, 0, 4*uint64(s.Pairs())*uint64(w.Rows), align, maxRange)
	lim := k.dev.Limits().MaxWorkgroupCount
	for e0 := 0; e0 < s.Experts; {
		start := w.Data.Offset + uint64(e0)*perExpert
		bind := start - start%wAlign
		bind -= bind % 4
		lead := start - bind
		if lead+perExpert+4 > wRange {
			return fmt.Errorf("ops: %s: one expert's matrix of %d bytes exceeds the %d-byte binding limit", op, perExpert, wRange)
		}
		ne := min(s.Experts-e0, int((wRange-lead-4)/perExpert))
		na := s.gridExperts(ne)
		if uint64(na)*uint64(chunks) > uint64(lim[2]) {
			ne = int(lim[2] / chunks)
			na = s.gridExperts(ne)
		}
		if ne <= 0 {
			return fmt.Errorf("ops: %s: %d passes of columns exceed the device's %d workgroups", op, chunks, lim[2])
		}
		rng := min(roundUp4(lead+uint64(ne)*perExpert), w.Data.Buf.Size()-bind)
		wr := vk.Range{Buf: w.Data.Buf, Offset: bind, Size: rng}
		fast := uint32(0)
		if (w.Cols|int(xOff))%4 == 0 && (!plain || (lead|rowBytes|perExpert)%16 == 0) {
			fast = 1
		}
		push := IDPush{
			MatVecPush: MatVecPush{K: uint32(w.Cols), M: uint32(w.Rows), N: ncols,
				WOff: uint32(lead), WStride: uint32(rowBytes),
				XOff: xOff, XStride: uint32(w.Cols), YOff: yOff, YStride: uint32(w.Rows)},
			XDiv: uint32(xDiv), ListOff: uint32(s.Experts), ListStride: uint32(s.Rows),
			E0: uint32(e0), NE: uint32(ne), WEStride: uint32(perExpert), HasBias: b2u(hasBias),
			ActOff: uint32(s.actOff()), ActList: uint32(s.actList()), NA: na,
		}
		g := groups
		g[2] = na * chunks
		if e0 > 0 {
			c.NoBarrier() // disjoint outputs
		}
		spec := []uint32{wg, ncols, fast, tpr, 0, rpl}
		if err := Record(k, c, name, spec, g, &push, wr, xr, yr, rr, k.window(bias, 0, 4)); err != nil {
			return fmt.Errorf("ops: %s %v %dx%d x%d: %w", op, w.Type, w.Rows, w.Cols, s.Experts, err)
		}
		e0 += ne
	}
	return nil
}

// IDFusedPush mirrors the push constants of matvec_fused.comp's
// matvec_fused_id variants: FusedPush's, then ID_PARAMS.
type IDFusedPush struct {
	FusedPush
	XDiv, ListOff, ListStride, E0, NE, WEStride, IDBias uint32
	ActOff, ActList, NA                                 uint32
}

// epiSwiGLUOAI is the fused matvec's epilogue of gpt-oss's clamped SwiGLU
// (EPI_SWIGLU_OAI).
const epiSwiGLUOAI = 4

// CanFuseExperts reports whether MatVecIDGLU takes the expert tensors gate
// and up of s.Experts experts: of one type and shape, the up tensor after
// the gate tensor in one buffer (the layout GPUModel gives fused experts),
// both in one storage binding.
func (k *Kernels) CanFuseExperts(gate, up Weight, experts int) bool {
	_, _, ok := k.fusedExperts(gate, up, experts)
	return ok
}

// fusedExperts returns the binding of gate's and up's experts and the byte
// offset of gate's first row in it.
func (k *Kernels) fusedExperts(gate, up Weight, experts int) (vk.Range, uint64, bool) {
	if gate.Type != up.Type || gate.Rows != up.Rows || gate.Cols != up.Cols || gate.Data.Buf == nil || gate.Data.Buf != up.Data.Buf {
		return vk.Range{}, 0, false
	}
	if _, _, ok := matvecIDKernels(gate.Type); !ok {
		return vk.Range{}, 0, false
	}
	rowBytes, err := weightRowBytes(gate.Type, gate.Cols)
	if err != nil {
		return vk.Range{}, 0, false
	}
	size := rowBytes * uint64(gate.Rows) * uint64(experts)
	if up.Data.Offset != gate.Data.Offset+size || gate.Data.Size < size || up.Data.Size < size {
		return vk.Range{}, 0, false
	}
	align := max(k.dev.Limits().MinStorageOffsetAlign, 4)
	bind := gate.Data.Offset - gate.Data.Offset%align
	bind -= bind % 4
	lead := gate.Data.Offset - bind
	rng := min(roundUp4(lead+2*size), gate.Data.Buf.Size()-bind)
	if lead+2*size+4 > min(k.dev.MaxBinding(), 1<<31) {
		return vk.Range{}, 0, false
	}
	return vk.Range{Buf: gate.Data.Buf, Offset: bind, Size: rng}, lead, true
}

// MatVecIDGLU records MatVecID of the gate and up experts and the GLU of
// the two in one dispatch per pass of columns: for every pair p routed to
// expert e, y[p] = act(G_e x[p/Used] + bg[e]) * (U_e x[p/Used] + bu[e])
// ([Pairs][gate.Rows]), act SiLU or, with oai, gpt-oss's clamped SwiGLU
// (SwiGLUOAI). The biases are empty or both given. gate and up must fuse
// (CanFuseExperts).
func (k *Kernels) MatVecIDGLU(c *vk.Cmd, gate, up Weight, s MoEShape, x, routes, gateBias, upBias, y vk.Range, oai bool) error {
	const op = "MatVecIDGLU"
	if err := s.check(op); err != nil {
		return err
	}
	wr, lead, ok := k.fusedExperts(gate, up, s.Experts)
	if !ok {
		return fmt.Errorf("ops: %s: %v experts %dx%d do not fuse (see CanFuseExperts)", op, gate.Type, gate.Rows, gate.Cols)
	}
	plainName, sgName := fusedIDKernels(gate.Type)
	rowBytes, _ := weightRowBytes(gate.Type, gate.Cols)
	perExpert := rowBytes * uint64(gate.Rows)
	if err := k.oneBinding(op, "x", x, 4*uint64(s.Rows)*uint64(gate.Cols)); err != nil {
		return err
	}
	if err := k.oneBinding(op, "y", y, 4*uint64(s.Pairs())*uint64(gate.Rows)); err != nil {
		return err
	}
	if err := k.oneBinding(op, "routes", routes, 4*uint64(s.RoutesLen())); err != nil {
		return err
	}
	if (gateBias.Buf == nil) != (upBias.Buf == nil) {
		return fmt.Errorf("ops: %s: a gate bias without an up bias or the reverse", op)
	}
	hasBias := gateBias.Buf != nil
	if hasBias {
		for _, b := range []vk.Range{gateBias, upBias} {
			if err := k.oneBinding(op, "bias", b, 4*uint64(s.Experts)*uint64(gate.Rows)); err != nil {
				return err
			}
		}
	} else {
		gateBias, upBias = routes, routes // bound, never read
	}
	if x.Offset%4 != 0 || y.Offset%4 != 0 {
		return fmt.Errorf("ops: %s: x offset %d or y offset %d is not a multiple of 4", op, x.Offset, y.Offset)
	}
	maxRange, align, _, err := k.bindLimits(op, k.dev.MaxBinding())
	if err != nil {
		return err
	}
	name := plainName
	if k.sg {
		name = sgName
	}
	tpr := k.matvecTPR(gate.Type, gate.Cols)
	xRange, xAlign := maxRange, align
	rr := k.window(routes, 0, 4*uint64(s.RoutesLen()))
	xuRange, xuAlign := k.xuLimits(tpr, gate.Cols, s.Rows, mulOpts{})
	if ur, ok := k.uniformRoutes(routes, s); xuRange > 0 && k.texel && !k.idStorage && ok && k.texelFits(wr) {
		name = fusedIDNames[gate.Type][2]
		xRange, xAlign = xuRange, xuAlign
		rr = ur
	}
	ncols := colBucket(min(k.matvecPass, s.Rows))
	chunks := ceilDiv(uint32(s.Rows), ncols)
	na := s.gridExperts(s.Experts)
	if lim := k.dev.Limits().MaxWorkgroupCount[2]; uint64(na)*uint64(chunks) > uint64(lim) {
		return fmt.Errorf("ops: %s: %d experts x %d passes exceed the device's %d workgroups", op, na, chunks, lim)
	}
	rpl := k.fusedRowsPerLane(tpr, gate.Rows, int(ncols), true)
	orpl := rpl
	if rpl > 1 {
		orpl = rpl / 2
	}
	wg := k.matvecGroup(tpr)
	groups := k.Groups(ceilDiv(uint32(gate.Rows), wg/tpr*orpl))
	if groups[1] != 1 {
		return fmt.Errorf("ops: %s: %d rows per expert exceed one row of workgroups", op, gate.Rows)
	}
	groups[2] = na * chunks
	xr, xOff := bindWindow(x, 0, 4*uint64(s.Rows)*uint64(gate.Cols), xAlign, xRange)
	yr, yOff := bindWindow(y, 0, 4*uint64(s.Pairs())*uint64(gate.Rows), align, maxRange)
	fast := uint32(0)
	if (gate.Cols|int(xOff))%4 == 0 && (gate.Type.IsQuantized() || (lead|rowBytes|perExpert)%16 == 0) {
		fast = 1
	}
	epi := uint32(epiSwiGLU)
	if oai {
		epi = epiSwiGLUOAI
	}
	push := IDFusedPush{
		FusedPush: FusedPush{
			MatVecPush: MatVecPush{K: uint32(gate.Cols), M: uint32(gate.Rows), N: ncols,
				WOff: uint32(lead), WStride: uint32(rowBytes),
				XOff: xOff, XStride: uint32(gate.Cols), YOff: yOff, YStride: uint32(gate.Rows)},
			S1: uint32(gate.Rows), S2: uint32(gate.Rows), PairOff: uint32(perExpert) * uint32(s.Experts),
		},
		XDiv: uint32(s.Used), ListOff: uint32(s.Experts), ListStride: uint32(s.Rows),
		E0: 0, NE: uint32(s.Experts), WEStride: uint32(perExpert), IDBias: b2u(hasBias),
		ActOff: uint32(s.actOff()), ActList: uint32(s.actList()), NA: na,
	}
	spec := []uint32{wg, ncols, fast, tpr, 0, rpl, epi}
	if err := Record(k, c, name, spec, groups, &push, wr, xr, yr, yr, yr, wr,
		rr, k.window(gateBias, 0, 4), k.window(upBias, 0, 4)); err != nil {
		return fmt.Errorf("ops: %s %v %dx%d x%d: %w", op, gate.Type, gate.Rows, gate.Cols, s.Experts, err)
	}
	return nil
}

// uniformRoutes returns routes bound as a uniform buffer (the _xt
// variants read them so: see fused_epilogue.glsl), or false where they do
// not fit one (the shader's 64 KiB block, maxUniformBufferRange) or start
// at an offset a uniform binding cannot.
func (k *Kernels) uniformRoutes(routes vk.Range, s MoEShape) (vk.Range, bool) {
	lim := k.dev.Limits()
	n := 4 * uint64(s.RoutesLen())
	if n > min(lim.MaxUniformBufferRange, xuMaxBytes) || routes.Offset%max(lim.MinUniformOffsetAlign, 4) != 0 {
		return vk.Range{}, false
	}
	return vk.Range{Buf: routes.Buf, Offset: routes.Offset, Size: roundUp4(n)}, true
}

// texelFits reports whether the weight binding wr can be read as a texel
// buffer (the _xt variants): within maxTexelBufferElements words, at an
// offset minTexelBufferOffsetAlignment allows.
func (k *Kernels) texelFits(wr vk.Range) bool {
	limit, align := k.texelLimits(k.dev.MaxBinding(), max(k.dev.Limits().MinStorageOffsetAlign, 4))
	return wr.Size <= limit && wr.Offset%align == 0
}

// fusedIDKernels returns the matvec_fused_id variants for weight type t
// (one of matvecIDKernels' types), plain and subgroup, named once so that
// recording allocates nothing.
func fusedIDKernels(t gguf.GGMLType) (plain, sg string) {
	n := fusedIDNames[t]
	return n[0], n[1]
}

var fusedIDNames = func() map[gguf.GGMLType][3]string {
	m := map[gguf.GGMLType][3]string{}
	for t := range gguf.GGMLType(64) {
		if p, s, ok := matvecIDKernels(t); ok {
			f := "matvec_fused_id_" + p[len("matvec_id_"):]
			m[t] = [3]string{f, "matvec_fused_id_" + s[len("matvec_id_"):], f + "_xt"}
		}
	}
	return m
}()

// matvecIDNames holds the matvec_id variants' _xt names (CPU devices).
var matvecIDNames = func() map[gguf.GGMLType]struct{ xt string } {
	m := map[gguf.GGMLType]struct{ xt string }{}
	for t := range gguf.GGMLType(64) {
		if p, _, ok := matvecIDKernels(t); ok {
			m[t] = struct{ xt string }{p + "_xt"}
		}
	}
	return m
}()
