package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestPixelShuffle(t *testing.T) {
	g := newRig(t)
	for _, p := range []PoolParams{
		{H: 8, W: 8, C: 16, K: 2},
		{H: 6, W: 9, C: 5, K: 3},
		{H: 32, W: 32, C: 64, K: 4},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d/k%d", p.H, p.W, p.C, p.K), func(t *testing.T) {
			x := g.randn(p.H*p.W*p.C, 1)
			n := len(x)
			xr, yr := g.upF32(x), g.buf(4*n)
			g.run(func(c *vk.Cmd) error { return g.k.PixelShuffle(c, yr, xr, p) })
			want := make([]float32, n)
			if err := RefPixelShuffle(want, x, p); err != nil {
				t.Fatal(err)
			}
			got := g.downF32(yr, n)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("PixelShuffle[%d] = %g, want %g", i, got[i], want[i])
				}
			}
			// Independently: output token 0 starts with the K tokens of
			// grid row 0, then those of grid row 1 (Hugging Face's
			// pixel_shuffle with a square grid).
			cols := p.K * p.K * p.C
			if got[p.C] != x[p.C] || got[p.K*p.C] != x[p.W*p.C] || got[cols] != x[p.K*p.C] {
				t.Errorf("PixelShuffle layout: got %g %g %g, want tokens (0,1), (1,0) and (0,%d) first", got[p.C], got[p.K*p.C], got[cols], p.K)
			}
		})
	}
}
