package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// fusedCase is one shape of the fused matvecs: the parts' rows (q, k, v;
// or F twice for the GLUs), the row length and the activation columns.
type fusedCase struct {
	rows          [3]int
	cols, n, lead int
}

func (m fusedCase) String() string {
	s := fmt.Sprintf("%dx%dx%dx%d_n%d", m.rows[0], m.rows[1], m.rows[2], m.cols, m.n)
	if m.lead != 0 {
		s += fmt.Sprintf("_lead%d", m.lead)
	}
	return s
}

// matvecLayouts runs f under the device's matvec layout and the other one
// (one invocation per row with several rows each on CPU devices, or the
// GPU's invocations per row), with shared-memory and subgroup reductions.
// CPU devices compute several rows per invocation, how many depending on
// the thread count: 2 here, so the cases cover 2, 4, 8 and 16 on any
// machine.
func matvecLayouts(t *testing.T, g *rig, f func(t *testing.T)) {
	both(t, g, func(t *testing.T) {
		defer func(cap uint32, rows bool, threads int) {
			g.k.rowThreads, g.k.cpuRows, g.k.cpuThreads = cap, rows, threads
		}(g.k.rowThreads, g.k.cpuRows, g.k.cpuThreads)
		g.k.cpuThreads = 2
		for _, cap := range []uint32{g.k.rowThreads, matvecWG + cpuRowThreads - g.k.rowThreads} {
			g.k.rowThreads, g.k.cpuRows = cap, cap == cpuRowThreads
			t.Run(fmt.Sprintf("tpr%d", cap), f)
		}
	})
}

func TestMatVecSplit(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			cases := []fusedCase{
				{rows: [3]int{8, 4, 4}, cols: cols, n: 1},
				{rows: [3]int{37, 11, 13}, cols: cols, n: 3, lead: 2},
				{rows: [3]int{64, 32, 32}, cols: vecCols(typ), n: 8},
				{rows: [3]int{300, 100, 100}, cols: cols, n: 2},
				{rows: [3]int{260, 70, 70}, cols: cols, n: 5},
				{rows: [3]int{9, 5, 7}, cols: cols, n: 19}, // two passes on CPU devices
			}
			matvecLayouts(t, g, func(t *testing.T) {
				for i, m := range cases {
					for b, withBias := range []bool{false, true} {
						if !sampled(weightTypes, typ, 2*i+b) || !g.layoutSampled(weightTypes, typ, 2*i+b) {
							continue
						}
						name := m.String()
						if withBias {
							name += "_bias"
						}
						t.Run(name, func(t *testing.T) { testSplit(t, g, typ, m, withBias) })
					}
				}
			})
		})
	}
}

// testSplit runs one MatVecSplit case against the float64 products of the
// dequantized parts, plus their biases.
func testSplit(t *testing.T, g *rig, typ gguf.GGMLType, m fusedCase, withBias bool) {
	defer func(parent *testing.T) { g.t = parent }(g.t)
	g.t = t
	M := m.rows[0] + m.rows[1] + m.rows[2]
	w := randomWeights(g.r, typ, M, m.cols)
	x := randomVector(g.r, m.n*m.cols)
	wt := g.upWeight(typ, w, M, m.cols, m.lead)
	if !g.k.CanFuse(wt, m.n) {
		t.Fatalf("CanFuse(%v %dx%d, %d) = false, want true", typ, M, m.cols, m.n)
	}
	wf := dequantizeAll(t, typ, w, M, m.cols)
	var bias []float32
	var br vk.Range
	if withBias {
		bias = randomVector(g.r, M)
		br = g.upF32(bias)
	}
	var y, guard [3]vk.Range
	for i, r := range m.rows {
		y[i], guard[i] = g.guardedBuf(m.n, r)
	}
	g.run(func(c *vk.Cmd) error { return g.k.MatVecSplit(c, wt, g.upF32(x), m.n, m.rows, y, br) })
	r0 := 0
	for i, r := range m.rows {
		want, mag := refProduct(wf[r0*m.cols:(r0+r)*m.cols], r, m.cols, x, m.n)
		if withBias {
			addBias(want, mag, bias[r0:r0+r])
		}
		checkProduct(t, fmt.Sprintf("MatVecSplit(%v, %v) part %d", typ, m, i), g.downF32(y[i], m.n*r), want, mag, r)
		g.checkUntouched(fmt.Sprintf("MatVecSplit(%v, %v) part %d: the columns after it", typ, m, i), guard[i])
		r0 += r
	}
}

func TestMatVecGLU(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			cases := []fusedCase{
				{rows: [3]int{16}, cols: cols, n: 1},
				{rows: [3]int{37}, cols: cols, n: 3, lead: 2},
				{rows: [3]int{64}, cols: vecCols(typ), n: 8},
				{rows: [3]int{300}, cols: cols, n: 1},
				{rows: [3]int{700}, cols: cols, n: 4},
				{rows: [3]int{260}, cols: cols, n: 5},
				{rows: [3]int{11}, cols: cols, n: 19},
			}
			matvecLayouts(t, g, func(t *testing.T) {
				for i, m := range cases {
					for e, gelu := range []bool{false, true} {
						if !sampled(weightTypes, typ, 2*i+e) || !g.layoutSampled(weightTypes, typ, 2*i+e) {
							continue
						}
						name := m.String() + "_swiglu"
						if gelu {
							name = m.String() + "_geglu"
						}
						t.Run(name, func(t *testing.T) { testGLU(t, g, typ, m, gelu) })
					}
				}
			})
		})
	}
}

// testGLU runs one MatVecGLU case against RefSwiGLU / RefGeGLU of the
// float64 gate and up products. The tolerance follows the products':
// d(act(g) u) is |act'(g) u| dg + |act(g)| du.
func testGLU(t *testing.T, g *rig, typ gguf.GGMLType, m fusedCase, gelu bool) {
	defer func(parent *testing.T) { g.t = parent }(g.t)
	g.t = t
	F := m.rows[0]
	w := randomWeights(g.r, typ, 2*F, m.cols)
	x := randomVector(g.r, m.n*m.cols)
	wt := g.upWeight(typ, w, 2*F, m.cols, m.lead)
	wf := dequantizeAll(t, typ, w, 2*F, m.cols)
	gate, gmag := refProduct(wf[:F*m.cols], F, m.cols, x, m.n)
	up, umag := refProduct(wf[F*m.cols:], F, m.cols, x, m.n)
	y, guard := g.guardedBuf(m.n, F)
	g.run(func(c *vk.Cmd) error { return g.k.MatVecGLU(c, wt, g.upF32(x), m.n, y, gelu) })
	checkGLU(t, fmt.Sprintf("MatVecGLU(%v, %v, gelu %v)", typ, m, gelu), g.downF32(y, m.n*F), gate, up, gmag, umag, F, gelu)
	g.checkUntouched(fmt.Sprintf("MatVecGLU(%v, %v): the columns after y", typ, m), guard)
}

// addBias adds a part's bias (one value per row) to the columns of its
// expected product want, and its magnitude to mag.
func addBias(want, mag []float64, bias []float32) {
	for j := range want {
		want[j] += float64(bias[j%len(bias)])
		mag[j] += math.Abs(float64(bias[j%len(bias)]))
	}
}

// checkGLU checks got, the columns of F rows of a GLU epilogue, against
// RefSwiGLU or RefGeGLU of the gate and up products, with the tolerance
// their magnitudes gmag and umag give: d(act(g) u) is |act'(g) u| dg +
// |act(g)| du.
func checkGLU(t *testing.T, name string, got []float32, gate, up, gmag, umag []float64, F int, gelu bool) {
	t.Helper()
	gf, uf := make([]float32, len(gate)), make([]float32, len(up))
	for i := range gate {
		gf[i], uf[i] = float32(gate[i]), float32(up[i])
	}
	want := make([]float32, len(gate))
	if gelu {
		RefGeGLU(want, gf, uf)
	} else {
		RefSwiGLU(want, gf, uf)
	}
	bad := 0
	for i, v := range got {
		// act' is at most about 1.13 (GELU) and 1.1 (SiLU); act(g) at
		// most |g| + 0.2.
		tol := 1.2*math.Abs(up[i])*relTol*gmag[i] + (math.Abs(gate[i])+0.2)*relTol*umag[i] + 1e-6*math.Abs(float64(want[i])) + 1e-30
		if d := math.Abs(float64(v) - float64(want[i])); math.IsNaN(float64(v)) || d > tol {
			if bad < 5 {
				t.Errorf("%s: y[col %d][row %d] = %g, want %g (|diff| %.3g > %.3g)", name, i/F, i%F, v, want[i], d, tol)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d outputs wrong", name, bad, len(got))
	}
}

// TestFusedErrors checks that the fused matvecs refuse what they cannot
// do, with errors rather than wrong results.
func TestFusedErrors(t *testing.T) {
	g := newRig(t)
	typ := weightTypes[0]
	cols := testCols(typ)
	w := randomWeights(g.r, typ, 12, cols)
	wt := g.upWeight(typ, w, 12, cols, 0)
	x := g.upF32(randomVector(g.r, cols))
	y := g.buf(4 * 12)
	parts := [3]vk.Range{y.Buf.Range(0, 16), y.Buf.Range(16, 16), y.Buf.Range(32, 16)}
	cases := []struct {
		name string
		f    func(c *vk.Cmd) error
	}{
		{"rows do not add up", func(c *vk.Cmd) error {
			return g.k.MatVecSplit(c, wt, x, 1, [3]int{4, 4, 3}, parts, vk.Range{})
		}},
		{"short output", func(c *vk.Cmd) error {
			return g.k.MatVecSplit(c, wt, x, 1, [3]int{4, 4, 4}, [3]vk.Range{parts[0], parts[1], parts[2].Sub(0, 12)}, vk.Range{})
		}},
		{"short bias", func(c *vk.Cmd) error {
			return g.k.MatVecSplit(c, wt, x, 1, [3]int{4, 4, 4}, parts, g.buf(8))
		}},
		{"odd GLU rows", func(c *vk.Cmd) error {
			w := wt
			w.Rows = 11
			return g.k.MatVecGLU(c, w, x, 1, y, false)
		}},
		{"too many columns", func(c *vk.Cmd) error {
			return g.k.MatVecGLU(c, wt, x, g.k.matvecCols+1, y, false)
		}},
	}
	c, err := g.k.dev.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	for _, tc := range cases {
		if err := tc.f(c); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestRoPEKV(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	// Pages of 4 positions; slot 1's second page is unmapped, so its row
	// at position 4 is skipped (as KVWrite skips it), and q still turns.
	table := []int32{5, 0, 7, 2, -1, 3, 6, 1, 4}
	slot := []int32{0, 2, 1, 1, 0}
	pos := []int32{0, 7, 4, 3, 5}
	rows := len(slot)
	for _, tc := range []struct {
		name                    string
		heads, kvHeads, headDim int
		rope                    RoPEParams
		factors                 bool
	}{
		{name: "norm", heads: 4, kvHeads: 2, headDim: 32, rope: RoPEParams{FreqBase: 10000}},
		{name: "neox", heads: 4, kvHeads: 1, headDim: 64, rope: RoPEParams{NeoX: true, FreqBase: 500000}},
		{name: "neox_partial_factors", heads: 2, kvHeads: 2, headDim: 64, rope: RoPEParams{NeoX: true, RotDims: 32, FreqBase: 10000, FreqScale: 0.5}, factors: true},
		{name: "norm_yarn", heads: 6, kvHeads: 3, headDim: 32, rope: RoPEParams{FreqBase: 10000, FreqScale: 0.25, ExtFactor: 1, CorrDims: [2]float32{2, 12}, AttnFactor: 1.1}},
	} {
		for _, kt := range KVTypes {
			for _, vt := range KVTypes {
				t.Run(fmt.Sprintf("%s_%v_%v", tc.name, kt, vt), func(t *testing.T) {
					defer func(parent *testing.T) { g.t = parent }(g.t)
					g.t = t
					kvDim := tc.kvHeads * tc.headDim
					p := RoPEKVParams{Rope: tc.rope, KVHeads: tc.kvHeads,
						K: KVParams{Slots: 3, NCtx: 9, KVDim: kvDim, Pages: 8, PageSize: 4, Type: kt}}
					p.Rope.Rows, p.Rope.Heads, p.Rope.HeadDim = rows, tc.heads, tc.headDim
					p.V = p.K
					p.V.Type = vt
					q := g.randn(rows*tc.heads*tc.headDim, 1)
					k := g.randn(rows*kvDim, 1)
					v := g.randn(rows*kvDim, 1)
					var factors []float32
					fr := vk.Range{}
					if tc.factors {
						factors = make([]float32, tc.headDim/4)
						for i := range factors {
							factors[i] = 1 + float32(i)/4
						}
						fr = g.upF32(factors)
					}
					kInit := make([]uint16, p.K.PoolBytes()/2)
					vInit := make([]uint16, p.V.PoolBytes()/2)
					qr, kc, vc := g.upF32(q), g.upF16(kInit), g.upF16(vInit)
					g.run(func(c *vk.Cmd) error {
						return g.k.RoPEKV(c, qr, g.upF32(k), g.upF32(v), g.upI32(pos), g.upI32(slot), g.upI32(table), fr, kc, vc, p)
					})
					wantQ := append([]float32(nil), q...)
					wantK, wantV := append([]uint16(nil), kInit...), append([]uint16(nil), vInit...)
					if err := RefRoPEKV(wantQ, k, v, pos, slot, table, factors, wantK, wantV, p); err != nil {
						t.Fatal(err)
					}
					for i, x := range g.downF32(qr, len(q)) {
						if d := math.Abs(float64(x - wantQ[i])); !(d <= 2e-5*(1+math.Abs(float64(wantQ[i])))) {
							t.Fatalf("RoPEKV q[%d] = %g, want %g", i, x, wantQ[i])
						}
					}
					checkKV(t, "K", g.downF16(kc, len(kInit)), wantK, kt, kvDim)
					checkKV(t, "V", g.downF16(vc, len(vInit)), wantV, vt, kvDim)
				})
			}
		}
	}
}

// checkKV compares a KV pool with the reference's. The GPU's rotated
// values differ from the float64 reference's in the last bits, which can
// move a value across a rounding edge of f16 or of the block types: every
// value must lie within one quantization step (an f16 ulp, or the block's
// scale), and nearly all halfwords must match exactly.
func checkKV(t *testing.T, what string, got, want []uint16, typ KVType, kvDim int) {
	t.Helper()
	same := 0
	for i := range got {
		if got[i] == want[i] {
			same++
		}
	}
	if same < len(got)*95/100 {
		t.Errorf("RoPEKV %s pool (%v): %d of %d halfwords match the reference, want 95%%", what, typ, same, len(got))
	}
	gv, wv := DequantizeKV(got, typ, kvDim), DequantizeKV(want, typ, kvDim)
	step := map[KVType]float64{KVF16: 1e-3, KVQ8_0: 5 / 127.0, KVQ4_0: 5 / 8.0}[typ]
	for i := range gv {
		if d := math.Abs(float64(gv[i] - wv[i])); !(d <= step*math.Max(1, math.Abs(float64(wv[i])))) {
			t.Fatalf("RoPEKV %s pool (%v) element %d = %g, want %g", what, typ, i, gv[i], wv[i])
		}
	}
}
