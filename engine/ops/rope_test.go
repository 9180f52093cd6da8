package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestRoPE(t *testing.T) {
	g := newRig(t)
	cases := []RoPEParams{
		{Rows: 1, Heads: 1, HeadDim: 2, FreqBase: 10000},
		{Rows: 5, Heads: 3, HeadDim: 64, FreqBase: 10000},
		{Rows: 7, Heads: 4, HeadDim: 64, FreqBase: 10000, NeoX: true},
		{Rows: 3, Heads: 2, HeadDim: 80, RotDims: 32, FreqBase: 10000, NeoX: true}, // partial (Phi-2 style)
		{Rows: 3, Heads: 2, HeadDim: 96, RotDims: 64, FreqBase: 10000},
		{Rows: 4, Heads: 5, HeadDim: 128, FreqBase: 500000, FreqScale: 0.25},
		// LongRoPE's magnitude factor on a partial NeoX rotation (Phi-3).
		{Rows: 3, Heads: 3, HeadDim: 32, RotDims: 24, FreqBase: 10000, NeoX: true, AttnFactor: 1.19},
		// YaRN: the ramp between dimension pairs 5 and 20 of 32.
		{Rows: 4, Heads: 2, HeadDim: 64, FreqBase: 10000, FreqScale: 0.25, ExtFactor: 1, CorrDims: [2]float32{5, 20}},
		{Rows: 3, Heads: 2, HeadDim: 64, FreqBase: 1e6, FreqScale: 0.125, NeoX: true, ExtFactor: 0.5, AttnFactor: 1.1, CorrDims: [2]float32{0, 31}},
	}
	for _, p := range cases {
		for _, withFactors := range []bool{false, true} {
			t.Run(fmt.Sprintf("%+v/factors=%v", p, withFactors), func(t *testing.T) {
				n := p.Rows * p.Heads * p.HeadDim
				x := g.randn(n, 1)
				pos := make([]int32, p.Rows)
				for i := range pos {
					pos[i] = int32(g.r.IntN(300))
				}
				pos[0] = 0
				rot := p.RotDims
				if rot == 0 {
					rot = p.HeadDim
				}
				var factors []float32
				fr := vk.Range{}
				if withFactors {
					factors = make([]float32, rot/2)
					for i := range factors {
						factors[i] = 1 + 7*g.r.Float32()
					}
					fr = g.upF32(factors)
				}
				src, pr, dst := g.upF32(x), g.upI32(pos), g.buf(4*n)
				g.run(func(c *vk.Cmd) error { return g.k.RoPE(c, dst, src, pr, fr, p) })
				want := make([]float32, n)
				if err := RefRoPE(want, x, pos, factors, p); err != nil {
					t.Fatal(err)
				}
				// f32 sin/cos of angles up to ~300 rad: absolute error ~1e-5.
				closeTo(t, "RoPE", g.downF32(dst, n), want, 5e-5)
			})
		}
	}
}

// TestRoPEInPlace checks that dst may alias src.
func TestRoPEInPlace(t *testing.T) {
	g := newRig(t)
	p := RoPEParams{Rows: 3, Heads: 2, HeadDim: 16, FreqBase: 10000, NeoX: true}
	x := g.randn(3*2*16, 1)
	pos := []int32{5, 0, 17}
	xr, pr := g.upF32(x), g.upI32(pos)
	g.run(func(c *vk.Cmd) error { return g.k.RoPE(c, xr, xr, pr, vk.Range{}, p) })
	want := make([]float32, len(x))
	RefRoPE(want, x, pos, nil, p)
	closeTo(t, "RoPE in place", g.downF32(xr, len(x)), want, 1e-5)
}
