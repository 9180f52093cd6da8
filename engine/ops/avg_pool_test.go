package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestAvgPool(t *testing.T) {
	g := newRig(t)
	for _, p := range []PoolParams{
		{H: 16, W: 16, C: 128, K: 4},
		{H: 6, W: 9, C: 5, K: 3},
		{H: 64, W: 64, C: 33, K: 8},
		{H: 3, W: 3, C: 1, K: 1},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d/k%d", p.H, p.W, p.C, p.K), func(t *testing.T) {
			x := g.randn(p.H*p.W*p.C, 1)
			n := p.Tokens() * p.C
			xr, yr := g.upF32(x), g.buf(4*n)
			g.run(func(c *vk.Cmd) error { return g.k.AvgPool(c, yr, xr, p) })
			want := make([]float32, n)
			if err := RefAvgPool(want, x, p); err != nil {
				t.Fatal(err)
			}
			got := g.downF32(yr, n)
			closeTo(t, "AvgPool", got, want, 1e-5)
			// Independently: output token 0, channel 0 is the mean of the
			// top-left K x K square.
			var s float64
			for yy := range p.K {
				for xx := range p.K {
					s += float64(x[(yy*p.W+xx)*p.C])
				}
			}
			closeTo(t, "AvgPool token 0", got[:1], []float32{float32(s / float64(p.K*p.K))}, 1e-5)
		})
	}
}
