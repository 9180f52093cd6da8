package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestIm2Col(t *testing.T) {
	g := newRig(t)
	for _, p := range []Im2ColParams{
		{C: 3, H: 64, W: 64, P: 16, RoundF16: true},
		{C: 3, H: 12, W: 20, P: 4},
		{C: 1, H: 7, W: 7, P: 7},
		{C: 2, H: 30, W: 15, P: 3, RoundF16: true},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d/p%d/f16=%v", p.C, p.H, p.W, p.P, p.RoundF16), func(t *testing.T) {
			x := g.randn(p.C*p.H*p.W, 2)
			n := p.Patches() * p.PatchLen()
			xr, yr := g.upF32(x), g.buf(4*n)
			g.run(func(c *vk.Cmd) error { return g.k.Im2Col(c, yr, xr, p) })
			want := make([]float32, n)
			if err := RefIm2Col(want, x, p); err != nil {
				t.Fatal(err)
			}
			got := g.downF32(yr, n)
			// A pure permutation (and f16 rounding, round-to-nearest-even in
			// both): every value exact.
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("Im2Col[%d] = %g, want %g", i, got[i], want[i])
				}
			}
			// Independent of RefIm2Col: patch 1's first value is pixel
			// (0, P) of plane 0.
			if p.W/p.P > 1 && !p.RoundF16 && got[p.PatchLen()] != x[p.P] {
				t.Errorf("patch 1 starts with %g, want pixel (0,%d) = %g", got[p.PatchLen()], p.P, x[p.P])
			}
		})
	}
	if err := RefIm2Col(nil, nil, Im2ColParams{C: 3, H: 10, W: 10, P: 4}); err == nil {
		t.Error("RefIm2Col accepted sides that are not multiples of the patch")
	}
}
