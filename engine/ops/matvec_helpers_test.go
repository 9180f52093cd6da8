package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/sweep"
)

// weightTypes are the weight formats the get_rows, matvec and matmul kernels
// support, in the order the tests run them.
var weightTypes = []gguf.GGMLType{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16,
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
	gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4,
}

// sampled reports whether case i of a test's cases over the weight types
// types runs for type typ: every case under VKLLM_LONG=1 (make test-long,
// internal/sweep); otherwise case 0 for every type and each later case for
// one plain type (F32, F16, BF16) and one quantized type of types, both
// rotating with i (and layoutSampled picks the layouts). So every type's
// dequantization runs in the kernels (case 0), and every case's shape,
// offsets, passes and options on a plain and a quantized type, at a
// fraction of the kernel variants (each one seconds of lavapipe's LLVM on
// a cold shader cache).
func sampled(types []gguf.GGMLType, typ gguf.GGMLType, i int) bool {
	if i == 0 || sweep.Long() {
		return true
	}
	var class []gguf.GGMLType
	for _, t := range types {
		if t.IsQuantized() == typ.IsQuantized() {
			class = append(class, t)
		}
	}
	return sweep.Pick(i-1, slices.Index(class, typ), len(class))
}

// layoutSampled reports whether case i of a sweep over the weight types
// types, run under matvecLayouts, runs for type typ in the layout the
// kernels use now (invocations per row, and shared-memory or subgroup
// reductions): in all of them under VKLLM_LONG=1; otherwise in one,
// rotating with the case and the type. So every layout runs case 0 on a
// quarter of the types, every type runs in a layout per case it takes
// (see sampled), and every case in one layout per type.
func (g *rig) layoutSampled(types []gguf.GGMLType, typ gguf.GGMLType, i int) bool {
	if sweep.Long() {
		return true
	}
	f := slices.Index(types, typ)
	sg, n := int(b2u(g.k.Subgroups())), 1
	if g.k.dev.Features().SubgroupArithmetic {
		n = 2
	}
	return sweep.Pick(i+f, 2*sg+int(b2u(g.k.cpuRows)), 2*n)
}

// gpuVariant is one GPU matvec variant of gpuVariants: the index-th of
// the count variants that read the weights through 16- and 8-bit views
// (views), or of those that do not.
type gpuVariant struct {
	index, count int
	views        bool
}

// gpuCaseSampled reports whether case i of gpuCases runs for type typ of
// types in GPU variant gv: all of them under VKLLM_LONG=1; otherwise, in
// a variant with the views (whose dequantization is the type's own), every
// type with one case, rotating with the type and the variant; in one without
// (the float matvec's dequantization, which TestMatVec covers), each
// case on one type, rotating with the case and the variant.
func gpuCaseSampled(types []gguf.GGMLType, typ gguf.GGMLType, i int, gv gpuVariant) bool {
	f := slices.Index(types, typ)
	if gv.views {
		return sweep.Pick(i+f, gv.index, len(gpuCases(typ)))
	}
	return sweep.Pick(i*gv.count+gv.index, f, len(types))
}

// halfFields lists the byte offsets of the f16 scales inside one block of
// each quantized type; every other byte of a block is a free bit pattern.
var halfFields = map[gguf.GGMLType][]int{
	gguf.TypeQ4_0:   {0},
	gguf.TypeQ4_1:   {0, 2},
	gguf.TypeQ5_0:   {0},
	gguf.TypeQ5_1:   {0, 2},
	gguf.TypeQ8_0:   {0},
	gguf.TypeQ2_K:   {80, 82},
	gguf.TypeQ3_K:   {108},
	gguf.TypeQ4_K:   {0, 2},
	gguf.TypeQ5_K:   {0, 2},
	gguf.TypeQ6_K:   {208},
	gguf.TypeIQ4_NL: {0},
	gguf.TypeIQ4_XS: {0},
}

// randomHalf returns the bits of a finite normal f16 of magnitude in
// [2^lo, 2^hi) with a random sign and mantissa.
func randomHalf(rng *rand.Rand, lo, hi int) uint16 {
	exp := uint16(15 + lo + rng.IntN(hi-lo))
	return uint16(rng.IntN(2))<<15 | exp<<10 | uint16(rng.IntN(1024))
}

// randomWeights returns a rows x cols matrix of type t in GGUF layout: plain
// types hold values in about [-1, 1]; quantized types hold random valid
// blocks (random bits everywhere but the f16 scales, which are finite, and
// MXFP4's exponent bytes, which give scales like theirs).
func randomWeights(rng *rand.Rand, t gguf.GGMLType, rows, cols int) []byte {
	rb, err := t.RowSize(uint64(cols))
	if err != nil {
		panic("BUG: " + err.Error())
	}
	w := make([]byte, int(rb)*rows)
	switch t {
	case gguf.TypeF32:
		for i := 0; i < len(w); i += 4 {
			putU32(w[i:], math.Float32bits(float32(rng.Float64()*2-1)))
		}
	case gguf.TypeF16:
		for i := 0; i < len(w); i += 2 {
			putU16(w[i:], randomHalf(rng, -8, 0))
		}
	case gguf.TypeBF16:
		for i := 0; i < len(w); i += 2 {
			putU16(w[i:], uint16(math.Float32bits(float32(rng.Float64()*2-1))>>16))
		}
	default:
		for i := range w {
			w[i] = byte(rng.Uint32())
		}
		bs := t.TypeSize()
		for b := 0; b < len(w); b += bs {
			for _, off := range halfFields[t] {
				putU16(w[b+off:], randomHalf(rng, -10, -4))
			}
			if t == gguf.TypeMXFP4 {
				w[b] = byte(127 - 10 + rng.IntN(7)) // 2^-10 .. 2^-4, halved
			}
		}
	}
	return w
}

func putU16(b []byte, v uint16) { b[0], b[1] = byte(v), byte(v>>8) }
func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// randomVector returns n values uniform in [-1, 1).
func randomVector(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.Float64()*2 - 1)
	}
	return x
}

// dequantizeAll returns the whole matrix as f32 through dequantizeRow.
func dequantizeAll(t testing.TB, typ gguf.GGMLType, w []byte, rows, cols int) []float32 {
	t.Helper()
	out := make([]float32, rows*cols)
	rb := len(w) / rows
	for r := 0; r < rows; r++ {
		if err := dequantizeRow(typ, w[r*rb:(r+1)*rb], out[r*cols:(r+1)*cols]); err != nil {
			t.Fatalf("dequantizeRow(%v, row %d): %v", typ, r, err)
		}
	}
	return out
}

// refProduct returns y[c*rows+r] = sum_k wf[r][k]*x[c][k] (MatMulF32Ref's
// product, widened to float64) and the magnitude sum_k |wf[r][k]*x[c][k]|
// that bounds the f32 rounding error.
func refProduct(wf []float32, rows, cols int, x []float32, n int) (y, mag []float64) {
	yf := make([]float32, n*rows)
	if err := MatMulF32Ref(wf, rows, cols, x, n, yf); err != nil {
		panic("BUG: refProduct: " + err.Error())
	}
	y = make([]float64, n*rows)
	mag = make([]float64, n*rows)
	for c := 0; c < n; c++ {
		xc := x[c*cols : (c+1)*cols]
		for r := 0; r < rows; r++ {
			var m float64
			for k, v := range wf[r*cols : (r+1)*cols] {
				m += math.Abs(float64(v) * float64(xc[k]))
			}
			y[c*rows+r], mag[c*rows+r] = float64(yf[c*rows+r]), m
		}
	}
	return y, mag
}

// relTol is the error allowed relative to sum |w*x|: f32 accumulation over a
// few thousand terms in a different order than the reference, plus one f32
// rounding of each dequantized weight.
const relTol = 1e-4

// checkProduct fails t for every output that is NaN or further from want
// than relTol*mag, naming the first few.
func checkProduct(t *testing.T, name string, got []float32, want, mag []float64, rows int) {
	t.Helper()
	checkProductTol(t, name, got, want, mag, rows, relTol, 0)
}

// coopTol returns the error allowed, relative to sum |w*x| and absolute,
// for the cooperative-matrix matmul over rows of cols: each weight and
// activation rounded to f16 (2^-11 relative each, so a product is off by
// up to about 2^-10 of itself), plus the f32 accumulation; and for the
// values that f16 holds as subnormals (below 2^-14), up to half their
// 2^-24 spacing per term, at |x| and |w| of at most about 1.
func coopTol(cols int) (rel, abs float64) {
	return 1.1 * 0x1p-10, float64(cols) * 0x1p-24
}

// checkProductTol fails t for every output that is NaN or further from
// want than rel*mag+abs, naming the first few.
func checkProductTol(t *testing.T, name string, got []float32, want, mag []float64, rows int, rel, abs float64) {
	t.Helper()
	bad := 0
	for i, g := range got {
		d := math.Abs(float64(g) - want[i])
		if math.IsNaN(float64(g)) || d > rel*mag[i]+abs+1e-30 {
			if bad < 5 {
				t.Errorf("%s: y[col %d][row %d] = %g, want %g (|diff| %.3g > %.3g)", name, i/rows, i%rows, g, want[i], d, rel*mag[i]+abs)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d outputs wrong", name, bad, len(got))
	}
}

// upWeight uploads w into a fresh buffer lead bytes past its start (to
// exercise rows that do not start on a word or an aligned binding) and
// returns the Weight.
func (g *rig) upWeight(typ gguf.GGMLType, w []byte, rows, cols, lead int) Weight {
	g.t.Helper()
	r := g.buf(lead + len(w))
	if err := r.Buf.Write(uint64(lead), w); err != nil {
		g.t.Fatal(err)
	}
	return Weight{Type: typ, Rows: rows, Cols: cols, Data: r.Buf.Range(uint64(lead), uint64(len(w)))}
}

// testCols returns a row length of about two blocks of t (odd for the plain
// types, so rows end inside a group of four).
func testCols(t gguf.GGMLType) int {
	if bs := t.BlockSize(); bs > 1 {
		return 2 * bs
	}
	return 67
}

// vecCols returns a row length that a vector-load path can take: whole
// blocks, and for plain types a multiple of four.
func vecCols(t gguf.GGMLType) int {
	if bs := t.BlockSize(); bs > 1 {
		return 2 * bs
	}
	return 132
}
