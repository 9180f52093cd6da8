package ops

import (
	"fmt"
	"unsafe"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// Weight is a weight matrix on the device in GGUF layout: Rows rows of Cols
// elements of Type, each row block-packed (Type.RowSize(Cols) bytes), rows
// one after another from the start of Data. Data may be larger than one
// storage binding; the kernels bind it in windows of whole rows. The buffer
// must extend to the 4-byte boundary after the matrix (vk.NewBuffer rounds
// sizes up to 4), since the kernels read weights as 32-bit words.
type Weight struct {
	Type gguf.GGMLType
	Rows int
	Cols int
	Data vk.Range
}

// MatVecPush mirrors the push-constant block of shaders/matvec.comp and
// shaders/matmul.comp. Offsets and strides count f32 elements, except
// WOff and WStride, which count bytes.
type MatVecPush struct {
	K, M, N       uint32 // row length, rows, activation columns
	WOff, WStride uint32 // byte offset of row 0 in the binding, bytes per row
	XOff, XStride uint32 // activation column 0 and the distance between columns
	YOff, YStride uint32 // output (row 0, column 0) and the distance between columns
}

// MatVecMaxCols is the most activation columns one matvec dispatch handles:
// GPUs give it at most gpuMatVecPass, CPU devices up to MatVecMaxCols.
const MatVecMaxCols = 16

// gpuMatVecPass is the most activation columns one matvec dispatch takes on
// GPUs (k.matvecPass).
const gpuMatVecPass = 8

// matvecWG is the matvec workgroup size: one or more weight rows per
// workgroup (see the tpr specialization constant in mulMat).
const matvecWG = 32

// MatVec records y = W x for n activation columns, the decode-step kernel:
// x holds n columns of w.Cols f32 ([n][Cols]) and y receives n columns of
// w.Rows f32 ([n][Rows]), y[c*Rows+r] = sum_k W[r][k]*x[c][k]. Up to
// MatVecMaxCols columns share one pass over the weights; larger n takes
// several passes (use MulMat, which switches to MatMul). x and y must start
// at a multiple of 4 bytes; any storage offset alignment is taken care of.
func (k *Kernels) MatVec(c *vk.Cmd, w Weight, x vk.Range, n int, y vk.Range) error {
	return k.mulMat(c, w, x, n, y, mulOpts{})
}

// MulMat records y = W x like MatVec, choosing the matvec kernel for up to
// MatVecMaxCols columns on GPUs (cpuMatVecCols on CPU devices, in passes of
// MatVecMaxCols) and the tiled MatMul kernel above. Where the integer-dot
// path is on (IntegerDot, SetQ8Scratch) the matvec products of the types
// that have it quantize x to Q8_1 first (matvec_idot.go).
func (k *Kernels) MulMat(c *vk.Cmd, w Weight, x vk.Range, n int, y vk.Range) error {
	tiled := n > k.matvecCols
	return k.mulMat(c, w, x, n, y, mulOpts{tiled: tiled, coop: tiled && k.coopOn})
}

// MulMatAdd records y += W x (a projection added to the residual stream)
// with MulMat's choice of kernel, in one dispatch per window instead of a
// product and an Add.
func (k *Kernels) MulMatAdd(c *vk.Cmd, w Weight, x vk.Range, n int, y vk.Range) error {
	tiled := n > k.matvecCols
	return k.mulMat(c, w, x, n, y, mulOpts{tiled: tiled, coop: tiled && k.coopOn, acc: true})
}

// mulOpts are mulMat's settings; the zero value is MatVec's.
type mulOpts struct {
	tiled    bool   // the matmul kernel, else matvec
	coop     bool   // with tiled: the cooperative-matrix matmul (CoopMatrix)
	maxRange uint64 // binding limit (tests); 0 means Device.MaxBinding
	slow     bool   // never the vector-load path (tests)
	acc      bool   // y += W x instead of y = W x
	// noUniform keeps the activations in a storage buffer on CPU devices
	// (tests of both paths).
	noUniform bool
	// noTexel keeps the weights in a storage buffer where the _xt
	// variants would read them from a texel buffer (tests, benchmarks).
	noTexel bool
}

// mulMat records W x with bindings of at most o.maxRange bytes: one
// dispatch per window of weight rows and group of activation columns.
func (k *Kernels) mulMat(c *vk.Cmd, w Weight, x vk.Range, n int, y vk.Range, o mulOpts) error {
	tiled, maxRange := o.tiled, o.maxRange
	if maxRange == 0 {
		maxRange = k.dev.MaxBinding()
	}
	op := "MatVec"
	if tiled {
		op = "MatMul"
	}
	if o.coop && (!tiled || !k.coopOK) {
		return fmt.Errorf("ops: %s: no cooperative-matrix matmul on %s", op, k.dev.Info().Name)
	}
	names, _ := kernelsFor(w.Type)
	rowBytes, err := weightRowBytes(w.Type, w.Cols)
	if err != nil {
		return fmt.Errorf("ops: %s: %w", op, err)
	}
	if w.Rows <= 0 || n <= 0 {
		return fmt.Errorf("ops: %s: %d rows x %d columns is empty", op, w.Rows, n)
	}
	if err := sized(op, "weight", w.Data, rowBytes*uint64(w.Rows)); err != nil {
		return err
	}
	if err := sized(op, "x", x, 4*uint64(n)*uint64(w.Cols)); err != nil {
		return err
	}
	if err := sized(op, "y", y, 4*uint64(n)*uint64(w.Rows)); err != nil {
		return err
	}
	if x.Offset%4 != 0 || y.Offset%4 != 0 {
		return fmt.Errorf("ops: %s: x offset %d or y offset %d is not a multiple of 4", op, x.Offset, y.Offset)
	}
	maxRange, align, budget, err := k.bindLimits(op, maxRange)
	if err != nil {
		return err
	}
	// Columns per dispatch: the x and y windows (plus alignment slack) must
	// each fit one binding.
	perCol := 4 * uint64(max(w.Cols, w.Rows))
	if perCol > budget {
		return fmt.Errorf("ops: %s: one column of %d or %d f32 exceeds the %d-byte binding limit", op, w.Cols, w.Rows, maxRange)
	}
	lim := k.dev.Limits().MaxWorkgroupCount
	if tiled && (uint64(ceilDiv(uint32(min(w.Rows, 1<<31)), matmulBM)) > uint64(lim[0]) || lim[1] == 0) {
		return fmt.Errorf("ops: %s: %d rows exceed the device's %d workgroups", op, w.Rows, lim[0])
	}
	if k.useQ8(w.Type, w.Cols, n, tiled) {
		return k.mulMatQ8(c, w, x, n, y, o, maxRange, align, budget)
	}
	colStep := int(min(budget/perCol, uint64(n)))
	if tiled {
		colStep = min(colStep, int(lim[1])*matmulBN)
	}
	if !tiled {
		colStep = min(colStep, k.matvecPass)
	}
	name := names.matmul
	if o.coop {
		name = k.coopKernel(names.matmul)
	}
	if !tiled {
		name = k.matvecName(w.Type, names, w.Data.Offset)
	}
	plain := !w.Type.IsQuantized()
	tpr := k.matvecTPR(w.Type, w.Cols)
	// On CPU devices the activations go in a uniform buffer when a pass's
	// columns fit one (see shaders/matvec.comp, the _xu variants).
	xuRange, xuAlign := k.xuLimits(tpr, w.Cols, colStep, o)
	// and, with them, the weights in a uniform texel buffer (the _xt
	// variants).
	wRange, wAlign := maxRange, align
	if !tiled && xuRange > 0 {
		name = names.matvecXU
		if k.texel && !o.noTexel {
			name = names.matvecXT
			wRange, wAlign = k.texelLimits(maxRange, align)
		}
	}
	it := matvecPasses{w: w, n: n, colStep: colStep, rowBytes: rowBytes, maxRange: wRange, align: wAlign}
	for it.next() {
		ch, rows, c0, nc := it.ch, it.rows, it.c0, it.nc
		xAlign, xRange := align, maxRange
		if !tiled && xuRange > 0 {
			xAlign, xRange = xuAlign, xuRange
		}
		xr, xOff := bindWindow(x, 4*uint64(c0)*uint64(w.Cols), 4*uint64(nc)*uint64(w.Cols), xAlign, xRange)
		yr, yOff := bindWindow(y, 4*(uint64(c0)*uint64(w.Rows)+uint64(ch.rowBegin)),
			4*(uint64(nc-1)*uint64(w.Rows)+uint64(rows)), align, maxRange)
		push := MatVecPush{
			K: uint32(w.Cols), M: uint32(rows), N: uint32(nc),
			WOff: ch.wOff, WStride: uint32(rowBytes),
			XOff: xOff, XStride: uint32(w.Cols),
			YOff: yOff, YStride: uint32(w.Rows),
		}
		// fast selects the kernels' vector-load path (a specialization
		// constant, see shaders/matvec.comp).
		fast := uint32(0)
		if !o.slow && (w.Cols|int(xOff))%4 == 0 && (!plain || (ch.wOff|uint32(rowBytes))%16 == 0) {
			fast = 1
		}
		ncols := colBucket(nc)
		rpl := k.rowsPerLane(tpr, rows, int(ncols))
		wg := k.matvecGroup(tpr)
		groups := k.Groups(ceilDiv(uint32(rows), wg/tpr*rpl))
		acc := b2u(o.acc)
		spec := [6]uint32{wg, ncols, fast, tpr, acc, rpl}
		nspec := 6
		if tiled {
			groups = [3]uint32{ceilDiv(uint32(rows), matmulBM), ceilDiv(uint32(nc), matmulBN), 1}
			spec, nspec = [6]uint32{matmulWG, fast, acc}, 3
			if o.coop {
				spec, nspec = k.coopSpec(fast, acc), 6
			}
		}
		if !it.first() {
			c.NoBarrier()
		}
		if err := Record(k, c, name, spec[:nspec], groups, &push, it.wr, xr, yr); err != nil {
			return fmt.Errorf("ops: %s %v %dx%d: %w", op, w.Type, w.Rows, w.Cols, err)
		}
	}
	if it.err != nil {
		return fmt.Errorf("ops: %s: weight: %w", op, it.err)
	}
	return nil
}

// matvecPasses walks the dispatches of one product, for mulMat and
// mulMatQ8: each window of weight rows that fits a binding (rowChunkAt) and
// in it each pass of up to colStep activation columns. Use it as
//
//	it := matvecPasses{...}
//	for it.next() { ... it.ch, it.wr, it.rows, it.c0, it.nc ... }
//	if it.err != nil { ... }
//
// It allocates nothing.
type matvecPasses struct {
	w                         Weight
	n, colStep                int
	rowBytes, maxRange, align uint64

	ch     rowChunk // the window
	wr     vk.Range // its binding
	rows   int      // its rows
	c0, nc int      // the pass's first column and column count
	passes int      // passes so far, this one included
	err    error    // why the walk stopped early, if it did
}

// next moves to the next pass, reporting false after the last or on an
// error (in it.err).
func (it *matvecPasses) next() bool {
	if it.passes > 0 {
		if it.c0+it.colStep < it.n {
			it.c0 += it.colStep
			it.nc = min(it.colStep, it.n-it.c0)
			it.passes++
			return true
		}
		if it.ch.rowEnd >= it.w.Rows {
			return false
		}
	}
	ch, err := rowChunkAt(it.ch.rowEnd, it.w.Data.Offset, it.rowBytes, it.w.Rows, it.w.Data.Buf.Size(), it.maxRange, it.align)
	if err != nil {
		it.err = err
		return false
	}
	it.ch, it.rows = ch, ch.rowEnd-ch.rowBegin
	it.wr = vk.Range{Buf: it.w.Data.Buf, Offset: ch.bindOffset, Size: ch.bindRange}
	it.c0, it.nc = 0, min(it.colStep, it.n)
	it.passes++
	return true
}

// first reports whether the current pass is the product's first dispatch
// (the others skip the barrier: they write disjoint outputs).
func (it *matvecPasses) first() bool { return it.passes == 1 }

// xuLimits returns the binding limit and offset alignment of the
// activations' uniform buffer when the matvec kernel reads them from one
// (CPU devices, one invocation per row, and a pass of colStep columns of
// cols f32 that fits maxUniformBufferRange, at most the shader's 64 KiB);
// 0, 0 otherwise.
func (k *Kernels) xuLimits(tpr uint32, cols, colStep int, o mulOpts) (limit, align uint64) {
	if !k.cpuRows || tpr != 1 || o.noUniform {
		return 0, 0
	}
	lim := k.dev.Limits()
	limit = min(lim.MaxUniformBufferRange, xuMaxBytes)
	align = max(lim.MinUniformOffsetAlign, lim.MinStorageOffsetAlign, 4)
	if 4*uint64(cols)*uint64(colStep)+align > limit {
		return 0, 0
	}
	return limit &^ 3, align
}

// texelLimits returns the binding limit and offset alignment of weights
// bound as a texel buffer (the _xt variants): those of a storage binding,
// within maxTexelBufferElements words and at minTexelBufferOffsetAlignment.
func (k *Kernels) texelLimits(maxRange, align uint64) (limit, alignment uint64) {
	lim := k.dev.Limits()
	return min(maxRange, 4*lim.MaxTexelElements) &^ 3, max(align, lim.MinTexelOffsetAlign)
}

// xuMaxBytes is the size of the _xu variants' uniform block (4096 vec4).
const xuMaxBytes = 65536

// matvecTPR returns the matvec invocations per row for rows of cols
// elements of t: enough for the row's units of work (32-element sub-blocks,
// or groups of four for plain types), so short rows share a workgroup, and
// at most k.rowThreads.
func (k *Kernels) matvecTPR(t gguf.GGMLType, cols int) uint32 {
	units := uint32(cols+3) / 4
	if t.IsQuantized() {
		units = uint32(cols) / 32
	}
	tpr := uint32(matvecWG)
	for tpr > 1 && (tpr/2 >= units || tpr > k.rowThreads) {
		tpr /= 2
	}
	return tpr
}

// rowsPerLane returns the matvec rows one invocation computes (the RPL
// specialization constant of shaders/matvec.comp) for a window of rows
// weight rows and n activation columns. Only CPU devices (k.cpuRows) compute
// several rows per invocation, and only where one invocation does a whole
// row (tpr 1); GPUs give each group of tpr > 1 invocations gpuGroupRows
// consecutive rows instead. On CPU devices: 4 rows for one to three columns, 16 for more, fewer for
// short matrices so that every CPU thread gets about two workgroups.
// Process CPU time per product on lavapipe (Q8_0 8000 x 256, 16 columns,
// workgroups of 8): 11.8 ms with 4 rows per invocation, 7.2-7.9 ms with
// 8, 5.3-6.6 ms with 16 (BenchmarkMatVecRows).
func (k *Kernels) rowsPerLane(tpr uint32, rows, n int) uint32 {
	if !k.cpuRows {
		return k.gpuGroupRows(tpr, rows)
	}
	if tpr != 1 {
		return 1
	}
	rpl := 4
	if n >= 4 {
		rpl = 16
	}
	for rpl > 1 && rows < 2*k.cpuThreads*rpl*cpuMatVecWG {
		rpl /= 2
	}
	return uint32(rpl)
}

// matvecGroup returns the matvec workgroup size for tpr invocations per
// row: cpuMatVecWG where a CPU device computes whole rows per invocation,
// matvecWG otherwise.
func (k *Kernels) matvecGroup(tpr uint32) uint32 {
	if tpr == 1 && k.cpuRows {
		return cpuMatVecWG
	}
	return matvecWG
}

// matvecName picks the float matvec variant for a weight of type t at byte
// offset off: the subgroup one where the kernels use subgroups, reading
// the blocks through 16- and 8-bit views where useViews16 allows and the
// type has such variants.
func (k *Kernels) matvecName(t gguf.GGMLType, names weightKernels, off uint64) string {
	if plain, sg, ok := matvecS16Kernels(t); ok && k.useViews16(off) {
		if k.sg {
			return sg
		}
		return plain
	}
	if k.sg {
		return names.matvecSG
	}
	return names.matvec
}

// useViews16 reports whether the GPU matvec kernels read a weight at byte
// offset off through 16- and 8-bit storage views (the _s16 variants): on
// GPUs with storageBuffer16BitAccess and storageBuffer8BitAccess, for
// weights at even offsets (their blocks then all start at even offsets).
// CPU devices keep the word loads of their row kernels.
func (k *Kernels) useViews16(off uint64) bool {
	return k.views16 && !k.cpuRows && off%2 == 0
}

// maxGroupRows is the most rows one group of GPU matvec invocations
// computes (MAX_GR of shaders/matvec.comp and matvec_idot.comp).
const maxGroupRows = 4

// gpuGroupsPerUnit is the fewest matvec workgroups per compute unit that
// gpuGroupRows keeps: several resident workgroups per unit hide the
// weights' memory latency, which one workgroup of 32 invocations cannot.
const gpuGroupsPerUnit = 4

// gpuGroupRows returns the rows each group of tpr invocations computes in
// the GPU matvec kernels (their RPL/GR specialization constant) for a
// window of rows weight rows: maxGroupRows (4), halved while the
// workgroups would number fewer than gpuGroupsPerUnit per compute unit
// (k.units), down to 1, so that short matrices still fill the GPU and
// tall ones read 4 rows' blocks per invocation against one set of
// activation loads, with a quarter of the workgroups and reductions. With
// tpr 1 (rows of one sub-block) it is 1. k.groupRows, when set (tests),
// overrides the rule where tpr > 1. Unmeasured: chosen without a GPU at
// hand (see docs/performance.md).
func (k *Kernels) gpuGroupRows(tpr uint32, rows int) uint32 {
	if tpr <= 1 {
		return 1
	}
	if k.groupRows > 0 {
		return k.groupRows
	}
	rpw := matvecWG / tpr
	gr := uint32(maxGroupRows)
	for gr > 1 && int(ceilDiv(uint32(min(rows, 1<<30)), rpw*gr)) < gpuGroupsPerUnit*max(k.units, 1) {
		gr /= 2
	}
	return gr
}

// idotGroupRows is gpuGroupRows for the integer-dot kernels, 1 in the CPU
// layout.
func (k *Kernels) idotGroupRows(tpr uint32, rows int) uint32 {
	if k.cpuRows {
		return 1
	}
	return k.gpuGroupRows(tpr, rows)
}

// cpuMatVecWG is the matvec workgroup size on CPU devices: one subgroup of
// lavapipe (8 lanes), so that short matrices still make enough workgroups
// for the driver's threads.
const cpuMatVecWG = 8

// colBucket returns the column count a matvec pass of nc activation
// columns is specialized for (NCOLS of matvec.comp, matvec_fused.comp and
// matvec_idot.comp): the smallest of 1, 2, 4, 8 and 16 that is at least nc.
// The kernels take the real count in a push constant, read the last real
// column in place of the padding ones and store none of these, so every
// batch size a server meets runs on five compiled variants per weight
// shape instead of sixteen, all of them created at load (a variant first
// met mid-step stalls every stream for its compile: 0.1 to 28 s on
// lavapipe).
func colBucket(nc int) uint32 {
	b := uint32(1)
	for int(b) < nc {
		b <<= 1
	}
	return b
}

// colBuckets returns the buckets of passes of 1..maxCols columns.
func colBuckets(maxCols int) []uint32 {
	var bs []uint32
	for b := uint32(1); b < uint32(maxCols); b <<= 1 {
		bs = append(bs, b)
	}
	return append(bs, colBucket(maxCols))
}

// PrepareWeight creates, ahead of the first step, the pipelines that MatVec
// (1..MatVecMaxCols columns) and MatMul use for weights of type t with rows
// of cols elements stored at a 16-byte aligned offset and vec4-aligned
// activations (the usual case), so that no step pays for a shader compile
// (hundreds of milliseconds on lavapipe); accumulate prepares MulMatAdd's
// instead of MulMat's. Where the integer-dot path takes the type it
// prepares that path's matvec and quantize pipelines instead of the float
// matvec ones. Call it once per distinct (type, row length, accumulate) at
// load time, after any SetIntegerDot.
func (k *Kernels) PrepareWeight(t gguf.GGMLType, rows, cols int, accumulate bool) error {
	names, ok := kernelsFor(t)
	if !ok {
		return fmt.Errorf("ops: PrepareWeight: no kernels for weight type %v", t)
	}
	rowBytes, err := weightRowBytes(t, cols)
	if err != nil {
		return fmt.Errorf("ops: PrepareWeight: %w", err)
	}
	// As mulMat decides, for a weight at a 16-byte aligned offset.
	fast := uint32(0)
	if cols%4 == 0 && (t.IsQuantized() || rowBytes%16 == 0) {
		fast = 1
	}
	push := uint32(unsafe.Sizeof(MatVecPush{}))
	if ok, err := k.prepareQ8(t, rows, cols, accumulate); err != nil || ok {
		if err != nil {
			return err
		}
		// The integer path takes every matvec of the type; MulMat's
		// wider batches the tiled kernel.
		return k.prepareTiled(names.matmul, push, fast, b2u(accumulate))
	}
	name := k.matvecName(t, names, 0)
	tpr, acc := k.matvecTPR(t, cols), b2u(accumulate)
	for _, n := range colBuckets(k.matvecPass) {
		rpl := k.rowsPerLane(tpr, rows, int(n))
		name := name
		if lim, _ := k.xuLimits(tpr, cols, int(n), mulOpts{}); lim > 0 {
			name = names.matvecXU
			if k.texel {
				name = names.matvecXT
			}
		}
		if _, err := k.Pipeline(name, 3, push, k.matvecGroup(tpr), n, fast, tpr, acc, rpl); err != nil {
			return err
		}
	}
	return k.prepareTiled(names.matmul, push, fast, acc)
}

// prepareTiled creates the pipeline of MulMat's tiled products: the
// cooperative-matrix variant of matmul where CoopMatrix is on, else
// matmul itself.
func (k *Kernels) prepareTiled(matmul string, push, fast, acc uint32) error {
	if k.coopOn {
		spec := k.coopSpec(fast, acc)
		_, err := k.Pipeline(k.coopKernel(matmul), 3, push, spec[:]...)
		return err
	}
	_, err := k.Pipeline(matmul, 3, push, matmulWG, fast, acc)
	return err
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// bindLimits returns, for a kernel that binds windows of its buffers of at
// most maxRange bytes, that limit (capped at 2 GiB), the offset alignment
// of a binding, and the bytes a window can cover wherever it starts (the
// limit less the alignment slack).
func (k *Kernels) bindLimits(op string, maxRange uint64) (limit, align, budget uint64, err error) {
	limit = min(maxRange, 1<<31)
	align = max(k.dev.Limits().MinStorageOffsetAlign, 4)
	if limit <= 2*align {
		return 0, 0, 0, fmt.Errorf("ops: %s: binding limit %d bytes is too small", op, limit)
	}
	return limit, align, limit - align, nil
}

// bindWindow returns a binding of r's buffer that covers the bytes
// [off, off+size) of r, starting at the aligned offset at or below them,
// and the f32 element index of byte off inside that binding. The binding
// extends to the end of the buffer (up to maxRange bytes), so the cached
// descriptor set depends only on the buffer and the offset, not on the
// batch size; the kernels touch only the elements their push constants
// name.
func bindWindow(r vk.Range, off, size, align, maxRange uint64) (vk.Range, uint32) {
	start := r.Offset + off
	b := start - start%align
	need := roundUp4(start+size) - b
	if ext := min(r.Buf.Size()-b, maxRange) &^ 3; ext > need {
		need = ext
	}
	return vk.Range{Buf: r.Buf, Offset: b, Size: need}, uint32((start - b) / 4)
}
