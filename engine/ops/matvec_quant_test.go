package ops

import (
	"math"
	"testing"

	"github.com/vkllm/vkllm/gguf/quant"
	"github.com/vkllm/vkllm/vk"
)

// TestDequantizeMatchesQuant holds dequantizeRow (behind the kernels'
// expected values) equal, bit for bit, to gguf/quant.Dequantize on random
// valid blocks of every weight type that package decodes.
func TestDequantizeMatchesQuant(t *testing.T) {
	r := newRand(t)
	for _, typ := range weightTypes {
		if !quant.CanDequantize(typ) {
			t.Logf("gguf/quant does not decode %v yet; not compared", typ)
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			cols := 2 * max(typ.BlockSize(), 32)
			w := randomWeights(r, typ, 3, cols)
			got := make([]float32, 3*cols)
			want := make([]float32, 3*cols)
			if err := dequantizeRow(typ, w, got); err != nil {
				t.Fatal(err)
			}
			if err := quant.Dequantize(typ, w, want); err != nil {
				t.Fatalf("quant.Dequantize(%v): %v", typ, err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("dequantizeRow(%v)[%d] = %g, quant.Dequantize = %g", typ, i, got[i], want[i])
				}
			}
		})
	}
}

// TestMatVecQuantized runs MatVec and MatMul over weights that
// quant.Quantize made from Gaussian values, for every type it encodes.
func TestMatVecQuantized(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	for _, typ := range weightTypes {
		if !quant.CanQuantize(typ) {
			t.Logf("gguf/quant does not encode %v yet; random blocks cover it", typ)
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			defer func(parent *testing.T) { g.t = parent }(g.t)
			g.t = t
			const rows = 21
			cols := 4 * max(typ.BlockSize(), 32)
			src := make([]float32, rows*cols)
			for i := range src {
				src[i] = float32(g.r.NormFloat64())
			}
			w, err := quant.Quantize(typ, src)
			if err != nil {
				t.Fatalf("quant.Quantize(%v): %v", typ, err)
			}
			wt := g.upWeight(typ, w, rows, cols, 0)
			for _, n := range []int{3, 11} {
				x := randomVector(g.r, n*cols)
				want, mag := refProduct(dequantizeAll(t, typ, w, rows, cols), rows, cols, x, n)
				xr := g.upF32(x)
				y := g.buf(4 * n * rows)
				g.run(func(c *vk.Cmd) error { return g.k.MulMat(c, wt, xr, n, y) })
				checkProduct(t, "MulMat("+typ.String()+", quantized)", g.downF32(y, n*rows), want, mag, rows)
			}
		})
	}
}
