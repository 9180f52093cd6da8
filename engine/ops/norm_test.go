package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestRMSNorm(t *testing.T) {
	g := newRig(t)
	cases := []struct {
		rows, cols int
		weight     bool
	}{{1, 1, false}, {3, 7, true}, {5, 257, false}, {2, 4096, true}, {37, 1000, true}, {16, 256, true}, {3, 16384, true}, {2, 40000, false},
		{70001, 3, true}, // more rows than maxComputeWorkGroupCount[0] (65535 on lavapipe): a 2-D grid
	}
	defer func(rows bool) { g.k.rowKernels = rows }(g.k.rowKernels)
	for _, tc := range cases {
		check := func(t *testing.T) {
			x := g.randn(tc.rows*tc.cols, 3)
			var w []float32
			wr := vk.Range{}
			if tc.weight {
				w = g.randn(tc.cols, 1)
				wr = g.upF32(w)
			}
			src, dst := g.upF32(x), g.buf(4*tc.rows*tc.cols)
			g.run(func(c *vk.Cmd) error { return g.k.RMSNorm(c, dst, src, wr, tc.rows, tc.cols, 1e-5) })
			want := make([]float32, len(x))
			RefRMSNorm(want, x, w, tc.rows, tc.cols, 1e-5)
			closeTo(t, "RMSNorm", g.downF32(dst, len(x)), want, 1e-5)
		}
		t.Run(fmt.Sprintf("%dx%d/w=%v", tc.rows, tc.cols, tc.weight), func(t *testing.T) {
			// The workgroup-per-row kernel (shared-memory and subgroup
			// reductions), then the row-per-invocation one of CPU devices.
			g.k.rowKernels = false
			both(t, g, check)
			g.k.rowKernels = true
			t.Run("rows", check)
		})
	}
}

func TestLayerNorm(t *testing.T) {
	g := newRig(t)
	for _, tc := range []struct{ rows, cols int }{{1, 1}, {3, 7}, {4, 384}, {9, 1031}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			both(t, g, func(t *testing.T) {
				x := g.randn(tc.rows*tc.cols, 2)
				for i := range x {
					x[i] += 0.5 // a mean away from zero exercises the centring
				}
				w, b := g.randn(tc.cols, 1), g.randn(tc.cols, 1)
				src, dst, wr, br := g.upF32(x), g.buf(4*len(x)), g.upF32(w), g.upF32(b)
				g.run(func(c *vk.Cmd) error { return g.k.LayerNorm(c, dst, src, wr, br, tc.rows, tc.cols, 1e-12) })
				want := make([]float32, len(x))
				RefLayerNorm(want, x, w, b, tc.rows, tc.cols, 1e-12)
				closeTo(t, "LayerNorm", g.downF32(dst, len(x)), want, 1e-5)
			})
		})
	}
}

// TestRowKernelsOverMaxBinding runs RMSNorm and Argmax over a tensor larger
// than one storage binding, which they must split into groups of rows.
func TestRowKernelsOverMaxBinding(t *testing.T) {
	g := newRig(t)
	const cols = 1 << 16
	rows := int(g.k.dev.Limits().MaxStorageBufferRange/(4*cols)) + 3
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(i%1013)/64 - 7
	}
	for r := 0; r < rows; r++ { // a distinct maximum per row
		x[r*cols+(r*7919)%cols] = 100 + float32(r)
	}
	src, dst, am := g.upF32(x), g.buf(4*len(x)), g.buf(4*rows)
	var dispatches int
	g.run(func(c *vk.Cmd) error {
		if err := g.k.RMSNorm(c, dst, src, vk.Range{}, rows, cols, 1e-5); err != nil {
			return err
		}
		if err := g.k.Argmax(c, am, src, rows, cols); err != nil {
			return err
		}
		dispatches = c.Dispatches()
		return nil
	})
	if dispatches < 4 {
		t.Errorf("RMSNorm+Argmax over %d bytes recorded %d dispatches, want >= 4 (split per binding)", 4*len(x), dispatches)
	}
	want := make([]float32, len(x))
	RefRMSNorm(want, x, nil, rows, cols, 1e-5)
	closeTo(t, "RMSNorm over one binding", g.downF32(dst, len(x)), want, 1e-5)
	got := g.downU32(am, rows)
	for r, i := range got {
		if want := uint32((r * 7919) % cols); i != want {
			t.Errorf("Argmax row %d = %d, want %d", r, i, want)
		}
	}
}
