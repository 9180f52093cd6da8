package ops

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// The integer-dot matvec path (GPUs with shaderIntegerDotProduct, as
// llama.cpp's Vulkan backend does with Q8_1 activations): MulMat first
// quantizes the activation columns to Q8_1 blocks in a scratch buffer the
// caller provides once (SetQ8Scratch), then shaders/matvec_idot.comp
// multiplies the weights' integer quants by them four bytes at a time. The
// result differs from the float kernels by the activations' rounding to 8
// bits per 32-element block (see MatVecQ8_1Ref).

// QuantizePush mirrors the push-constant block of
// shaders/quantize_q8_1.comp. X offsets count f32 elements, Q offsets
// 32-bit words.
type QuantizePush struct {
	K, N          uint32 // elements per column (a multiple of 32), columns
	XOff, XStride uint32 // activation column 0 and the distance between columns
	QOff, QStride uint32 // Q8_1 column 0 and the distance between columns
}

// quantizeWG is the quantize_q8_1 workgroup size (one block per
// invocation).
const quantizeWG = 64

// q8Words returns the 32-bit words of one Q8_1 column of cols elements: per
// 32-element block eight quant words and an f32 (d, s) pair, the column
// rounded up to four words so that every column starts 16-byte aligned.
func q8Words(cols int) uint64 {
	return (10*uint64(cols/32) + 3) &^ 3
}

// q8State is the Q8_1 scratch and what it holds.
type q8State struct {
	scratch vk.Range
	// The last quantization: of n columns of cols elements at x, read by
	// matvecs recorded in readEpoch (see vk.Cmd.Epoch).
	x         vk.Range
	cols, n   int
	readEpoch uint64
	valid     bool
}

// idotNames are the integer-dot matvec variants of one weight type: plain
// and subgroup, the same reading the blocks through 16- and 8-bit storage
// views ("" where the type has none), and the fused decode epilogues'
// (matvec_fused_*: MatVecSplit, MatVecGLU).
type idotNames struct {
	plain, sg, plain16, sg16 string
	fused, fusedSG           string
}

// idotKernels returns the integer-dot matvec variants for weight type t,
// or false for types that keep the float kernels.
func idotKernels(t gguf.GGMLType) (idotNames, bool) {
	n, ok := idotTable[t]
	return n, ok
}

// idotTable holds idotKernels' answers, made once (the recording path
// allocates nothing).
var idotTable = func() map[gguf.GGMLType]idotNames {
	m := map[gguf.GGMLType]idotNames{}
	for t := range gguf.GGMLType(64) {
		if n, ok := idotBase(t); ok {
			n.fused = "matvec_fused_" + strings.TrimPrefix(n.plain, "matvec_")
			n.fusedSG = n.fused + "_sg"
			m[t] = n
		}
	}
	return m
}()

// idotBase is idotKernels without the fused names.
func idotBase(t gguf.GGMLType) (idotNames, bool) {
	switch t {
	case gguf.TypeQ4_0:
		return idotNames{plain: "matvec_q4_0_q8_1_f32", sg: "matvec_q4_0_q8_1_f32_sg", plain16: "matvec_q4_0_q8_1_f32_s16", sg16: "matvec_q4_0_q8_1_f32_sg_s16"}, true
	case gguf.TypeQ4_1:
		return idotNames{plain: "matvec_q4_1_q8_1_f32", sg: "matvec_q4_1_q8_1_f32_sg"}, true
	case gguf.TypeQ5_0:
		return idotNames{plain: "matvec_q5_0_q8_1_f32", sg: "matvec_q5_0_q8_1_f32_sg"}, true
	case gguf.TypeQ5_1:
		return idotNames{plain: "matvec_q5_1_q8_1_f32", sg: "matvec_q5_1_q8_1_f32_sg"}, true
	case gguf.TypeQ8_0:
		return idotNames{plain: "matvec_q8_0_q8_1_f32", sg: "matvec_q8_0_q8_1_f32_sg", plain16: "matvec_q8_0_q8_1_f32_s16", sg16: "matvec_q8_0_q8_1_f32_sg_s16"}, true
	case gguf.TypeQ2_K:
		return idotNames{plain: "matvec_q2_k_q8_1_f32", sg: "matvec_q2_k_q8_1_f32_sg"}, true
	case gguf.TypeQ3_K:
		return idotNames{plain: "matvec_q3_k_q8_1_f32", sg: "matvec_q3_k_q8_1_f32_sg"}, true
	case gguf.TypeQ4_K:
		return idotNames{plain: "matvec_q4_k_q8_1_f32", sg: "matvec_q4_k_q8_1_f32_sg", plain16: "matvec_q4_k_q8_1_f32_s16", sg16: "matvec_q4_k_q8_1_f32_sg_s16"}, true
	case gguf.TypeQ5_K:
		return idotNames{plain: "matvec_q5_k_q8_1_f32", sg: "matvec_q5_k_q8_1_f32_sg", plain16: "matvec_q5_k_q8_1_f32_s16", sg16: "matvec_q5_k_q8_1_f32_sg_s16"}, true
	case gguf.TypeQ6_K:
		return idotNames{plain: "matvec_q6_k_q8_1_f32", sg: "matvec_q6_k_q8_1_f32_sg", plain16: "matvec_q6_k_q8_1_f32_s16", sg16: "matvec_q6_k_q8_1_f32_sg_s16"}, true
	case gguf.TypeIQ4_NL:
		return idotNames{plain: "matvec_iq4_nl_q8_1_f32", sg: "matvec_iq4_nl_q8_1_f32_sg"}, true
	case gguf.TypeIQ4_XS:
		return idotNames{plain: "matvec_iq4_xs_q8_1_f32", sg: "matvec_iq4_xs_q8_1_f32_sg"}, true
	case gguf.TypeMXFP4:
		return idotNames{plain: "matvec_mxfp4_q8_1_f32", sg: "matvec_mxfp4_q8_1_f32_sg"}, true
	}
	return idotNames{}, false
}

// idotName picks the integer-dot variant for a weight at byte offset off.
func (k *Kernels) idotName(names idotNames, off uint64) string {
	if k.useViews16(off) && names.plain16 != "" {
		if k.sg {
			return names.sg16
		}
		return names.plain16
	}
	if k.sg {
		return names.sg
	}
	return names.plain
}

// HasIntegerDot reports whether weights of type t have an integer-dot
// matvec kernel.
func HasIntegerDot(t gguf.GGMLType) bool {
	_, ok := idotKernels(t)
	return ok
}

// IntegerDot reports whether MulMat and MatVec take the integer-dot path
// for the types that have one (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4: every quantized type the float kernels
// take): on by default on GPUs with shaderIntegerDotProduct, off on CPU
// devices, where the float kernels are faster.
func (k *Kernels) IntegerDot() bool { return k.intDot }

// SetIntegerDot turns the integer-dot path on or off; turning it on has no
// effect on devices without shaderIntegerDotProduct. Call it before
// PrepareWeight and Q8ScratchBytes.
func (k *Kernels) SetIntegerDot(on bool) { k.intDot = on && k.dev.Features().IntegerDot }

// Q8ScratchBytes returns the bytes of Q8_1 scratch that lets MulMat take
// the integer-dot path for batches of up to n activation columns of up to
// cols elements (the longest weight row), or 0 where the path is off.
// Batches wider than MulMat's matvec crossover take the tiled kernel and
// need none.
func (k *Kernels) Q8ScratchBytes(cols, n int) uint64 {
	if !k.intDot || cols < 32 || n <= 0 {
		return 0
	}
	return 4 * q8Words(cols) * uint64(min(n, k.matvecCols))
}

// SetQ8Scratch gives the kernels the buffer MulMat and MatVec quantize
// activations into on the integer-dot path (see Q8ScratchBytes; a product
// whose columns do not fit takes the float kernels). r must start at a
// multiple of 16 bytes and of the storage offset alignment and fit one
// binding; it must outlive every command recorded with it, and nothing else
// may write it meanwhile. A zero Range removes it.
func (k *Kernels) SetQ8Scratch(r vk.Range) error {
	if r.Buf == nil {
		k.q8 = q8State{}
		return nil
	}
	align := max(k.dev.Limits().MinStorageOffsetAlign, 16)
	if r.Offset%align != 0 || r.Size > k.dev.MaxBinding() || r.Size < 16 {
		return fmt.Errorf("ops: SetQ8Scratch: %d bytes at offset %d: want an offset that is a multiple of %d and at most %d bytes",
			r.Size, r.Offset, align, k.dev.MaxBinding())
	}
	k.q8 = q8State{scratch: r}
	return nil
}

// useQ8 reports whether a product of n columns of w.Cols by a w.Type
// weight takes the integer-dot path: the path is on, the type has a
// kernel, the matvec kernel was chosen and the scratch holds the columns.
func (k *Kernels) useQ8(t gguf.GGMLType, cols, n int, tiled bool) bool {
	if !k.intDot || tiled || k.q8.scratch.Buf == nil || cols%32 != 0 {
		return false
	}
	if _, ok := idotKernels(t); !ok {
		return false
	}
	return 4*q8Words(cols)*uint64(n) <= k.q8.scratch.Size
}

// idotPass is the most activation columns one integer-dot matvec dispatch
// takes (MAX_COLS of shaders/matvec_idot.comp).
const idotPass = gpuMatVecPass

// mulMatQ8 records W x on the integer-dot path (mulMat checked the shapes
// and bindings): the quantization of x into the scratch, unless it already
// holds it, then one matvec_idot dispatch per window of weight rows and
// pass of columns.
//
// The scratch is shared by every product, so quantizing must not overlap
// the matvecs of the one before: when the caller skipped the barrier
// (vk.Cmd.NoBarrier) and those matvecs are in the current epoch, it puts
// one back. The same skip says that nothing since the last barrier wrote x,
// so a product of the same activations as the one before (the q, k and v
// projections, gate and up) reuses its quantization.
func (k *Kernels) mulMatQ8(c *vk.Cmd, w Weight, x vk.Range, n int, y vk.Range, o mulOpts, maxRange, align, budget uint64) error {
	const op = "MatVec"
	names, _ := idotKernels(w.Type)
	name := k.idotName(names, w.Data.Offset)
	rowBytes, _ := weightRowBytes(w.Type, w.Cols)
	words := q8Words(w.Cols)
	q := k.q8.scratch
	reuse, err := k.q8Quantize(c, x, w.Cols, n, o.slow, maxRange, align, budget)
	if err != nil {
		return fmt.Errorf("ops: %s %v %dx%d: %w", op, w.Type, w.Rows, w.Cols, err)
	}
	colStep := min(n, k.matvecPass, idotPass)
	tpr := k.matvecTPR(w.Type, w.Cols)
	wg := k.matvecGroup(tpr)
	it := matvecPasses{w: w, n: n, colStep: colStep, rowBytes: rowBytes, maxRange: maxRange, align: align}
	for it.next() {
		ch, rows, c0, nc := it.ch, it.rows, it.c0, it.nc
		yr, yOff := bindWindow(y, 4*(uint64(c0)*uint64(w.Rows)+uint64(ch.rowBegin)),
			4*(uint64(nc-1)*uint64(w.Rows)+uint64(rows)), align, maxRange)
		push := MatVecPush{
			K: uint32(w.Cols), M: uint32(rows), N: uint32(nc),
			WOff: ch.wOff, WStride: uint32(rowBytes),
			XOff: uint32(uint64(c0) * words), XStride: uint32(words),
			YOff: yOff, YStride: uint32(w.Rows),
		}
		// After a quantization the automatic barrier orders the first
		// dispatch after it; a reused one keeps the caller's skip.
		if !it.first() {
			c.NoBarrier()
		}
		gr := k.idotGroupRows(tpr, rows)
		spec := [5]uint32{wg, colBucket(nc), tpr, b2u(o.acc), gr}
		groups := k.Groups(ceilDiv(uint32(rows), wg/tpr*gr))
		if err := Record(k, c, name, spec[:], groups, &push, it.wr, q, yr); err != nil {
			return fmt.Errorf("ops: %s %v %dx%d: %w", op, w.Type, w.Rows, w.Cols, err)
		}
	}
	if it.err != nil {
		return fmt.Errorf("ops: %s: weight: %w", op, it.err)
	}
	k.q8Read(c, reuse, x, w.Cols, n)
	return nil
}

// q8Quantize records the quantization of n columns of cols at x into the
// scratch, unless the scratch already holds them for matvecs recorded
// since the last barrier (see mulMatQ8), and reports whether it reused
// them. Call q8Read after recording the matvecs that read it.
func (k *Kernels) q8Quantize(c *vk.Cmd, x vk.Range, cols, n int, slow bool, maxRange, align, budget uint64) (bool, error) {
	pending := c.Epoch() == k.q8.readEpoch && k.q8.valid
	reuse := pending && c.SkipsBarrier() && k.q8.x.Buf == x.Buf && k.q8.x.Offset == x.Offset &&
		k.q8.cols == cols && n <= k.q8.n
	if reuse {
		return true, nil
	}
	if pending && c.SkipsBarrier() {
		c.Barrier()
	}
	k.q8.valid = false
	return false, k.quantizeQ8(c, x, cols, n, slow, maxRange, align, budget)
}

// q8Read notes that matvecs recorded in c's current epoch read the
// scratch, which holds x's columns (quantized anew unless reuse).
func (k *Kernels) q8Read(c *vk.Cmd, reuse bool, x vk.Range, cols, n int) {
	if !reuse {
		k.q8.x, k.q8.cols, k.q8.n = x, cols, n
	}
	k.q8.readEpoch, k.q8.valid = c.Epoch(), true
}

// quantizeQ8 records the quantization of n activation columns of cols f32
// at x into the scratch (column c at word c*q8Words(cols)), binding x in
// windows of at most maxRange bytes; slow forces the scalar loads (tests).
func (k *Kernels) quantizeQ8(c *vk.Cmd, x vk.Range, cols, n int, slow bool, maxRange, align, budget uint64) error {
	words := q8Words(cols)
	step := int(min(budget/(4*uint64(cols)), uint64(n)))
	if step == 0 {
		return fmt.Errorf("quantize: a column of %d f32 exceeds the %d-byte binding limit", cols, maxRange)
	}
	for c0 := 0; c0 < n; c0 += step {
		nc := min(step, n-c0)
		xr, xOff := bindWindow(x, 4*uint64(c0)*uint64(cols), 4*uint64(nc)*uint64(cols), align, maxRange)
		push := QuantizePush{K: uint32(cols), N: uint32(nc), XOff: xOff, XStride: uint32(cols),
			QOff: uint32(uint64(c0) * words), QStride: uint32(words)}
		fast := b2u(!slow && (xOff|uint32(cols))%4 == 0)
		if c0 > 0 {
			c.NoBarrier() // disjoint columns
		}
		groups := k.Groups(ceilDiv(uint32(nc)*uint32(cols/32), quantizeWG))
		if err := Record(k, c, "quantize_f32_q8_1", []uint32{quantizeWG, fast}, groups, &push, xr, k.q8.scratch); err != nil {
			return fmt.Errorf("quantize: %w", err)
		}
	}
	return nil
}

// prepareQ8 creates the integer-dot pipelines for weights of type t of
// rows rows of cols elements (PrepareWeight's part for the path), reporting
// whether the path applies.
func (k *Kernels) prepareQ8(t gguf.GGMLType, rows, cols int, accumulate bool) (bool, error) {
	names, ok := idotKernels(t)
	if !k.intDot || !ok || cols%32 != 0 {
		return false, nil
	}
	name := k.idotName(names, 0)
	mv := uint32(unsafe.Sizeof(MatVecPush{}))
	if err := k.prepareQuantize(); err != nil {
		return false, err
	}
	tpr := k.matvecTPR(t, cols)
	for _, n := range colBuckets(min(k.matvecPass, idotPass)) {
		if _, err := k.Pipeline(name, 3, mv, k.matvecGroup(tpr), n, tpr, b2u(accumulate), k.idotGroupRows(tpr, rows)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// prepareQuantize creates the quantize_f32_q8_1 pipeline the integer-dot
// path records (the vec4 variant).
func (k *Kernels) prepareQuantize() error {
	_, err := k.Pipeline("quantize_f32_q8_1", 2, uint32(unsafe.Sizeof(QuantizePush{})), quantizeWG, 1)
	return err
}

// QuantizeQ8_1Ref is the CPU reference of shaders/quantize_q8_1.comp for
// one activation column x (len a multiple of 32): it writes the int8 quants
// to q (len(x)) and each block's scale d and sum s = d*sum(q) to ds[2b],
// ds[2b+1], computing in f32 as the kernel does (d = max|x|/127, q =
// roundEven(x * (1/d))). The kernel's division may round differently (GLSL
// allows 2.5 ulp), which can move a quant whose x*(1/d) is within a few
// ulp of a half by one.
func QuantizeQ8_1Ref(x []float32, q []int8, ds []float32) error {
	if len(x)%32 != 0 || len(q) < len(x) || len(ds) < 2*len(x)/32 {
		return fmt.Errorf("ops: QuantizeQ8_1Ref: %d elements (want a multiple of 32), %d quants, %d scales", len(x), len(q), len(ds))
	}
	for b := 0; b < len(x)/32; b++ {
		blk := x[32*b : 32*b+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		sum := 0
		for i, v := range blk {
			qi := int(math.RoundToEven(float64(v * id)))
			qi = min(max(qi, -127), 127)
			q[32*b+i] = int8(qi)
			sum += qi
		}
		ds[2*b], ds[2*b+1] = d, d*float32(sum)
	}
	return nil
}

// MatVecQ8_1Ref is the CPU reference of the integer-dot matvec kernels
// (shaders/matvec_idot.comp): the product of the weight matrix w (type t,
// rows rows of cols elements, see MatMulRef) with n activation columns
// given as Q8_1 (column c's quants q[c*cols:], its blocks' (d, s) pairs
// ds[2*c*cols/32:], as QuantizeQ8_1Ref writes them), that is with the
// activations d*q: MatVecQ8_1F32Ref over w dequantized.
func MatVecQ8_1Ref(t gguf.GGMLType, w []byte, rows, cols int, q []int8, ds []float32, n int, y []float32) error {
	rowBytes, err := checkWeight(t, w, rows, cols)
	if err != nil {
		return err
	}
	wf := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		if err := dequantize(t, w[r*rowBytes:(r+1)*rowBytes], wf[r*cols:(r+1)*cols]); err != nil {
			return fmt.Errorf("ops: MatVecQ8_1Ref: row %d: %w", r, err)
		}
	}
	return MatVecQ8_1F32Ref(wf, rows, cols, q, ds, n, y)
}

// MatVecQ8_1F32Ref is MatVecQ8_1Ref over weights already in f32 (w holds
// rows rows of cols values), in float64: y[c*rows+r] = sum_b d_b *
// sum_{k in b} w[r][k]*q[k]. The kernel computes the same sums from exact
// integer dot products and f32 scales, so the two differ only by f32
// rounding.
func MatVecQ8_1F32Ref(w []float32, rows, cols int, q []int8, ds []float32, n int, y []float32) error {
	if rows < 0 || cols <= 0 || len(w) < rows*cols {
		return fmt.Errorf("ops: MatVecQ8_1F32Ref: %d weights for %d rows of %d", len(w), rows, cols)
	}
	if cols%32 != 0 || n < 0 || len(q) < n*cols || len(ds) < 2*n*cols/32 {
		return fmt.Errorf("ops: MatVecQ8_1Ref: %d quants and %d scales for %d columns of %d", len(q), len(ds), n, cols)
	}
	if len(y) < n*rows {
		return fmt.Errorf("ops: MatVecQ8_1Ref: y has %d elements, want %d columns of %d", len(y), n, rows)
	}
	for r := 0; r < rows; r++ {
		row := w[r*cols : (r+1)*cols]
		for c := 0; c < n; c++ {
			var s float64
			for b := 0; b < cols/32; b++ {
				var sb float64
				for k := 32 * b; k < 32*b+32; k++ {
					sb += float64(row[k]) * float64(q[c*cols+k])
				}
				s += float64(ds[2*(c*cols/32+b)]) * sb
			}
			y[c*rows+r] = float32(s)
		}
	}
	return nil
}
