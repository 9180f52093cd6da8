package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// TestMatVecFusedIntDot runs MatVecSplit (with and without biases) and
// MatVecGLU (SwiGLU, GeGLU) on the integer-dot path for every format that
// has it, in the GPU layout (up to 32 invocations per row, 1, 2 or 4 rows
// per group) and the CPU one, with shared-memory and subgroup reductions:
// one quantization and one fused dispatch per pass of columns, against
// MatVecQ8_1Ref of the kernel's own Q8_1 activations, split, biased or
// gated on the CPU.
func TestMatVecFusedIntDot(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := idotRig(t)
	for _, typ := range idotTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			splits := []fusedCase{
				{rows: [3]int{8, 4, 4}, cols: cols, n: 1},
				{rows: [3]int{37, 11, 13}, cols: cols, n: 3, lead: 2},
				{rows: [3]int{260, 70, 70}, cols: cols, n: 8},
				{rows: [3]int{9, 5, 7}, cols: cols, n: 11}, // two passes
			}
			glus := []fusedCase{
				{rows: [3]int{16}, cols: cols, n: 1},
				{rows: [3]int{37}, cols: cols, n: 3, lead: 2},
				{rows: [3]int{300}, cols: cols, n: 8},
				{rows: [3]int{11}, cols: cols, n: 11},
			}
			matvecLayouts(t, g, func(t *testing.T) {
				for i, m := range splits {
					for b, withBias := range []bool{false, true} {
						if sampled(idotTypes, typ, 2*i+b) && g.layoutSampled(idotTypes, typ, 2*i+b) {
							t.Run(fmt.Sprintf("split_%v_bias%v", m, withBias), func(t *testing.T) { testFusedQ8(t, g, typ, m, 0, withBias) })
						}
					}
				}
				for i, m := range glus {
					for e, epi := range []uint32{epiSwiGLU, epiGeGLU} {
						// Case 0 of the GLUs too: every type through both
						// epilogues, on both row layouts.
						k := 2*i + e
						if i == 0 {
							k = 0
						}
						if sampled(idotTypes, typ, k) && g.layoutSampled(idotTypes, typ, k) {
							t.Run(fmt.Sprintf("glu%d_%v", epi, m), func(t *testing.T) { testFusedQ8(t, g, typ, m, epi, false) })
						}
					}
				}
			})
		})
	}
}

// testFusedQ8 runs one fused product on the integer-dot path: the split
// (epi 0) of m.rows, or the GLU epi of 2*m.rows[0] rows.
func testFusedQ8(t *testing.T, g *rig, typ gguf.GGMLType, m fusedCase, epi uint32, withBias bool) {
	defer func(parent *testing.T) { g.t = parent }(g.t)
	g.t = t
	glu := epi != 0
	M := m.rows[0] + m.rows[1] + m.rows[2]
	if glu {
		M = 2 * m.rows[0]
	}
	w := randomWeights(g.r, typ, M, m.cols)
	x := randomVector(g.r, m.n*m.cols)
	wt := g.upWeight(typ, w, M, m.cols, m.lead)
	sr := g.setScratch(m.cols, m.n)
	if !g.k.CanFuse(wt, m.n) || !g.k.useQ8(typ, m.cols, m.n, false) {
		t.Fatalf("CanFuse %v, integer-dot path %v; want both", g.k.CanFuse(wt, m.n), g.k.useQ8(typ, m.cols, m.n, false))
	}
	var bias []float32
	var br vk.Range
	if withBias {
		bias = randomVector(g.r, M)
		br = g.upF32(bias)
	}
	var y, guard [3]vk.Range
	outs := m.rows
	if glu {
		outs = [3]int{m.rows[0]}
	}
	for i, r := range outs {
		if r > 0 {
			y[i], guard[i] = g.guardedBuf(m.n, r)
		}
	}
	defer func() {
		for i, r := range outs {
			if r > 0 {
				g.checkUntouched(fmt.Sprintf("fused %v on Q8_1, output %d: the columns after it", m, i), guard[i])
			}
		}
	}()
	dispatches := 0
	g.run(func(c *vk.Cmd) error {
		d := c.Dispatches()
		var err error
		if glu {
			err = g.k.MatVecGLU(c, wt, g.upF32(x), m.n, y[0], epi == epiGeGLU)
		} else {
			err = g.k.MatVecSplit(c, wt, g.upF32(x), m.n, m.rows, y, br)
		}
		dispatches = c.Dispatches() - d
		return err
	})
	passes := (m.n + min(g.k.matvecPass, idotPass) - 1) / min(g.k.matvecPass, idotPass)
	if dispatches != 1+passes {
		t.Errorf("%d dispatches, want the quantization and %d fused", dispatches, passes)
	}
	// The exact product of the kernel's own Q8_1 activations, and the
	// magnitudes its f32 rounding scales with.
	q, ds := g.downQ8(sr, m.cols, m.n)
	ref := make([]float32, m.n*M)
	if err := MatVecQ8_1Ref(typ, w, M, m.cols, q, ds, m.n, ref); err != nil {
		t.Fatal(err)
	}
	wf := dequantizeAll(t, typ, w, M, m.cols)
	nb := m.cols / 32
	mag := make([]float64, m.n*M)
	for c := range m.n {
		for r := range M {
			for k := range m.cols {
				mag[c*M+r] += math.Abs(float64(wf[r*m.cols+k])) * float64(ds[2*(c*nb+k/32)]) * math.Abs(float64(q[c*m.cols+k]))
			}
		}
	}
	if glu {
		F := m.rows[0]
		gate, up := make([]float64, m.n*F), make([]float64, m.n*F)
		gmag, umag := make([]float64, m.n*F), make([]float64, m.n*F)
		for c := range m.n {
			for r := range F {
				gate[c*F+r], up[c*F+r] = float64(ref[c*M+r]), float64(ref[c*M+F+r])
				gmag[c*F+r], umag[c*F+r] = mag[c*M+r], mag[c*M+F+r]
			}
		}
		checkGLU(t, fmt.Sprintf("MatVecGLU(%v, %v) on Q8_1", typ, m), g.downF32(y[0], m.n*F), gate, up, gmag, umag, F, epi == epiGeGLU)
		return
	}
	r0 := 0
	for i, r := range m.rows {
		want, pmag := make([]float64, m.n*r), make([]float64, m.n*r)
		for c := range m.n {
			for j := range r {
				want[c*r+j] = float64(ref[c*M+r0+j])
				pmag[c*r+j] = mag[c*M+r0+j]
			}
		}
		if withBias {
			addBias(want, pmag, bias[r0:r0+r])
		}
		checkProduct(t, fmt.Sprintf("MatVecSplit(%v, %v) on Q8_1, part %d", typ, m, i), g.downF32(y[i], m.n*r), want, pmag, r)
		r0 += r
	}
}
