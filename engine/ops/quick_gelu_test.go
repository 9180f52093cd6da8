package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestQuickGELU(t *testing.T) {
	g := newRig(t)
	for _, n := range []int{1, 333, 4096 + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x := g.randn(n, 3)
			if n > 8 { // where a naive exp overflows
				x[0], x[1], x[2] = 80, -80, -12
			}
			xr, yr := g.upF32(x), g.buf(4*n)
			g.run(func(c *vk.Cmd) error { return g.k.QuickGELU(c, yr, xr, n) })
			want := make([]float32, n)
			RefQuickGELU(want, x)
			closeToInput(t, "QuickGELU", g.downF32(yr, n), want, x, 1e-5)
		})
	}
}
