package ops

import (
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/sweep"
	"github.com/vkllm/vkllm/vk"
)

func TestMatMul(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
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
			for i, m := range cases {
				// CI: past case 0, one of the two types sampled picks
				// (the plain one for odd cases); the tiled kernel runs
				// only on GPUs, and TestMatMulCoopMat after it.
				if sampled(weightTypes, typ, i) && (i == 0 || sweep.Long() || typ.IsQuantized() == (i%2 == 0)) {
					t.Run(m.String(), func(t *testing.T) { testMul(t, g, typ, m, true) })
				}
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
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	for _, typ := range []gguf.GGMLType{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
		for _, n := range []int{1, 16, 40} {
			m := mulCase{rows: 40, cols: 28672, n: n}
			t.Run(typ.String()+"/"+m.String(), func(t *testing.T) { testMul(t, g, typ, m, true) })
		}
	}
}

// TestMatMulCoopMat runs the cooperative-matrix matmul (matmul_coop.go)
// over every weight format against the float64 product, with the f16
// tolerance of coopTol: partial tiles in rows, columns and depth, several
// tiles each way, the scalar-load path, weights at odd offsets and in
// windows, and accumulation. It needs a device with a suitable
// cooperative-matrix shape.
func TestMatMulCoopMat(t *testing.T) {
	g := newRig(t)
	if !g.k.coopOK {
		f := g.k.dev.Features()
		t.Skipf("%s: no f16 x f16 + f32 subgroup cooperative-matrix shape the kernel can use (VK_KHR_cooperative_matrix or VK_NV_cooperative_matrix with the Vulkan memory model: %v, shaderFloat16: %v, shapes %v)",
			g.k.dev.Info().Name, f.CoopMatrix, f.Float16, g.k.dev.CoopMatrixShapes())
	}
	shape, _ := g.k.CoopMatrixShape()
	t.Logf("shape %v, %s variants, workgroup %d", shape, g.k.coop.suffix, g.k.coop.wg)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			rowBytes, _ := typ.RowSize(uint64(cols))
			cases := []mulCase{
				{rows: 70, cols: cols, n: 17},
				{rows: 130, cols: vecCols(typ), n: 100},
				{rows: 33, cols: 3 * cols, n: 65, slow: true},
				{rows: 64, cols: cols, n: 64, lead: 2},
				{rows: 200, cols: 4 * vecCols(typ), n: 9, xyLead: 8},
				{rows: 131, cols: cols, n: 9, lead: 6, maxRange: 40*rowBytes + 4*uint64(cols) + 64},
				{rows: 70, cols: cols, n: 17, acc: true},
				{rows: 65, cols: cols, n: 130, xyLead: 8, lead: 2, acc: true},
			}
			for _, m := range cases {
				m.coop = true
				t.Run(m.String(), func(t *testing.T) { testMul(t, g, typ, m, true) })
			}
		})
	}
}

// TestMulMatChoosesCoopMat checks that MulMat sends wide products to the
// cooperative-matrix matmul where CoopMatrix is on and to the f32 kernel
// after SetCoopMatrix(false), by the pipelines it creates.
func TestMulMatChoosesCoopMat(t *testing.T) {
	g := newRig(t)
	if !g.k.coopOK {
		if g.k.CoopMatrix() {
			t.Fatal("CoopMatrix() = true on a device without a cooperative-matrix shape")
		}
		g.k.SetCoopMatrix(true)
		if g.k.CoopMatrix() {
			t.Fatal("SetCoopMatrix(true) turned the path on without a cooperative-matrix shape")
		}
		t.Skipf("%s: no cooperative-matrix shape; checked only that the path stays off", g.k.dev.Info().Name)
	}
	const rows, cols, n = 40, 64, 32
	w := randomWeights(g.r, gguf.TypeQ8_0, rows, cols)
	wt := g.upWeight(gguf.TypeQ8_0, w, rows, cols, 0)
	x := g.upF32(randomVector(g.r, n*cols))
	y := g.buf(4 * n * rows)
	for _, on := range []bool{true, false} {
		g.k.SetCoopMatrix(on)
		for key := range g.k.pipes {
			g.k.pipes[key].Close()
			delete(g.k.pipes, key)
		}
		g.run(func(c *vk.Cmd) error { return g.k.MulMat(c, wt, x, n, y) })
		var names []string
		for key := range g.k.pipes {
			names = append(names, key.name)
		}
		want := "matmul_q8_0_f32"
		if on {
			want = g.k.coopKernel(want)
		}
		if len(names) != 1 || names[0] != want {
			t.Errorf("MulMat with CoopMatrix %v created pipelines %v, want [%s]", on, names, want)
		}
	}
}

func TestPickCoopShape(t *testing.T) {
	f16 := func(m, n, k uint32) vk.CoopMatrixShape {
		return vk.CoopMatrixShape{M: m, N: n, K: k, A: vk.ComponentFloat16, B: vk.ComponentFloat16,
			C: vk.ComponentFloat32, Result: vk.ComponentFloat32, Scope: vk.ScopeSubgroup}
	}
	int8 := vk.CoopMatrixShape{M: 16, N: 16, K: 32, A: vk.ComponentSint8, B: vk.ComponentSint8, C: vk.ComponentSint32,
		Result: vk.ComponentSint32, Scope: vk.ScopeSubgroup}
	f16acc := f16(16, 16, 16)
	f16acc.C, f16acc.Result = vk.ComponentFloat16, vk.ComponentFloat16
	wgScope := f16(16, 16, 16)
	wgScope.Scope = vk.ScopeWorkgroup
	lim := vk.Limits{MaxWorkgroupSize: [3]uint32{1024, 1024, 64}, MaxWorkgroupInvocations: 1024, MaxSharedMemory: 48 << 10}
	small := lim
	small.MaxSharedMemory = 16 << 10
	cases := []struct {
		name   string
		shapes []vk.CoopMatrixShape
		sg     uint32
		lim    vk.Limits
		want   vk.CoopMatrixShape
		wg     uint32
		ok     bool
	}{
		{"nvidia", []vk.CoopMatrixShape{int8, f16(16, 8, 16), f16(16, 8, 8), f16(16, 16, 16), f16acc}, 32, lim, f16(16, 16, 16), 128, true},
		{"amd wave64", []vk.CoopMatrixShape{f16acc, f16(16, 16, 16)}, 64, lim, f16(16, 16, 16), 256, true},
		{"intel", []vk.CoopMatrixShape{f16(8, 16, 16), int8}, 16, lim, f16(8, 16, 16), 64, true},
		{"largest", []vk.CoopMatrixShape{f16(8, 8, 8), f16(32, 8, 16), f16(16, 8, 16)}, 32, lim, f16(32, 8, 16), 128, true},
		{"no f32 accumulator", []vk.CoopMatrixShape{f16acc, int8}, 32, lim, vk.CoopMatrixShape{}, 0, false},
		{"workgroup scope", []vk.CoopMatrixShape{wgScope}, 32, lim, vk.CoopMatrixShape{}, 0, false},
		{"too large", []vk.CoopMatrixShape{f16(64, 64, 16), f16(16, 16, 64), f16(4, 16, 16)}, 32, lim, vk.CoopMatrixShape{}, 0, false},
		{"shared memory", []vk.CoopMatrixShape{f16(16, 16, 16)}, 32, small, vk.CoopMatrixShape{}, 0, false},
		{"workgroup size", []vk.CoopMatrixShape{f16(16, 16, 16)}, 512, lim, vk.CoopMatrixShape{}, 0, false},
		{"no subgroup size", []vk.CoopMatrixShape{f16(16, 16, 16)}, 0, lim, vk.CoopMatrixShape{}, 0, false},
		{"none", nil, 32, lim, vk.CoopMatrixShape{}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, wg, ok := pickCoopShape(c.shapes, c.sg, c.lim)
			if ok != c.ok || (ok && (got != c.want || wg != c.wg)) {
				t.Errorf("pickCoopShape = %v, %d, %v; want %v, %d, %v", got, wg, ok, c.want, c.wg, c.ok)
			}
		})
	}
}
