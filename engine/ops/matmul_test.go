package ops

import (
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

func TestMatMul(t *testing.T) {
	g := newRig(t)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			rowBytes, _ := typ.RowSize(uint64(cols))
			cases := []mulCase{
				{rows: 70, cols: cols, n: 17},
				{rows: 33, cols: vecCols(typ), n: 20},
				{rows: 33, cols: vecCols(typ), n: 3, slow: true},
				{rows: 64, cols: cols, n: 64, lead: 2},
				{rows: 5, cols: 3 * cols, n: 1},
				{rows: 65, cols: cols, n: 12, xyLead: 8},
				{rows: 131, cols: cols, n: 9, lead: 6, maxRange: 40*rowBytes + 4*uint64(cols) + 64},
				{rows: 70, cols: cols, n: 17, acc: true},
				{rows: 65, cols: cols, n: 12, xyLead: 8, lead: 2, acc: true},
			}
			for _, m := range cases {
				t.Run(m.String(), func(t *testing.T) { testMul(t, g, typ, m, true) })
			}
		})
	}
}

// TestMulLongRows multiplies rows as long as large models' (28672 columns:
// a 70B model's FFN down projection) by the matvec paths (1 and 16
// columns) and the tiled kernel. A CPU driver may bound the loop
// iterations of one invocation (lavapipe stops a shader's loops after
// 65535 back-edges in all), which a kernel walking a whole row per
// invocation could pass.
func TestMulLongRows(t *testing.T) {
	g := newRig(t)
	for _, typ := range []gguf.GGMLType{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
		for _, n := range []int{1, 16, 40} {
			m := mulCase{rows: 40, cols: 28672, n: n}
			t.Run(typ.String()+"/"+m.String(), func(t *testing.T) { testMul(t, g, typ, m, true) })
		}
	}
}
