package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestSoftMax(t *testing.T) {
	g := newRig(t)
	for _, tc := range []struct{ rows, cols, maskRows int }{{1, 1, 0}, {3, 5, 0}, {4, 1000, 1}, {6, 77, 3}, {2, 32003, 0}} {
		t.Run(fmt.Sprintf("%dx%d/mask=%d", tc.rows, tc.cols, tc.maskRows), func(t *testing.T) {
			both(t, g, func(t *testing.T) {
				x := g.randn(tc.rows*tc.cols, 5)
				if tc.cols > 100 { // logits far beyond exp's range: the max must be subtracted
					x[7], x[8] = 3000, -3000
				}
				var mask []float32
				mr := vk.Range{}
				if tc.maskRows > 0 {
					mask = make([]float32, tc.maskRows*tc.cols)
					for i := range mask {
						if i%tc.cols > 0 && g.r.IntN(4) == 0 {
							mask[i] = float32(math.Inf(-1))
						}
					}
					mr = g.upF32(mask)
				}
				src, dst := g.upF32(x), g.buf(4*len(x))
				g.run(func(c *vk.Cmd) error { return g.k.SoftMax(c, dst, src, mr, tc.rows, tc.cols, tc.maskRows, 0.7) })
				want := make([]float32, len(x))
				RefSoftMax(want, x, mask, tc.rows, tc.cols, tc.maskRows, 0.7)
				closeTo(t, "SoftMax", g.downF32(dst, len(x)), want, 1e-5)
			})
		})
	}
}
