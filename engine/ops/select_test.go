package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestArgmax(t *testing.T) {
	g := newRig(t)
	for _, tc := range []struct{ rows, cols int }{{1, 1}, {3, 7}, {5, 32000}, {2, 151937}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			both(t, g, func(t *testing.T) {
				x := g.randn(tc.rows*tc.cols, 1)
				if tc.cols > 10 { // a tie: the first index must win
					x[3], x[9] = 50, 50
				}
				if tc.rows > 2 { // a row of -inf only: none
					for i := 0; i < tc.cols; i++ {
						x[2*tc.cols+i] = float32(math.Inf(-1))
					}
				}
				src, dst := g.upF32(x), g.buf(4*tc.rows)
				g.run(func(c *vk.Cmd) error { return g.k.Argmax(c, dst, src, tc.rows, tc.cols) })
				want := make([]uint32, tc.rows)
				RefArgmax(want, x, tc.rows, tc.cols)
				got := g.downU32(dst, tc.rows)
				for r := range got {
					if got[r] != want[r] {
						t.Errorf("Argmax row %d = %d, want %d", r, got[r], want[r])
					}
				}
			})
		})
	}
}

// TestArgmaxSpecial pins the rows where a greedy pick is easy to get
// wrong: ties (also across the workgroup's lanes and at the row's end),
// -0 beside +0, NaNs, infinities, and rows with nothing to choose.
func TestArgmaxSpecial(t *testing.T) {
	g := newRig(t)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	const cols = 1000
	row := func(f func(x []float32)) []float32 {
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(i%97) / 100 // max 0.96 at i%97 == 96
		}
		f(x)
		return x
	}
	for _, tc := range []struct {
		name string
		x    []float32
		want uint32
	}{
		{"plain", row(func(x []float32) {}), 96},
		{"tie far apart", row(func(x []float32) { x[5], x[998] = 9, 9 }), 5},
		{"tie in neighbouring lanes", row(func(x []float32) { x[641], x[640] = 9, 9 }), 640},
		{"tie at the end", row(func(x []float32) { x[999], x[0] = 9, 8 }), 999},
		{"minus zero before zero", row(func(x []float32) {
			for i := range x {
				x[i] = -1
			}
			x[700], x[300] = 0, float32(math.Copysign(0, -1))
		}), 300},
		{"NaN is never chosen", row(func(x []float32) { x[2], x[3] = nan, 5 }), 3},
		{"+Inf wins", row(func(x []float32) { x[17], x[18] = 1e38, inf }), 18},
		{"-Inf only", row(func(x []float32) {
			for i := range x {
				x[i] = -inf
			}
		}), ArgmaxNone},
		{"NaN and -Inf only", row(func(x []float32) {
			for i := range x {
				x[i] = -inf
				if i%3 == 0 {
					x[i] = nan
				}
			}
		}), ArgmaxNone},
		{"one finite among -Inf", row(func(x []float32) {
			for i := range x {
				x[i] = -inf
			}
			x[811] = -3e38
		}), 811},
	} {
		t.Run(tc.name, func(t *testing.T) {
			both(t, g, func(t *testing.T) {
				src, dst := g.upF32(tc.x), g.buf(4)
				g.run(func(c *vk.Cmd) error { return g.k.Argmax(c, dst, src, 1, cols) })
				ref := []uint32{0}
				RefArgmax(ref, tc.x, 1, cols)
				if got := g.downU32(dst, 1)[0]; got != tc.want || ref[0] != tc.want {
					t.Errorf("Argmax(%s) = %d, RefArgmax = %d, want %d", tc.name, got, ref[0], tc.want)
				}
			})
		})
	}
}

func TestTopK(t *testing.T) {
	g := newRig(t)
	for _, tc := range []struct{ rows, cols, k int }{{1, 1, 1}, {3, 10, 10}, {4, 1000, 40}, {2, 32003, 64}, {2, 151937, 5}} {
		t.Run(fmt.Sprintf("%dx%d/k=%d", tc.rows, tc.cols, tc.k), func(t *testing.T) {
			x := g.randn(tc.rows*tc.cols, 1)
			if tc.cols > 100 {
				// Ties across the k-th place, negative zero, -inf and NaN.
				for _, i := range []int{5, 17, 60, 99} {
					x[i] = 2.5
				}
				x[1], x[2], x[3], x[4] = float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.NaN()), 7
			}
			src, ir, vr := g.upF32(x), g.buf(4*tc.rows*tc.k), g.buf(4*tc.rows*tc.k)
			g.run(func(c *vk.Cmd) error { return g.k.TopK(c, ir, vr, src, tc.rows, tc.cols, tc.k) })
			wi, wv := make([]uint32, tc.rows*tc.k), make([]float32, tc.rows*tc.k)
			RefTopK(wi, wv, x, tc.rows, tc.cols, tc.k)
			gi, gv := g.downU32(ir, len(wi)), g.downF32(vr, len(wv))
			for j := range wi {
				if gi[j] != wi[j] || math.Float32bits(gv[j]) != math.Float32bits(wv[j]) {
					t.Fatalf("TopK [row %d, %d] = (%d, %g), want (%d, %g)", j/tc.k, j%tc.k, gi[j], gv[j], wi[j], wv[j])
				}
			}
		})
	}
	t.Run("unaligned-rows", func(t *testing.T) {
		// Rows after others in a logits buffer: src starts 3 rows of 1001
		// floats in, at no binding alignment.
		const skipRows, rows, cols, k = 3, 4, 1001, 33
		x := g.randn((skipRows+rows)*cols, 1)
		all := g.upF32(x)
		src := all.Sub(4*skipRows*cols, 4*rows*cols)
		ir, vr := g.buf(4*rows*k), g.buf(4*rows*k)
		g.run(func(c *vk.Cmd) error { return g.k.TopK(c, ir, vr, src, rows, cols, k) })
		wi, wv := make([]uint32, rows*k), make([]float32, rows*k)
		RefTopK(wi, wv, x[skipRows*cols:], rows, cols, k)
		gi, gv := g.downU32(ir, len(wi)), g.downF32(vr, len(wv))
		for j := range wi {
			if gi[j] != wi[j] || math.Float32bits(gv[j]) != math.Float32bits(wv[j]) {
				t.Fatalf("TopK [row %d, %d] = (%d, %g), want (%d, %g)", j/k, j%k, gi[j], gv[j], wi[j], wv[j])
			}
		}
	})
	t.Run("signed-zeros", func(t *testing.T) {
		// -0 equals +0 (as the sampler's top_k has it): the first by index win.
		x := make([]float32, 400)
		for i := range x {
			x[i] = -1
		}
		x[300], x[100], x[200] = 0, float32(math.Copysign(0, -1)), 0
		src, ir, vr := g.upF32(x), g.buf(4*2), g.buf(4*2)
		g.run(func(c *vk.Cmd) error { return g.k.TopK(c, ir, vr, src, 1, len(x), 2) })
		wi, wv := make([]uint32, 2), make([]float32, 2)
		RefTopK(wi, wv, x, 1, len(x), 2)
		if gi := g.downU32(ir, 2); gi[0] != 100 || gi[1] != 200 || wi[0] != 100 || wi[1] != 200 {
			t.Errorf("TopK of -0 at 100, +0 at 200 and 300: %v (reference %v), want [100 200]", gi, wi)
		}
	})
	t.Run("ties-at-kth", func(t *testing.T) {
		// Many equal values straddle the k-th place: the first by index win.
		x := make([]float32, 5000)
		for i := range x {
			x[i] = float32(i % 3)
		}
		src, ir, vr := g.upF32(x), g.buf(4*10), g.buf(4*10)
		g.run(func(c *vk.Cmd) error { return g.k.TopK(c, ir, vr, src, 1, len(x), 10) })
		gi := g.downU32(ir, 10)
		for j, i := range gi {
			if want := uint32(2 + 3*j); i != want {
				t.Errorf("TopK ties: [%d] = %d, want %d", j, i, want)
			}
		}
	})
}
