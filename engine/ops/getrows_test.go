package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// testGetRows gathers ids from a random rows x cols matrix of typ and
// compares with the dequantized rows, which must match exactly: the kernel
// does the same f32 arithmetic per element as the reference.
func testGetRows(t *testing.T, g *rig, typ gguf.GGMLType, rows, cols, lead int, ids []int32, maxRange uint64) {
	defer func(parent *testing.T) { g.t = parent }(g.t)
	g.t = t
	w := randomWeights(g.r, typ, rows, cols)
	wf := dequantizeAll(t, typ, w, rows, cols)
	want := make([]float32, len(ids)*cols)
	for i, id := range ids {
		if id >= 0 && int(id) < rows {
			copy(want[i*cols:], wf[int(id)*cols:(int(id)+1)*cols])
		}
	}
	wt := g.upWeight(typ, w, rows, cols, lead)
	ir := g.upI32(ids)
	dst := g.buf(4 * len(ids) * cols)
	if maxRange == 0 {
		maxRange = g.k.dev.MaxBinding()
	}
	g.run(func(c *vk.Cmd) error {
		c.Fill(dst, NaNBits)
		return g.k.getRows(c, wt, ir, len(ids), dst, maxRange)
	})
	got := g.downF32(dst, len(ids)*cols)
	bad := 0
	for i := range got {
		// The shader and the reference may round d*scale*q in a different
		// order: allow one f32 ulp or so.
		if d := math.Abs(float64(got[i] - want[i])); math.IsNaN(float64(got[i])) || d > 4e-7*math.Abs(float64(want[i])) {
			if bad < 5 {
				t.Errorf("GetRows(%v %dx%d)[%d][%d] (row %d) = %g, want %g", typ, rows, cols, i/cols, i%cols, ids[i/cols], got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("GetRows(%v %dx%d): %d of %d values wrong", typ, rows, cols, bad, len(got))
	}
}

func TestGetRows(t *testing.T) {
	g := newRig(t)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			rowBytes, _ := typ.RowSize(uint64(cols))
			cases := []struct {
				rows, cols, lead int
				ids              []int32
				maxRange         uint64
			}{
				{rows: 11, cols: cols, ids: []int32{3}},
				{rows: 11, cols: vecCols(typ), ids: []int32{9, 4, 0}},
				{rows: 11, cols: 3 * cols, lead: 2, ids: []int32{10, 0, 7, 7, 1}},
				{rows: 11, cols: cols, ids: []int32{2, -1, 11, 1 << 30, 5}}, // out-of-range ids give zero rows
				{rows: 50, cols: cols, lead: 6, ids: []int32{49, 0, 13, 26, 39, 12, -3, 25}, maxRange: 7*rowBytes + 4*uint64(cols) + 64},
			}
			for _, c := range cases {
				name := fmt.Sprintf("%dx%d_ids%d_lead%d_bind%d", c.rows, c.cols, len(c.ids), c.lead, c.maxRange)
				t.Run(name, func(t *testing.T) { testGetRows(t, g, typ, c.rows, c.cols, c.lead, c.ids, c.maxRange) })
			}
		})
	}
}

// TestGetRowsManyIds gathers more ids than one grid dimension holds
// (65535 on most devices), so the ids spread over y and z.
func TestGetRowsManyIds(t *testing.T) {
	g := newRig(t)
	const rows, cols, n = 100, 32, 70001
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(g.r.IntN(rows+2)) - 1 // includes -1 and rows
	}
	testGetRows(t, g, gguf.TypeQ8_0, rows, cols, 0, ids, 0)
}
