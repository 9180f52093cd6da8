package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

// mxfp4Shapes are the row lengths of 1 to 5 blocks: MXFP4's blocks are 17
// bytes, so rows of an odd number of blocks start at every byte offset
// modulo 4, and with the leads every block does.
var mxfp4Shapes = []struct{ cols, lead int }{
	{32, 0}, {64, 1}, {96, 2}, {128, 3}, {160, 1}, {32, 3},
}

// TestMXFP4Kernels runs the matvec (in both matvec layouts), matmul and
// get_rows kernels over MXFP4 weights of every row length from one to five
// blocks, at weight offsets of every residue modulo 4, against the CPU
// reference.
func TestMXFP4Kernels(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	typ := gguf.TypeMXFP4
	for _, s := range mxfp4Shapes {
		t.Run(fmt.Sprintf("cols%d_lead%d", s.cols, s.lead), func(t *testing.T) {
			matvecLayouts(t, g, func(t *testing.T) {
				m := mulCase{rows: 13, cols: s.cols, n: 3, lead: s.lead}
				testMul(t, g, typ, m, false)
			})
			t.Run("matmul", func(t *testing.T) {
				testMul(t, g, typ, mulCase{rows: 21, cols: s.cols, n: 17, lead: s.lead}, true)
			})
			t.Run("get_rows", func(t *testing.T) {
				testGetRows(t, g, typ, 9, s.cols, s.lead, []int32{8, 0, 3, 3, -1, 9, 5}, 0)
			})
		})
	}
}

// TestMXFP4IntDot runs the integer-dot matvec over the shapes of
// TestMXFP4Kernels.
func TestMXFP4IntDot(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := idotRig(t)
	for _, s := range mxfp4Shapes {
		m := mulCase{rows: 13, cols: s.cols, n: 3, lead: s.lead}
		t.Run(m.String(), func(t *testing.T) { testMulQ8(t, g, gguf.TypeMXFP4, m) })
	}
}
