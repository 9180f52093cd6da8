package ops

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// mulCase is one weight shape and activation batch for MatVec and MatMul.
type mulCase struct {
	rows, cols, n int
	lead          int    // bytes before the weight in its buffer
	maxRange      uint64 // binding limit; 0 means the device's
}

func (m mulCase) String() string {
	s := fmt.Sprintf("%dx%d_n%d", m.rows, m.cols, m.n)
	if m.lead != 0 {
		s += fmt.Sprintf("_lead%d", m.lead)
	}
	if m.maxRange != 0 {
		s += fmt.Sprintf("_bind%d", m.maxRange)
	}
	return s
}

// testMul runs one case of W x through the matvec (tiled false) or matmul
// kernel and compares it with the float64 product of the dequantized
// weights.
func testMul(t *testing.T, g *rig, typ gguf.GGMLType, m mulCase, tiled bool) {
	t.Helper()
	defer func(parent *testing.T) { g.t = parent }(g.t)
	g.t = t
	w := randomWeights(g.r, typ, m.rows, m.cols)
	x := randomVector(g.r, m.n*m.cols)
	want, mag := refProduct(dequantizeAll(t, typ, w, m.rows, m.cols), m.rows, m.cols, x, m.n)
	wt := g.upWeight(typ, w, m.rows, m.cols, m.lead)
	xr := g.upF32(x)
	y := g.buf(4 * m.n * m.rows)
	maxRange := m.maxRange
	if maxRange == 0 {
		maxRange = g.k.dev.MaxBinding()
	}
	g.run(func(c *vk.Cmd) error {
		c.Fill(y, NaNBits)
		return g.k.mulMat(c, wt, xr, m.n, y, maxRange, tiled)
	})
	name := "MatVec"
	if tiled {
		name = "MatMul"
	}
	checkProduct(t, fmt.Sprintf("%s(%v, %v)", name, typ, m), g.downF32(y, m.n*m.rows), want, mag, m.rows)
}

func TestMatVec(t *testing.T) {
	g := newRig(t)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			rowBytes, _ := typ.RowSize(uint64(cols))
			cases := []mulCase{
				{rows: 37, cols: cols, n: 1},
				{rows: 37, cols: cols, n: 3, lead: 2},
				{rows: 37, cols: cols, n: 8},
				{rows: 9, cols: 3 * cols, n: 5},
				// Bindings of a few rows: the weight is split in windows
				// whose first row is not at an aligned offset.
				{rows: 23, cols: cols, n: 2, lead: 6, maxRange: 5*rowBytes + 4*uint64(cols) + 64},
			}
			both(t, g, func(t *testing.T) {
				for _, m := range cases {
					t.Run(m.String(), func(t *testing.T) { testMul(t, g, typ, m, false) })
				}
			})
		})
	}
}
