package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestGeGLU(t *testing.T) {
	g := newRig(t)
	for _, n := range []int{1, 333, 11008 + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			gate, up := g.randn(n, 3), g.randn(n, 1)
			if n > 8 { // where naive tanh or exp overflow
				gate[0], gate[1], gate[2] = 60, -60, -12
			}
			gr, ur, dr := g.upF32(gate), g.upF32(up), g.buf(4*n)
			g.run(func(c *vk.Cmd) error { return g.k.GeGLU(c, dr, gr, ur, n) })
			want := make([]float32, n)
			RefGeGLU(want, gate, up)
			// The f32 rounding of gelu(x) scales with |x|, then times up.
			in := make([]float32, n)
			for i := range in {
				in[i] = gate[i] * up[i]
			}
			closeToInput(t, "GeGLU", g.downF32(dr, n), want, in, 1e-5)
		})
	}
}
