package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// idotTypes are the weight formats with an integer-dot matvec kernel.
var idotTypes = []gguf.GGMLType{
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
	gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4,
}

// idotRig returns a rig whose kernels take the integer-dot path, skipping
// on devices without shaderIntegerDotProduct. On CPU devices, which keep
// the float kernels, the path is forced.
func idotRig(t *testing.T) *rig {
	g := newRig(t)
	if !g.k.dev.Features().IntegerDot {
		t.Skipf("%s has no shaderIntegerDotProduct", g.k.dev.Info().Name)
	}
	g.k.SetIntegerDot(true)
	if !g.k.IntegerDot() {
		t.Fatal("SetIntegerDot(true) left the path off on a device with shaderIntegerDotProduct")
	}
	return g
}

// setScratch gives the kernels a fresh NaN-filled Q8_1 scratch for n
// columns of cols.
func (g *rig) setScratch(cols, n int) vk.Range {
	g.t.Helper()
	r := g.buf(int(4 * q8Words(cols) * uint64(n)))
	if err := g.k.SetQ8Scratch(r); err != nil {
		g.t.Fatal(err)
	}
	return r
}

// downQ8 reads n columns of cols back from the scratch as QuantizeQ8_1Ref
// lays them out.
func (g *rig) downQ8(r vk.Range, cols, n int) (q []int8, ds []float32) {
	g.t.Helper()
	words := int(q8Words(cols))
	u := g.downU32(r, words*n)
	nb := cols / 32
	q = make([]int8, n*cols)
	ds = make([]float32, 2*n*nb)
	for c := range n {
		col := u[c*words:]
		for i := range 8 * nb {
			for j := range 4 {
				q[c*cols+4*i+j] = int8(col[i] >> (8 * j))
			}
		}
		for b := range 2 * nb {
			ds[2*c*nb+b] = math.Float32frombits(col[8*nb+b])
		}
	}
	return q, ds
}

// TestQuantizeQ8_1 compares the quantize_q8_1 kernel with QuantizeQ8_1Ref:
// the scales to the kernel's division error (GLSL allows 2.5 ulp), the
// quants exactly except one step where x/d lies within 1e-4 of a half, and
// each block's sum with the kernel's own quants.
func TestQuantizeQ8_1(t *testing.T) {
	g := idotRig(t)
	cases := []struct {
		cols, n, xLead int
		slow           bool
		maxRange       uint64
	}{
		{32, 1, 0, false, 0},
		{256, 3, 0, false, 0},
		{96, 5, 4, false, 0},
		{64, 7, 0, true, 0},
		{4096, 2, 8, false, 0},
		{128, 9, 12, false, 4*128*2 + 256}, // two columns per window
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%dx%d_lead%d", tc.n, tc.cols, tc.xLead)
		if tc.slow {
			name += "_slow"
		}
		if tc.maxRange != 0 {
			name += fmt.Sprintf("_bind%d", tc.maxRange)
		}
		t.Run(name, func(t *testing.T) {
			defer func(parent *testing.T) { g.t = parent }(g.t)
			g.t = t
			x := g.randn(tc.n*tc.cols, 1)
			// Blocks of zeros, of one value and of huge and tiny values.
			for i := range 32 {
				x[i] = 0
			}
			if tc.cols*tc.n >= 128 {
				for i := 32; i < 64; i++ {
					x[i] = -3.5
				}
				for i := 64; i < 96; i++ {
					x[i] = float32(math.Ldexp(float64(x[i]), 40*(i%3-1)))
				}
			}
			xr := g.upF32(append(make([]float32, tc.xLead/4), x...)).Sub(uint64(tc.xLead), uint64(4*len(x)))
			sr := g.setScratch(tc.cols, tc.n)
			maxRange := tc.maxRange
			if maxRange == 0 {
				maxRange = g.k.dev.MaxBinding()
			}
			maxRange, align, budget, err := g.k.bindLimits("test", maxRange)
			if err != nil {
				t.Fatal(err)
			}
			g.run(func(c *vk.Cmd) error {
				return g.k.quantizeQ8(c, xr, tc.cols, tc.n, tc.slow, maxRange, align, budget)
			})
			q, ds := g.downQ8(sr, tc.cols, tc.n)
			wantQ := make([]int8, len(q))
			wantDS := make([]float32, len(ds))
			if err := QuantizeQ8_1Ref(x, wantQ, wantDS); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for b := range len(x) / 32 {
				d, wd := ds[2*b], wantDS[2*b]
				if math.Abs(float64(d-wd)) > 4e-7*float64(wd) || math.IsNaN(float64(d)) {
					t.Errorf("block %d: d = %g, want %g", b, d, wd)
					bad++
				}
				sum := 0
				for i := 32 * b; i < 32*b+32; i++ {
					sum += int(q[i])
					if q[i] == wantQ[i] {
						continue
					}
					f := math.Abs(float64(x[i]) / float64(wd))
					if dq := int(q[i]) - int(wantQ[i]); dq*dq != 1 || math.Abs(f-math.Floor(f)-0.5) > 1e-4 {
						t.Errorf("q[%d] = %d, want %d (x/d = %.6f)", i, q[i], wantQ[i], x[i]/wd)
						bad++
					}
				}
				s := float64(d) * float64(sum)
				if math.Abs(float64(ds[2*b+1])-s) > 1e-6*math.Abs(s)+1e-30 || math.IsNaN(float64(ds[2*b+1])) {
					t.Errorf("block %d: s = %g, want d*sum(q) = %g", b, ds[2*b+1], s)
					bad++
				}
				if bad > 10 {
					t.FailNow()
				}
			}
		})
	}
}

// testMulQ8 runs one case of W x on the integer-dot path and checks it two
// ways. Against MatVecQ8_1Ref over the kernel's own quantized activations
// (read back from the scratch), the same sums in float64: the kernel's
// integer dot products are exact, so the bound is checkProduct's f32
// rounding. Against the float64 product with the f32 activations: rounding
// x to d*q moves each element by at most d/2 (q = round(x/d), |x/d| <=
// 127), so output r moves by at most sum over blocks of d_b/2 * sum_{k in
// b} |W[r][k]|, allowed with a margin of 1e-3 for the rounding of d and of
// x/d, plus the f32 bound.
func testMulQ8(t *testing.T, g *rig, typ gguf.GGMLType, m mulCase) {
	t.Helper()
	defer func(parent *testing.T) { g.t = parent }(g.t)
	g.t = t
	w := randomWeights(g.r, typ, m.rows, m.cols)
	x := randomVector(g.r, m.n*m.cols)
	wf := dequantizeAll(t, typ, w, m.rows, m.cols)
	want, mag := refProduct(wf, m.rows, m.cols, x, m.n)
	wt := g.upWeight(typ, w, m.rows, m.cols, m.lead)
	xr := g.upF32(append(make([]float32, m.xyLead/4), x...)).Sub(uint64(m.xyLead), uint64(4*len(x)))
	var y0 []float32
	if m.acc {
		y0 = randomVector(g.r, m.n*m.rows)
	}
	y, guard := g.guardedOut(m.xyLead, y0, m.n, m.rows)
	defer g.checkUntouched(fmt.Sprintf("MatVec(%v, %v) on Q8_1: the columns after y", typ, m), guard)
	sr := g.setScratch(m.cols, m.n)
	quantizes := 0
	g.run(func(c *vk.Cmd) error {
		if !m.acc {
			c.Fill(y, NaNBits)
		}
		before := c.Dispatches()
		err := g.k.mulMat(c, wt, xr, m.n, y, mulOpts{maxRange: m.maxRange, slow: m.slow, acc: m.acc})
		quantizes = c.Dispatches() - before
		return err
	})
	rows := m.rows
	if quantizes < 2 {
		t.Fatalf("MulMat recorded %d dispatches, want the quantization and the matvec", quantizes)
	}
	got := g.downF32(y, m.n*m.rows)
	q, ds := g.downQ8(sr, m.cols, m.n)
	ref := make([]float32, m.n*m.rows)
	if err := MatVecQ8_1Ref(typ, w, m.rows, m.cols, q, ds, m.n, ref); err != nil {
		t.Fatal(err)
	}
	qwant := make([]float64, len(ref))
	qmag := make([]float64, len(ref))
	bound := make([]float64, len(ref))
	nb := m.cols / 32
	for c := range m.n {
		for r := range rows {
			i := c*rows + r
			qwant[i] = float64(ref[i])
			var b float64
			for blk := range nb {
				d := float64(ds[2*(c*nb+blk)])
				var sw float64
				for k := 32 * blk; k < 32*blk+32; k++ {
					p := math.Abs(float64(wf[r*m.cols+k]))
					sw += p
					qmag[i] += p * d * math.Abs(float64(q[c*m.cols+k]))
				}
				b += d / 2 * sw
			}
			bound[i] = b*(1+1e-3) + relTol*mag[i]
			if m.acc {
				qwant[i] += float64(y0[i])
				qmag[i] += math.Abs(float64(y0[i]))
				want[i] += float64(y0[i])
				bound[i] += relTol * math.Abs(float64(y0[i]))
			}
		}
	}
	name := fmt.Sprintf("MatVec(%v, %v) on Q8_1", typ, m)
	checkProduct(t, name, got, qwant, qmag, rows)
	bad := 0
	for i, v := range got {
		if d := math.Abs(float64(v) - want[i]); !(d <= bound[i]) {
			if bad < 5 {
				t.Errorf("%s: y[col %d][row %d] = %g, want %g within the activation rounding %.3g (|diff| %.3g)", name, i/rows, i%rows, v, want[i], bound[i], d)
			}
			bad++
		}
	}
}

// TestMatVecIntDot runs the integer-dot matvec over matvecCases (rows
// that do not fill a workgroup, 1..19 columns, several passes, MulMatAdd,
// bindings in windows, scalar loads) for every format that has the path,
// with the GPU layout (up to 32 invocations per row) and the CPU one (one
// per row).
func TestMatVecIntDot(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := idotRig(t)
	for _, typ := range idotTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cases := append(matvecCases(typ), mulCase{rows: 300, cols: testCols(typ), n: 4})
			matvecLayouts(t, g, func(t *testing.T) {
				for i, m := range cases {
					if sampled(idotTypes, typ, i) && g.layoutSampled(idotTypes, typ, i) {
						t.Run(m.String(), func(t *testing.T) { testMulQ8(t, g, typ, m) })
					}
				}
			})
		})
	}
}

func hasIntDotS16(t gguf.GGMLType) bool {
	names, ok := idotKernels(t)
	return ok && names.plain16 != ""
}

// TestMatVecIntDotGPU runs the GPU layout's integer-dot variants over
// gpuCases: 1, 2 and 4 rows per group of invocations, the 16- and 8-bit
// storage views where the type has them, subgroup (at the required
// subgroup size where the device has subgroup size control) and
// shared-memory reductions.
func TestMatVecIntDotGPU(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := idotRig(t)
	for _, typ := range idotTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cases := gpuCases(typ)
			gpuVariants(t, g, typ, hasIntDotS16, func(t *testing.T, gv gpuVariant) {
				for i, m := range cases {
					if gpuCaseSampled(idotTypes, typ, i, gv) {
						t.Run(m.String(), func(t *testing.T) { testMulQ8(t, g, typ, m) })
					}
				}
			})
		})
	}
}

// TestMatVecIntDotReuse records products the way the engine's graph does:
// two of the same activations with the barrier skipped (the second reuses
// the quantization: one dispatch, no barrier), one after x changed (a new
// quantization behind the barrier), and one of other activations with the
// barrier skipped while the scratch is still being read (the kernels put
// the barrier back). The validation layer's synchronization checks catch a
// missing barrier; the results catch a wrong reuse.
func TestMatVecIntDotReuse(t *testing.T) {
	g := idotRig(t)
	const rows, cols, n = 40, 256, 3
	typ := gguf.TypeQ4_K
	w1, w2 := randomWeights(g.r, typ, rows, cols), randomWeights(g.r, typ, rows, cols)
	wt1, wt2 := g.upWeight(typ, w1, rows, cols, 0), g.upWeight(typ, w2, rows, cols, 0)
	x, x2, xb := randomVector(g.r, n*cols), randomVector(g.r, n*cols), randomVector(g.r, n*cols)
	xr, x2r, xbr := g.upF32(x), g.upF32(x2), g.upF32(xb)
	g.setScratch(cols, n)
	ys := make([]vk.Range, 4)
	for i := range ys {
		ys[i] = g.buf(4 * n * rows)
	}
	var got [4]int
	g.run(func(c *vk.Cmd) error {
		d := c.Dispatches()
		step := func(i int, w Weight, x vk.Range) error {
			err := g.k.MulMat(c, w, x, n, ys[i])
			got[i], d = c.Dispatches()-d, c.Dispatches()
			return err
		}
		if err := step(0, wt1, xr); err != nil {
			return err
		}
		c.NoBarrier()
		e := c.Epoch()
		if err := step(1, wt2, xr); err != nil {
			return err
		}
		if c.Epoch() != e {
			t.Errorf("the reused quantization's product recorded a barrier")
		}
		c.Copy(xr, xbr) // x changes: the graph would not skip the barrier
		if err := step(2, wt1, xr); err != nil {
			return err
		}
		c.NoBarrier()
		return step(3, wt2, x2r)
	})
	if want := [4]int{2, 1, 2, 2}; got != want {
		t.Errorf("dispatches per product = %v, want %v (quantize + matvec, then a reuse)", got, want)
	}
	for i, tc := range []struct {
		w []byte
		x []float32
	}{{w1, x}, {w2, x}, {w1, xb}, {w2, x2}} {
		want, mag := refProduct(dequantizeAll(t, typ, tc.w, rows, cols), rows, cols, tc.x, n)
		// The activation rounding bound of testMulQ8, loosely: 2% of
		// sum |w x| is far above it for random data and far below a
		// wrong activation.
		for j := range mag {
			mag[j] *= 0.02 / relTol
		}
		checkProduct(t, fmt.Sprintf("product %d", i), g.downF32(ys[i], n*rows), want, mag, rows)
	}
}
