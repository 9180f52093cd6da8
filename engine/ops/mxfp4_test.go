package ops

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/vk"
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

// TestMXFP4FixtureKernels runs GetRows, MatVec and MatMul on the device
// over the real MXFP4 expert tensors of the gpt-oss fixture (written by
// llama-quantize), one of each row length, each taken as one matrix of
// all its experts' rows, against the tests' own dequantization.
func TestMXFP4FixtureKernels(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	path := filepath.Join(fixtures.Dir(t, "archs-next"), "moe", "gpt-oss-gpt2-192x4-mxfp4.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := newRig(t)
	seen := map[uint64]bool{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Type != gguf.TypeMXFP4 || seen[ti.Dims[0]] {
			continue
		}
		seen[ti.Dims[0]] = true
		cols := int(ti.Dims[0])
		rows := int(ti.NumElements()) / cols
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(ti.Name, func(t *testing.T) {
			defer func(parent *testing.T) { g.t = parent }(g.t)
			g.t = t
			wf := dequantizeAll(t, ti.Type, data, rows, cols)
			wt := g.upWeight(ti.Type, data, rows, cols, 0)
			ids := []int32{0, int32(rows - 1), int32(rows / 2), 7}
			ir := g.upI32(ids)
			dst := g.buf(4 * len(ids) * cols)
			for _, n := range []int{3, 20} { // a matvec and a tiled matmul
				x := randomVector(g.r, n*cols)
				xr := g.upF32(x)
				y := g.buf(4 * n * rows)
				g.run(func(c *vk.Cmd) error {
					if err := g.k.GetRows(c, wt, ir, len(ids), dst); err != nil {
						return err
					}
					return g.k.MulMat(c, wt, xr, n, y)
				})
				rowsGot := g.downF32(dst, len(ids)*cols)
				for i, id := range ids {
					for k := 0; k < cols; k++ {
						if got, want := rowsGot[i*cols+k], wf[int(id)*cols+k]; got != want {
							t.Fatalf("GetRows(%s)[%d][%d] (row %d) = %g, want %g", ti.Name, i, k, id, got, want)
						}
					}
				}
				want, mag := refProduct(wf, rows, cols, x, n)
				checkProduct(t, fmt.Sprintf("MulMat(%s, %d columns)", ti.Name, n), g.downF32(y, n*rows), want, mag, rows)
			}
		})
	}
	if len(seen) == 0 {
		t.Fatalf("%s has no MXFP4 tensors", path)
	}
}
