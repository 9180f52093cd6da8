package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestSoftCap(t *testing.T) {
	g := newRig(t)
	for _, n := range []int{1, 255, 70001} {
		for _, c := range []float32{30, 0.5} {
			t.Run(fmt.Sprintf("%d/cap=%g", n, c), func(t *testing.T) {
				x := g.randn(n, 20)
				if n > 8 { // past where a naive tanh overflows
					x[0], x[1], x[2] = 1e4, -1e4, 0
				}
				src, dst := g.upF32(x), g.buf(4*n)
				g.run(func(cmd *vk.Cmd) error { return g.k.SoftCap(cmd, dst, src, n, c) })
				want := make([]float32, n)
				RefSoftCap(want, x, c)
				closeToInput(t, "SoftCap", g.downF32(dst, n), want, x, 1e-5)
			})
		}
	}
	if err := g.k.SoftCap(nil, g.buf(4), g.buf(4), 1, 0); err == nil {
		t.Error("SoftCap with cap 0 succeeded, want an error")
	}
}
