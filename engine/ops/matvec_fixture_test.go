package ops

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/vk"
)

// quantRelRMS is the largest relative RMS error allowed between a weight
// quantized by the reference implementation and its f16 original: about
// 1.4 times what these fixtures measure. A wrong block layout gives errors
// near or above 1.
var quantRelRMS = map[gguf.GGMLType]float64{
	gguf.TypeQ8_0: 0.008, // measured 0.0053-0.0054 on the fixtures
	gguf.TypeQ6_K: 0.025, // measured 0.0177-0.0179
	gguf.TypeQ4_K: 0.09,  // measured 0.071-0.072
}

// TestFixtureWeights decodes every weight of the reference-quantized
// fixture models and compares it with the same weight in the f16 model
// (they were quantized from it), which checks the block layouts against
// the reference quantizer; then it runs GetRows and MatVec on the device
// over one real tensor of each type.
func TestFixtureWeights(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	dir := fixtures.Dir(t, "models")
	orig, err := gguf.Open(filepath.Join(dir, "llama-spm-256x4-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	g := newRig(t)
	for _, name := range []string{"llama-spm-256x4-q8_0.gguf", "llama-spm-256x4-q4_k_m.gguf", "llama-spm-256x4-f16.gguf"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			onDevice := map[gguf.GGMLType]bool{}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if len(ti.Dims) != 2 {
					continue
				}
				cols, rows := int(ti.Dims[0]), int(ti.Dims[1])
				data, err := f.TensorData(ti)
				if err != nil {
					t.Fatal(err)
				}
				got := dequantizeAll(t, ti.Type, data, rows, cols)
				if tol, ok := quantRelRMS[ti.Type]; ok {
					oi, ok := orig.Tensor(ti.Name)
					if !ok {
						t.Fatalf("%s: no tensor %s in the f16 model", name, ti.Name)
					}
					odata, err := orig.TensorData(oi)
					if err != nil {
						t.Fatal(err)
					}
					want := dequantizeAll(t, oi.Type, odata, rows, cols)
					var num, den float64
					for k := range want {
						d := float64(got[k]) - float64(want[k])
						num += d * d
						den += float64(want[k]) * float64(want[k])
					}
					if rel := math.Sqrt(num / den); !(rel <= tol) {
						t.Errorf("%s %s (%v): relative RMS error %.4g against the f16 original, want <= %g", name, ti.Name, ti.Type, rel, tol)
					}
				}
				if onDevice[ti.Type] {
					continue
				}
				onDevice[ti.Type] = true
				t.Run(ti.Name, func(t *testing.T) {
					defer func(parent *testing.T) { g.t = parent }(g.t)
					g.t = t
					wt := g.upWeight(ti.Type, data, rows, cols, 0)
					ids := []int32{0, int32(rows - 1), int32(rows / 2), 7}
					ir := g.upI32(ids)
					dst := g.buf(4 * len(ids) * cols)
					const n = 3
					x := randomVector(g.r, n*cols)
					xr := g.upF32(x)
					y := g.buf(4 * n * rows)
					g.run(func(c *vk.Cmd) error {
						if err := g.k.GetRows(c, wt, ir, len(ids), dst); err != nil {
							return err
						}
						return g.k.MatVec(c, wt, xr, n, y)
					})
					rowsGot := g.downF32(dst, len(ids)*cols)
					for i, id := range ids {
						for k := 0; k < cols; k++ {
							w := got[int(id)*cols+k]
							if d := math.Abs(float64(rowsGot[i*cols+k] - w)); !(d <= 4e-7*math.Abs(float64(w))) {
								t.Fatalf("GetRows(%s)[%d][%d] (row %d) = %g, want %g", ti.Name, i, k, id, rowsGot[i*cols+k], w)
							}
						}
					}
					want, mag := refProduct(got, rows, cols, x, n)
					checkProduct(t, "MatVec("+ti.Name+")", g.downF32(y, n*rows), want, mag, rows)
				})
			}
		})
	}
}
