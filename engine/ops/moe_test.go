package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// moeShapes are the routing cases of the MoE kernel tests: expert counts
// 8, 32 and 128, 1 to 8 used, 1 to 64 rows.
var moeShapes = []MoEShape{
	{Rows: 1, Experts: 8, Used: 2, Gating: GatingSoftmax, Norm: true},
	{Rows: 7, Experts: 8, Used: 1, Gating: GatingSoftmax},
	{Rows: 16, Experts: 32, Used: 4, Gating: GatingSoftmaxWeight},
	{Rows: 17, Experts: 128, Used: 8, Gating: GatingSoftmax, Norm: true},
	{Rows: 64, Experts: 8, Used: 8, Gating: GatingSoftmaxWeight},
	{Rows: 64, Experts: 32, Used: 2, Gating: GatingSoftmax, Norm: true},
}

func TestMoERoute(t *testing.T) {
	g := newRig(t)
	for _, s := range moeShapes {
		t.Run(fmt.Sprintf("%dx%d_k%d_g%d", s.Rows, s.Experts, s.Used, s.Gating), func(t *testing.T) {
			logits := g.randn(s.Rows*s.Experts, 2)
			lr, sr, wr, rr := g.upF32(logits), g.buf(4*s.Pairs()), g.buf(4*s.Pairs()), g.buf(4*s.RoutesLen())
			g.run(func(c *vk.Cmd) error { return g.k.MoERoute(c, lr, s, sr, wr, rr) })
			sel, w := make([]int32, s.Pairs()), make([]float32, s.Pairs())
			if err := RefMoERoute(logits, s, sel, w); err != nil {
				t.Fatal(err)
			}
			got := g.downU32(sr, s.Pairs())
			for i := range sel {
				if got[i] != uint32(sel[i]) {
					t.Fatalf("pair %d: expert %d, want %d (row %v)", i, got[i], sel[i], logits[i/s.Used*s.Experts:(i/s.Used+1)*s.Experts])
				}
			}
			closeTo(t, "weights", g.downF32(wr, s.Pairs()), w, 1e-5)
			closeTo(t, "reference weights", w, routeWeights(logits, s, sel), 1e-6)
			for r := range s.Rows {
				var sum float64
				for _, v := range w[r*s.Used : (r+1)*s.Used] {
					sum += float64(v)
				}
				if normed := s.Gating == GatingSoftmaxWeight || s.Norm; normed && (sum < 0.9999 || sum > 1.0001) {
					t.Errorf("row %d: weights sum to %g, want 1", r, sum)
				}
			}
			want, err := RefMoEGroup(sel, s)
			if err != nil {
				t.Fatal(err)
			}
			routes := g.downU32(rr, s.RoutesLen())
			unused := 0
			for e := range s.Experts {
				if routes[e] != want[e] {
					t.Fatalf("expert %d: %d pairs, want %d", e, routes[e], want[e])
				}
				if want[e] == 0 {
					unused++
				}
				base := s.Experts + e*s.Rows
				for i := range int(want[e]) {
					if routes[base+i] != want[base+i] {
						t.Fatalf("expert %d pair %d: %d, want %d", e, i, routes[base+i], want[base+i])
					}
				}
			}
			// The ranks and the active list (entries past it are not
			// written): the active experts are the used ones, ascending.
			act, n := s.actOff(), s.Experts-unused
			if end := s.actList() + n; !slices.Equal(routes[act:end], want[act:end]) {
				t.Fatalf("ranks and active list %v, want %v", routes[act:end], want[act:end])
			}
			if got := int(routes[act+s.Experts]); got != n || !slices.IsSorted(routes[s.actList():s.actList()+n]) {
				t.Fatalf("%d active experts %v, want the %d used ones ascending", got, routes[s.actList():s.actList()+n], n)
			}
			t.Logf("%d of %d experts unused", unused, s.Experts)
		})
	}
}

// routeWeights computes the weights of the picked experts sel from the
// definition, independently of RefMoERoute: p = softmax over every
// expert's logit; the weight of a picked expert is its p, divided by the
// sum of the picked ones' where the gating normalises (a softmax over the
// picked logits equals that).
func routeWeights(logits []float32, s MoEShape, sel []int32) []float32 {
	out := make([]float32, s.Pairs())
	for r := range s.Rows {
		row := logits[r*s.Experts : (r+1)*s.Experts]
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v))
		}
		var picked float64
		for j := range s.Used {
			picked += math.Exp(float64(row[sel[r*s.Used+j]])) / z
		}
		for j := range s.Used {
			p := math.Exp(float64(row[sel[r*s.Used+j]])) / z
			if s.Gating == GatingSoftmaxWeight || s.Norm {
				p /= picked
			}
			out[r*s.Used+j] = float32(p)
		}
	}
	return out
}

// randomRoutes returns each row's Used distinct experts, drawn from the
// first half of the experts only (so some experts are unused and others
// shared by many rows).
func randomRoutes(rng *rand.Rand, s MoEShape) []int32 {
	sel := make([]int32, s.Pairs())
	pool := max(s.Used, s.Experts/2)
	for r := range s.Rows {
		perm := rng.Perm(pool)
		for j := range s.Used {
			sel[r*s.Used+j] = int32(perm[j])
		}
	}
	return sel
}

func TestMatVecID(t *testing.T) {
	g := newRig(t)
	t.Parallel()
	type tc struct {
		typ  gguf.GGMLType
		s    MoEShape
		rows int
		bias bool
	}
	var cases []tc
	// Every format on one shape; the shapes on two formats.
	for _, typ := range weightTypes {
		cases = append(cases, tc{typ, MoEShape{Rows: 5, Experts: 8, Used: 2}, 24, false})
	}
	for _, s := range moeShapes {
		for _, typ := range []gguf.GGMLType{gguf.TypeQ8_0, gguf.TypeF32} {
			cases = append(cases, tc{typ, s, 40, s.Rows%2 == 0})
		}
	}
	for i, c := range cases {
		cols := testCols(c.typ)
		if c.typ == gguf.TypeF32 {
			cols = 68
		}
		for _, perPair := range []bool{false, true} {
			name := fmt.Sprintf("%v_%dx%d_k%d_%dx%d_pair%v", c.typ, c.s.Rows, c.s.Experts, c.s.Used, c.rows, cols, perPair)
			bothIDPaths(t, g, i, func(t *testing.T) {
				t.Run(name, func(t *testing.T) { g.checkMatVecID(t, c.typ, c.s, c.rows, cols, perPair, c.bias) })
			})
		}
	}
}

func (g0 *rig) checkMatVecID(t *testing.T, typ gguf.GGMLType, s MoEShape, rows, cols int, perPair, withBias bool) {
	g := *g0
	g.t = t
	wb := randomWeights(g.r, typ, s.Experts*rows, cols)
	wf := dequantizeAll(t, typ, wb, s.Experts*rows, cols)
	w := g.upWeight(typ, wb, rows, cols, 0)
	sel := randomRoutes(g.r, s)
	routes, err := RefMoEGroup(sel, s)
	if err != nil {
		t.Fatal(err)
	}
	xDiv, xCols := s.Used, s.Rows
	if perPair {
		xDiv, xCols = 1, s.Pairs()
	}
	x := randomVector(g.r, xCols*cols)
	var bias []float32
	var br vk.Range
	if withBias {
		bias = randomVector(g.r, s.Experts*rows)
		br = g.upF32(bias)
	}
	rr := g.upI32(u32sToI32(routes))
	y := g.buf(4 * s.Pairs() * rows)
	g.run(func(c *vk.Cmd) error { return g.k.MatVecID(c, w, s, g.upF32(x), xDiv, rr, br, y) })
	want := make([]float32, s.Pairs()*rows)
	if err := RefMatVecID(wf, rows, cols, s, sel, x, xDiv, bias, want); err != nil {
		t.Fatal(err)
	}
	// The error bound of each output: the pair's product magnitude.
	mag := make([]float64, len(want))
	wantD := make([]float64, len(want))
	for p := range s.Pairs() {
		e, xc := int(sel[p]), p/xDiv
		_, m := refProduct(wf[e*rows*cols:(e+1)*rows*cols], rows, cols, x[xc*cols:(xc+1)*cols], 1)
		for r := range rows {
			mag[p*rows+r] = m[r] + 1e-3
			wantD[p*rows+r] = float64(want[p*rows+r])
		}
	}
	checkProduct(t, "MatVecID", g.downF32(y, len(want)), wantD, mag, rows)
}

func u32sToI32(x []uint32) []int32 {
	out := make([]int32, len(x))
	for i, v := range x {
		out[i] = int32(v)
	}
	return out
}

func TestMoESum(t *testing.T) {
	g := newRig(t)
	for _, s := range moeShapes[:3] {
		for _, acc := range []bool{false, true} {
			n := 37
			x, w := g.randn(s.Pairs()*n, 1), g.randn(s.Pairs(), 0.5)
			y0 := g.randn(s.Rows*n, 1)
			yr := g.upF32(y0)
			g.run(func(c *vk.Cmd) error { return g.k.MoESum(c, g.upF32(x), g.upF32(w), s, n, yr, acc) })
			want := append([]float32(nil), y0...)
			RefMoESum(x, w, s, n, want, acc)
			closeTo(t, fmt.Sprintf("MoESum %d rows acc %v", s.Rows, acc), g.downF32(yr, s.Rows*n), want, 1e-5)
		}
	}
}

func TestSwiGLUOAI(t *testing.T) {
	g := newRig(t)
	n := 1000
	gate, up := g.randn(n, 6), g.randn(n, 6) // many past the clamps at ±7
	gate[0], up[0], gate[1], up[1] = 60, -60, -60, 60
	gr, ur, dr := g.upF32(gate), g.upF32(up), g.buf(4*n)
	g.run(func(c *vk.Cmd) error { return g.k.SwiGLUOAI(c, dr, gr, ur, n) })
	want := make([]float32, n)
	RefSwiGLUOAI(want, gate, up)
	in := make([]float32, n)
	for i := range in {
		in[i] = min(gate[i], 7) * 8
	}
	closeToInput(t, "SwiGLUOAI", g.downF32(dr, n), want, in, 1e-5)
	// Independent values: the clamps and the formula at a few points.
	for i, c := range []struct{ g, u, want float64 }{{60, -60, -6 * 7 / (1 + 1.5e-6)}, {-60, 60, 0}} {
		if d := float64(want[i]) - c.want; d > 1e-3 || d < -1e-3 {
			t.Errorf("RefSwiGLUOAI(%g, %g) = %g, want %g", c.g, c.u, want[i], c.want)
		}
	}
}

func TestMatVecIDGLU(t *testing.T) {
	g := newRig(t)
	t.Parallel()
	type tc struct {
		typ       gguf.GGMLType
		s         MoEShape
		rows      int
		bias, oai bool
	}
	var cases []tc
	for i, typ := range weightTypes {
		cases = append(cases, tc{typ, MoEShape{Rows: 3, Experts: 8, Used: 2}, 24, i%2 == 0, i%3 == 0})
	}
	for i, s := range moeShapes {
		cases = append(cases, tc{gguf.TypeQ8_0, s, 40, i%2 == 1, i%2 == 0})
	}
	for i, c := range cases {
		cols := testCols(c.typ)
		name := fmt.Sprintf("%v_%dx%d_k%d_%dx%d_bias%v_oai%v", c.typ, c.s.Rows, c.s.Experts, c.s.Used, c.rows, cols, c.bias, c.oai)
		bothIDPaths(t, g, i, func(t *testing.T) {
			t.Run(name, func(t *testing.T) { g.checkMatVecIDGLU(t, c.typ, c.s, c.rows, cols, c.bias, c.oai) })
		})
	}
}

func (g0 *rig) checkMatVecIDGLU(t *testing.T, typ gguf.GGMLType, s MoEShape, rows, cols int, withBias, oai bool) {
	g := *g0
	g.t = t
	gb := randomWeights(g.r, typ, s.Experts*rows, cols)
	ub := randomWeights(g.r, typ, s.Experts*rows, cols)
	gf := dequantizeAll(t, typ, gb, s.Experts*rows, cols)
	uf := dequantizeAll(t, typ, ub, s.Experts*rows, cols)
	// Gate then up in one buffer, as GPUModel uploads fused experts.
	both := g.upWeight(typ, append(append([]byte(nil), gb...), ub...), rows, cols, 0)
	gw, uw := both, both
	gw.Data = both.Data.Buf.Range(both.Data.Offset, uint64(len(gb)))
	uw.Data = both.Data.Buf.Range(both.Data.Offset+uint64(len(gb)), uint64(len(ub)))
	if !g.k.CanFuseExperts(gw, uw, s.Experts) {
		t.Fatal("CanFuseExperts: false for adjacent experts")
	}
	if g.k.CanFuseExperts(uw, gw, s.Experts) {
		t.Fatal("CanFuseExperts: true with up before gate")
	}
	sel := randomRoutes(g.r, s)
	routes, err := RefMoEGroup(sel, s)
	if err != nil {
		t.Fatal(err)
	}
	x := randomVector(g.r, s.Rows*cols)
	var gBias, uBias []float32
	var gbr, ubr vk.Range
	if withBias {
		gBias, uBias = randomVector(g.r, s.Experts*rows), randomVector(g.r, s.Experts*rows)
		gbr, ubr = g.upF32(gBias), g.upF32(uBias)
	}
	y := g.buf(4 * s.Pairs() * rows)
	g.run(func(c *vk.Cmd) error {
		return g.k.MatVecIDGLU(c, gw, uw, s, g.upF32(x), g.upI32(u32sToI32(routes)), gbr, ubr, y, oai)
	})
	gate, up := make([]float32, s.Pairs()*rows), make([]float32, s.Pairs()*rows)
	if err := RefMatVecID(gf, rows, cols, s, sel, x, s.Used, gBias, gate); err != nil {
		t.Fatal(err)
	}
	if err := RefMatVecID(uf, rows, cols, s, sel, x, s.Used, uBias, up); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(gate))
	if oai {
		RefSwiGLUOAI(want, gate, up)
	} else {
		RefSwiGLU(want, gate, up)
	}
	// The error bound: the products' magnitudes through the GLU (|act'| <=
	// 1.1 for SiLU, and the up side's magnitude times the gate's).
	in := make([]float32, len(want))
	for p := range s.Pairs() {
		e, xc := int(sel[p]), p/s.Used
		_, mg := refProduct(gf[e*rows*cols:(e+1)*rows*cols], rows, cols, x[xc*cols:(xc+1)*cols], 1)
		_, mu := refProduct(uf[e*rows*cols:(e+1)*rows*cols], rows, cols, x[xc*cols:(xc+1)*cols], 1)
		for r := range rows {
			i := p*rows + r
			in[i] = float32((mg[r]+1)*(math.Abs(float64(up[i]))+1) + (mu[r]+1)*(math.Abs(float64(gate[i]))+1))
		}
	}
	closeToInput(t, "MatVecIDGLU", g.downF32(y, len(want)), want, in, 2e-4)
}

// bothIDPaths runs f for case i on the expert kernels' paths: the
// storage-buffer variants (shared-memory and subgroup reductions, as
// bothSampled picks them) and, on CPU devices, the _xt variants (uniform
// activations, texel weights).
func bothIDPaths(t *testing.T, g *rig, i int, f func(t *testing.T)) {
	g.k.idStorage = true
	bothSampled(t, g, i, f)
	g.k.idStorage = false
	if g.k.cpuRows && g.k.texel {
		t.Run("xt", f)
	}
}
