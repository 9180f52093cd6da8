package ops

import (
	"fmt"
	"unsafe"

	"github.com/vkllm/vkllm/vk"
)

// FusedPush mirrors the push-constant block of the fused matvec variants
// (shaders/matvec_fused.comp): MatVecPush, then the epilogue's fields (offsets
// and strides in f32 elements, PairOff in bytes).
type FusedPush struct {
	MatVecPush
	S1, S2          uint32 // split: the first rows of the second and third outputs
	Y1Off, Y1Stride uint32
	Y2Off, Y2Stride uint32
	BOff, HasBias   uint32
	PairOff         uint32 // GLU: bytes from a gate row to its up row
}

// The epilogues of the fused matvec (specialization constant EPI).
const (
	epiSplit  = 1
	epiSwiGLU = 2
	epiGeGLU  = 3
)

// CanFuse reports whether MatVecSplit and MatVecGLU take the weight w (the
// fused one: q|k|v, or gate|up) for n activation columns: a decode-shaped
// batch (MulMat's matvec path) and the whole weight inside one storage
// binding. On the integer-dot path they quantize the activations once and
// run the integer-dot kernel's fused variant. Otherwise the caller
// multiplies by the parts separately.
func (k *Kernels) CanFuse(w Weight, n int) bool {
	if n <= 0 || n > k.matvecCols || w.Data.Buf == nil {
		return false
	}
	rowBytes, err := weightRowBytes(w.Type, w.Cols)
	if err != nil || w.Rows <= 0 {
		return false
	}
	maxRange, align, _, err := k.bindLimits("MatVec", k.dev.MaxBinding())
	if err != nil {
		return false
	}
	if k.texel { // the weights may be bound as a texel buffer
		maxRange, align = k.texelLimits(maxRange, align)
	}
	ch, err := rowChunkAt(0, w.Data.Offset, rowBytes, w.Rows, w.Data.Buf.Size(), maxRange, align)
	return err == nil && ch.rowEnd == w.Rows
}

// MatVecSplit records the products of x by the three weights fused by rows
// in w (rows[0], rows[1] and rows[2] rows, the q, k and v projections) in
// one dispatch per pass of columns: y[i] receives n columns of rows[i] f32
// ([n][rows[i]]), plus bias[r] for the fused row r when bias has a buffer
// (w.Rows f32: the three biases fused likewise). It needs CanFuse(w, n).
func (k *Kernels) MatVecSplit(c *vk.Cmd, w Weight, x vk.Range, n int, rows [3]int, y [3]vk.Range, bias vk.Range) error {
	if rows[0] <= 0 || rows[1] <= 0 || rows[2] <= 0 || rows[0]+rows[1]+rows[2] != w.Rows {
		return fmt.Errorf("ops: MatVecSplit: parts of %v rows, weight of %d", rows, w.Rows)
	}
	for i := range y {
		if err := sized("MatVecSplit", "y", y[i], 4*uint64(n)*uint64(rows[i])); err != nil {
			return err
		}
		if y[i].Offset%4 != 0 {
			return fmt.Errorf("ops: MatVecSplit: output %d offset %d is not a multiple of 4", i, y[i].Offset)
		}
	}
	if bias.Buf != nil {
		if err := sized("MatVecSplit", "bias", bias, 4*uint64(w.Rows)); err != nil {
			return err
		}
	}
	return k.mulMatFused(c, w, x, n, epiSplit, rows, y, bias)
}

// MatVecGLU records y = act(G x) * (U x) for n activation columns, where w
// holds the gate rows G and then the up rows U (w.Rows = 2F), y receives
// n columns of F f32 ([n][F]) and act is SiLU (SwiGLU) or, with gelu, the
// tanh GELU (GeGLU): the gate and up projections and their product in one
// dispatch per pass of columns. It needs CanFuse(w, n).
func (k *Kernels) MatVecGLU(c *vk.Cmd, w Weight, x vk.Range, n int, y vk.Range, gelu bool) error {
	if w.Rows <= 0 || w.Rows%2 != 0 {
		return fmt.Errorf("ops: MatVecGLU: %d rows are not a gate and an up half", w.Rows)
	}
	F := w.Rows / 2
	if err := sized("MatVecGLU", "y", y, 4*uint64(n)*uint64(F)); err != nil {
		return err
	}
	epi := uint32(epiSwiGLU)
	if gelu {
		epi = epiGeGLU
	}
	return k.mulMatFused(c, w, x, n, epi, [3]int{F, F, F}, [3]vk.Range{y, y, y}, vk.Range{})
}

// mulMatFused records the fused matvec with epilogue epi: for the split,
// rows and y are the three parts; for the GLUs rows[0] is F and y[0] the
// output.
func (k *Kernels) mulMatFused(c *vk.Cmd, w Weight, x vk.Range, n int, epi uint32, rows [3]int, y [3]vk.Range, bias vk.Range) error {
	const op = "MatVecFused"
	names, _ := kernelsFor(w.Type)
	if !k.CanFuse(w, n) {
		return fmt.Errorf("ops: %s: %v %dx%d for %d columns does not fuse (see CanFuse)", op, w.Type, w.Rows, w.Cols, n)
	}
	if err := sized(op, "x", x, 4*uint64(n)*uint64(w.Cols)); err != nil {
		return err
	}
	if x.Offset%4 != 0 {
		return fmt.Errorf("ops: %s: x offset %d is not a multiple of 4", op, x.Offset)
	}
	maxRange, align, budget, err := k.bindLimits(op, k.dev.MaxBinding())
	if err != nil {
		return err
	}
	if k.useQ8(w.Type, w.Cols, n, false) {
		return k.mulMatFusedQ8(c, w, x, n, epi, rows, y, bias, maxRange, align, budget)
	}
	colStep := min(k.matvecPass, n)
	name := names.fused
	if k.sg {
		name = names.fusedSG
	}
	tpr := k.matvecTPR(w.Type, w.Cols)
	// On CPU devices the activations go in a uniform buffer and the
	// weights in a texel buffer, as for MulMat.
	xuRange, xuAlign := k.xuLimits(tpr, w.Cols, colStep, mulOpts{})
	wRange, wAlign := maxRange, align
	if xuRange > 0 {
		name = names.fusedXU
		if k.texel {
			name = names.fusedXT
			wRange, wAlign = k.texelLimits(maxRange, align)
		}
	}
	f, err := newFusedCall(w, n, epi, rows, y, bias, wRange, wAlign, maxRange, align, budget)
	if err != nil {
		return fmt.Errorf("ops: %s: %w", op, err)
	}
	if 4*uint64(w.Cols) > budget {
		return fmt.Errorf("ops: %s: a column exceeds one binding", op)
	}
	plain := !w.Type.IsQuantized()
	for c0 := 0; c0 < n; c0 += colStep {
		nc := min(colStep, n-c0)
		xAlign, xRange := align, maxRange
		if xuRange > 0 {
			xAlign, xRange = xuAlign, xuRange
		}
		xr, xOff := bindWindow(x, 4*uint64(c0)*uint64(w.Cols), 4*uint64(nc)*uint64(w.Cols), xAlign, xRange)
		push, yr := f.pass(c0, nc, xOff, uint32(w.Cols))
		fast := uint32(0)
		if (w.Cols|int(xOff))%4 == 0 && (!plain || (f.ch.wOff|uint32(f.rowBytes))%16 == 0) {
			fast = 1
		}
		ncols := colBucket(nc)
		rpl := k.fusedRowsPerLane(tpr, f.outRows, int(ncols), f.glu)
		wg := k.matvecGroup(tpr)
		orpl := rpl
		if f.glu && rpl > 1 {
			orpl = rpl / 2
		}
		groups := k.Groups(ceilDiv(uint32(f.outRows), wg/tpr*orpl))
		if c0 > 0 {
			c.NoBarrier()
		}
		if err := Record(k, c, name, []uint32{wg, ncols, fast, tpr, 0, rpl, epi}, groups, &push, f.wr, xr, yr[0], yr[1], yr[2], f.br); err != nil {
			return fmt.Errorf("ops: %s %v %dx%d: %w", op, w.Type, w.Rows, w.Cols, err)
		}
	}
	return nil
}

// fusedCall is what the float and integer-dot fused matvecs share of one
// call: the weight's binding, the outputs, the bias and the epilogue.
type fusedCall struct {
	ch       rowChunk
	wr, br   vk.Range // the weight's binding, and the bias's (the weight's when none)
	rowBytes uint64
	cols     int // the weight's row length K
	glu      bool
	outRows  int // the kernel's rows M
	rows     [3]int
	y        [3]vk.Range
	bOff     uint32
	hasBias  uint32
	align    uint64
	maxRange uint64
}

// newFusedCall binds w's rows in one window of at most wRange bytes
// (aligned to wAlign) and checks that the outputs of n columns fit their
// bindings.
func newFusedCall(w Weight, n int, epi uint32, rows [3]int, y [3]vk.Range, bias vk.Range, wRange, wAlign, maxRange, align, budget uint64) (fusedCall, error) {
	rowBytes, err := weightRowBytes(w.Type, w.Cols)
	if err != nil {
		return fusedCall{}, err
	}
	ch, err := rowChunkAt(0, w.Data.Offset, rowBytes, w.Rows, w.Data.Buf.Size(), wRange, wAlign)
	if err != nil {
		return fusedCall{}, fmt.Errorf("weight: %w", err)
	}
	if ch.rowEnd != w.Rows {
		return fusedCall{}, fmt.Errorf("weight: %d of %d rows fit one binding", ch.rowEnd, w.Rows)
	}
	f := fusedCall{ch: ch, rowBytes: rowBytes, cols: w.Cols, glu: epi != epiSplit, outRows: w.Rows, rows: rows, y: y, align: align, maxRange: maxRange}
	f.wr = vk.Range{Buf: w.Data.Buf, Offset: ch.bindOffset, Size: ch.bindRange}
	if f.glu {
		f.outRows = rows[0]
	}
	for i := range y {
		if 4*uint64(n)*uint64(rows[i])+align > budget {
			return fusedCall{}, fmt.Errorf("output %d exceeds one binding", i)
		}
	}
	f.br = f.wr // bound when there is no bias (never read)
	if bias.Buf != nil {
		f.br, f.bOff = bindWindow(bias, 0, 4*uint64(w.Rows), align, maxRange)
		f.hasBias = 1
	}
	return f, nil
}

// pass returns the push constants and output bindings of the pass of nc
// columns from c0, whose activations start at xOff (xStride apart).
func (f *fusedCall) pass(c0, nc int, xOff, xStride uint32) (FusedPush, [3]vk.Range) {
	var yr [3]vk.Range
	var yOff [3]uint32
	for i := range f.y {
		yr[i], yOff[i] = bindWindow(f.y[i], 4*uint64(c0)*uint64(f.rows[i]), 4*uint64(nc)*uint64(f.rows[i]), f.align, f.maxRange)
	}
	push := FusedPush{MatVecPush: MatVecPush{
		K: uint32(f.cols), M: uint32(f.outRows), N: uint32(nc),
		WOff: f.ch.wOff, WStride: uint32(f.rowBytes),
		XOff: xOff, XStride: xStride,
		YOff: yOff[0], YStride: uint32(f.rows[0]),
	}, BOff: f.bOff, HasBias: f.hasBias, Y1Off: yOff[1], Y1Stride: uint32(f.rows[1]), Y2Off: yOff[2], Y2Stride: uint32(f.rows[2])}
	if f.glu {
		push.PairOff = uint32(f.rows[0]) * uint32(f.rowBytes)
		push.S1, push.S2 = uint32(f.outRows), uint32(f.outRows)
	} else {
		push.S1, push.S2 = uint32(f.rows[0]), uint32(f.rows[0]+f.rows[1])
	}
	return push, yr
}

// mulMatFusedQ8 is mulMatFused on the integer-dot path: the quantization of
// x into the Q8_1 scratch (unless it holds x already, as mulMatQ8), then
// one fused matvec_idot dispatch per pass of columns. In the GLU epilogues
// each group of invocations computes one output row from its gate and up
// rows (GR 2).
func (k *Kernels) mulMatFusedQ8(c *vk.Cmd, w Weight, x vk.Range, n int, epi uint32, rows [3]int, y [3]vk.Range, bias vk.Range, maxRange, align, budget uint64) error {
	const op = "MatVecFused"
	names, _ := idotKernels(w.Type)
	name := names.fused
	if k.sg {
		name = names.fusedSG
	}
	f, err := newFusedCall(w, n, epi, rows, y, bias, maxRange, align, maxRange, align, budget)
	if err != nil {
		return fmt.Errorf("ops: %s: %w", op, err)
	}
	reuse, err := k.q8Quantize(c, x, w.Cols, n, false, maxRange, align, budget)
	if err != nil {
		return fmt.Errorf("ops: %s %v %dx%d: %w", op, w.Type, w.Rows, w.Cols, err)
	}
	words := q8Words(w.Cols)
	tpr := k.matvecTPR(w.Type, w.Cols)
	wg := k.matvecGroup(tpr)
	gr, ogr := k.fusedIdotRows(tpr, f.outRows, f.glu)
	colStep := min(n, k.matvecPass, idotPass)
	for c0 := 0; c0 < n; c0 += colStep {
		nc := min(colStep, n-c0)
		push, yr := f.pass(c0, nc, uint32(uint64(c0)*words), uint32(words))
		if c0 > 0 {
			c.NoBarrier() // other columns: disjoint outputs, the same scratch read
		}
		groups := k.Groups(ceilDiv(uint32(f.outRows), wg/tpr*ogr))
		if err := Record(k, c, name, []uint32{wg, colBucket(nc), tpr, 0, gr, epi}, groups, &push, f.wr, k.q8.scratch, yr[0], yr[1], yr[2], f.br); err != nil {
			return fmt.Errorf("ops: %s %v %dx%d: %w", op, w.Type, w.Rows, w.Cols, err)
		}
	}
	k.q8Read(c, reuse, x, w.Cols, n)
	return nil
}

// fusedIdotRows is the fused integer-dot kernel's weight rows per group of
// invocations (GR) and the output rows they give: the GPU matvec's rows per
// group for the split, a gate and an up row for one output in the GLUs.
func (k *Kernels) fusedIdotRows(tpr uint32, outRows int, glu bool) (gr, ogr uint32) {
	if glu {
		return 2, 1
	}
	gr = k.idotGroupRows(tpr, outRows)
	return gr, gr
}

// fusedRowsPerLane is rowsPerLane for the fused kernel's outRows output
// rows on CPU devices (1 on GPUs): in the GLU epilogues an invocation's rows are gate and up rows,
// so it computes half as many outputs (at least two weight rows where it
// computes several).
func (k *Kernels) fusedRowsPerLane(tpr uint32, outRows, n int, glu bool) uint32 {
	if !k.cpuRows {
		return 1 // matvec_fused.comp has no several rows per group on GPUs
	}
	rpl := k.rowsPerLane(tpr, outRows, n)
	if glu && rpl > 1 {
		return max(rpl, 2)
	}
	return rpl
}

// PrepareFused creates, ahead of the first step, the fused matvec
// pipelines MatVecSplit (glu false) or MatVecGLU (glu true, gelu for
// GeGLU) use for the fused weight w of the given rows and type (as
// PrepareWeight for the plain products). It does nothing where CanFuse
// is false for one column.
func (k *Kernels) PrepareFused(w Weight, glu, gelu bool) error {
	if !k.CanFuse(w, 1) {
		return nil
	}
	names, _ := kernelsFor(w.Type)
	rowBytes, err := weightRowBytes(w.Type, w.Cols)
	if err != nil {
		return fmt.Errorf("ops: PrepareFused: %w", err)
	}
	fast := uint32(0)
	if w.Cols%4 == 0 && (w.Type.IsQuantized() || rowBytes%16 == 0) {
		fast = 1
	}
	epi, outRows := uint32(epiSplit), w.Rows
	if glu {
		epi, outRows = epiSwiGLU, w.Rows/2
		if gelu {
			epi = epiGeGLU
		}
	}
	push := uint32(unsafe.Sizeof(FusedPush{}))
	tpr := k.matvecTPR(w.Type, w.Cols)
	for _, n := range colBuckets(k.matvecPass) {
		name := names.fused
		if k.sg {
			name = names.fusedSG
		}
		if lim, _ := k.xuLimits(tpr, w.Cols, int(n), mulOpts{}); lim > 0 {
			name = names.fusedXU
			if k.texel {
				name = names.fusedXT
			}
		}
		rpl := k.fusedRowsPerLane(tpr, outRows, int(n), glu)
		if _, err := k.Pipeline(name, 6, push, k.matvecGroup(tpr), n, fast, tpr, 0, rpl, epi); err != nil {
			return err
		}
	}
	// The integer-dot path's fused variants (mulMatFusedQ8).
	if idot, ok := idotKernels(w.Type); ok && k.intDot && w.Cols%32 == 0 {
		name := idot.fused
		if k.sg {
			name = idot.fusedSG
		}
		gr, _ := k.fusedIdotRows(tpr, outRows, glu)
		if err := k.prepareQuantize(); err != nil {
			return err
		}
		for _, n := range colBuckets(min(k.matvecPass, idotPass)) {
			if _, err := k.Pipeline(name, 6, push, k.matvecGroup(tpr), n, tpr, 0, gr, epi); err != nil {
				return err
			}
		}
	}
	return nil
}
