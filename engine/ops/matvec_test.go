package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// mulCase is one weight shape and activation batch for MatVec and MatMul.
type mulCase struct {
	rows, cols, n int
	lead          int    // bytes before the weight in its buffer
	maxRange      uint64 // binding limit; 0 means the device's
	slow          bool   // force the kernels' scalar-load path
	xyLead        int    // bytes before x and y in their buffers (a multiple of 4)
	acc           bool   // y += W x (MulMatAdd) over random y
	ssbo          bool   // activations in a storage buffer even where a uniform buffer would do
	xu            bool   // weights in a storage buffer even where a texel buffer would do
	coop          bool   // the cooperative-matrix matmul (with tiled), compared with coopTol
}

func (m mulCase) String() string {
	s := fmt.Sprintf("%dx%d_n%d", m.rows, m.cols, m.n)
	if m.lead != 0 {
		s += fmt.Sprintf("_lead%d", m.lead)
	}
	if m.maxRange != 0 {
		s += fmt.Sprintf("_bind%d", m.maxRange)
	}
	if m.slow {
		s += "_slow"
	}
	if m.xyLead != 0 {
		s += fmt.Sprintf("_xy%d", m.xyLead)
	}
	if m.acc {
		s += "_acc"
	}
	if m.ssbo {
		s += "_ssbo"
	}
	if m.xu {
		s += "_xu"
	}
	if m.coop {
		s += "_coop"
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
	xr := g.upF32(append(make([]float32, m.xyLead/4), x...))
	xr = xr.Sub(uint64(m.xyLead), uint64(4*len(x)))
	var y0 []float32
	if m.acc {
		y0 = randomVector(g.r, m.n*m.rows)
		for i := range want {
			want[i] += float64(y0[i])
			mag[i] += math.Abs(float64(y0[i]))
		}
	}
	y, guard := g.guardedOut(m.xyLead, y0, m.n, m.rows)
	g.run(func(c *vk.Cmd) error {
		if !m.acc {
			c.Fill(y, NaNBits)
		}
		return g.k.mulMat(c, wt, xr, m.n, y, mulOpts{tiled: tiled, coop: m.coop, maxRange: m.maxRange, slow: m.slow, acc: m.acc, noUniform: m.ssbo, noTexel: m.xu})
	})
	name := "MatVec"
	if tiled {
		name = "MatMul"
	}
	rel, abs := relTol, 0.0
	if m.coop {
		rel, abs = coopTol(m.cols)
	}
	checkProductTol(t, fmt.Sprintf("%s(%v, %v)", name, typ, m), g.downF32(y, m.n*m.rows), want, mag, m.rows, rel, abs)
	g.checkUntouched(fmt.Sprintf("%s(%v, %v): the %d columns after y", name, typ, m, guardCols), guard)
}

// matvecCases are the shapes every matvec kernel is tested over for
// weight type typ: rows that do not fill a workgroup (nor a multiple of 2
// or 4 rows per group), 1..19 columns (several passes), weights at
// unaligned offsets, activations and outputs at offsets, MulMatAdd,
// bindings of a few rows, scalar loads.
func matvecCases(typ gguf.GGMLType) []mulCase {
	cols := testCols(typ)
	rowBytes, _ := typ.RowSize(uint64(cols))
	return []mulCase{
		{rows: 37, cols: cols, n: 1},
		{rows: 37, cols: cols, n: 3, lead: 2},
		{rows: 37, cols: cols, n: 8},
		{rows: 9, cols: 3 * cols, n: 5},
		{rows: 19, cols: vecCols(typ), n: 4},
		{rows: 6, cols: 1024, n: 2}, // 32 units of work: one row per workgroup
		{rows: 13, cols: cols, n: 6, xyLead: 4},
		{rows: 11, cols: cols, n: 19}, // three passes over the weights
		{rows: 37, cols: cols, n: 1, acc: true},
		{rows: 23, cols: cols, n: 5, lead: 6, xyLead: 8, acc: true, maxRange: 5*rowBytes + 4*uint64(cols) + 64},
		{rows: 19, cols: vecCols(typ), n: 7, slow: true},
		// Bindings of a few rows: the weight is split in windows
		// whose first row is not at an aligned offset.
		{rows: 23, cols: cols, n: 2, lead: 6, maxRange: 5*rowBytes + 4*uint64(cols) + 64},
	}
}

func TestMatVec(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cols := testCols(typ)
			rowBytes, _ := typ.RowSize(uint64(cols))
			cases := append(matvecCases(typ),
				// Several rows per invocation on CPU devices (rowsPerLane
				// 2, 4 and 8), with a partial last workgroup.
				mulCase{rows: 300, cols: cols, n: 3},
				mulCase{rows: 600, cols: cols, n: 1, lead: 2, acc: true},
				mulCase{rows: 700, cols: vecCols(typ), n: 4, slow: true},
				mulCase{rows: 1100, cols: cols, n: 5, xyLead: 4},
				mulCase{rows: 260, cols: cols, n: 4},
				mulCase{rows: 100, cols: cols, n: 2},
				// CPU devices read the activations from a uniform
				// buffer where a pass fits one (the _xu variants):
				// the same cases from a storage buffer, and a pass too
				// wide for 64 KiB that falls back to one.
				mulCase{rows: 300, cols: cols, n: 3, ssbo: true},
				mulCase{rows: 1100, cols: cols, n: 5, xyLead: 4, ssbo: true},
				mulCase{rows: 11, cols: cols, n: 19, ssbo: true},
				// With the activations in a uniform buffer, CPU
				// devices read the weights from a texel buffer (the
				// _xt variants); the same cases from a storage buffer.
				mulCase{rows: 300, cols: cols, n: 3, xu: true},
				mulCase{rows: 1100, cols: cols, n: 5, xyLead: 4, xu: true},
				mulCase{rows: 23, cols: cols, n: 2, lead: 6, maxRange: 5*rowBytes + 4*uint64(cols) + 64, xu: true},
				mulCase{rows: 37, cols: 8192, n: 3},
			)
			matvecLayouts(t, g, func(t *testing.T) {
				for i, m := range cases {
					if sampled(weightTypes, typ, i) && g.layoutSampled(weightTypes, typ, i) {
						t.Run(m.String(), func(t *testing.T) { testMul(t, g, typ, m, false) })
					}
				}
			})
		})
	}
}

// gpuLayout switches g's kernels to the GPU matvec layout (SetGPUMatVec)
// with groupRows rows per group of invocations and the 16- and 8-bit
// storage views on or off, whatever the device, for the test's duration.
func gpuLayout(t *testing.T, g *rig, groupRows uint32, views16 bool) {
	k := g.k
	savedRows, savedViews := k.groupRows, k.views16
	t.Cleanup(func() {
		k.SetGPUMatVec(false)
		k.groupRows, k.views16 = savedRows, savedViews
	})
	k.SetGPUMatVec(true)
	k.groupRows, k.views16 = groupRows, views16
}

// gpuVariants runs f once per GPU matvec variant for weight type typ:
// 1, 2 and 4 rows per group of invocations, each with the word loads and,
// where the type has them (hasViews16) and the device the features, the
// 16- and 8-bit storage views; all with subgroup reductions where the
// device has them, and 4 rows per group with the shared-memory ones too.
// f gets the variant (see gpuCaseSampled).
func gpuVariants(t *testing.T, g *rig, typ gguf.GGMLType, hasViews16 func(gguf.GGMLType) bool, f func(t *testing.T, gv gpuVariant)) {
	defer g.k.SetSubgroups(true)
	f16 := g.k.dev.Features().Storage16 && g.k.dev.Features().Storage8
	type variant struct {
		gr        uint32
		views, sg bool
	}
	var vs []variant
	for _, gr := range []uint32{1, 2, 4} {
		for _, views := range []bool{false, true} {
			for _, sg := range []bool{true, false} {
				g.k.SetSubgroups(sg)
				if views && !(f16 && hasViews16(typ)) || sg && !g.k.Subgroups() || !sg && gr != 4 && g.k.dev.Features().SubgroupArithmetic {
					continue
				}
				vs = append(vs, variant{gr, views, sg})
			}
		}
	}
	kinds := map[bool]int{}
	for _, vr := range vs {
		kinds[vr.views]++
	}
	seen := map[bool]int{}
	for _, vr := range vs {
		gr, views, sg := vr.gr, vr.views, vr.sg
		gv := gpuVariant{index: seen[views], count: kinds[views], views: views}
		seen[views]++
		g.k.SetSubgroups(sg)
		name := fmt.Sprintf("rows%d", gr)
		if views {
			name += "_s16"
		}
		if !sg {
			name += "_shared"
		}
		t.Run(name, func(t *testing.T) {
			gpuLayout(t, g, gr, views)
			// The kernels must pick what the name says.
			names, _ := kernelsFor(typ)
			if got := g.k.matvecName(typ, names, 0); views != strings.HasSuffix(got, "_s16") {
				t.Fatalf("matvecName(%v) = %s with views16 %v", typ, got, views)
			}
			if got := g.k.rowsPerLane(matvecWG, 37, 1); got != gr {
				t.Fatalf("rowsPerLane(%d, 37 rows) = %d, want %d", matvecWG, got, gr)
			}
			f(t, gv)
		})
	}
}

// gpuCases are the matvecCases that the GPU variants are tested over
// (lavapipe compiles a pipeline per column count, so fewer of them): rows
// not a multiple of 2 or 4, 1 to 8 columns, rows shorter than a workgroup,
// weights at unaligned offsets, MulMatAdd, bindings of a few rows, scalar
// loads.
func gpuCases(typ gguf.GGMLType) []mulCase {
	all := matvecCases(typ)
	return []mulCase{all[0], all[1], all[2], all[3], all[4], all[8], all[9], all[10]}
}

func hasMatVecS16(t gguf.GGMLType) bool { _, _, ok := matvecS16Kernels(t); return ok }

// TestMatVecGPU runs the GPU layout's matvec variants over matvecCases:
// 1, 2 and 4 rows per group of invocations (rows not a multiple of them),
// the 16- and 8-bit storage views where the type has them, with shared
// memory and subgroup reductions (the latter requiring the subgroup size
// matvecSubgroupSize picks where the device has subgroup size control).
func TestMatVecGPU(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	if info := g.k.dev.Info(); info.Features.SubgroupSizeControl && matvecSubgroupSize(info) == 0 {
		t.Logf("%s allows subgroup sizes %d..%d: none divides the matvec workgroup", info.Name, info.MinSubgroupSize, info.MaxSubgroupSize)
	}
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			cases := gpuCases(typ)
			gpuVariants(t, g, typ, hasMatVecS16, func(t *testing.T, gv gpuVariant) {
				for i, m := range cases {
					if gpuCaseSampled(weightTypes, typ, i, gv) {
						t.Run(m.String(), func(t *testing.T) { testMul(t, g, typ, m, false) })
					}
				}
			})
		})
	}
}

// TestMatVecGroupRows checks gpuGroupRows' rule: 4 rows per group where
// the workgroups still number gpuGroupsPerUnit per compute unit, fewer
// for short matrices, 1 for rows of one sub-block.
func TestMatVecGroupRows(t *testing.T) {
	g := newRig(t)
	defer g.k.SetComputeUnits(0)
	g.k.SetComputeUnits(100) // 400 workgroups wanted
	for _, tc := range []struct {
		tpr  uint32
		rows int
		want uint32
	}{
		{32, 4096, 4}, // 1024 workgroups of 4 rows
		{32, 1600, 4}, // exactly 400
		{32, 1596, 2}, // 399 of 4 rows: 798 of 2
		{32, 800, 2},
		{32, 798, 1},
		{32, 10, 1},
		{8, 6400, 4}, // 4 groups of rows per workgroup: 400 workgroups
		{8, 6384, 2},
		{1, 100000, 1},
	} {
		if got := g.k.gpuGroupRows(tc.tpr, tc.rows); got != tc.want {
			t.Errorf("gpuGroupRows(tpr %d, %d rows) with 100 units = %d, want %d", tc.tpr, tc.rows, got, tc.want)
		}
	}
}

// TestLargeWeight runs GetRows and MatVec over an F16 matrix larger than one
// storage binding (150000 x 1024, 293 MiB, against lavapipe's 128 MiB
// maxStorageBufferRange): the kernels must bind it in windows of rows.
func TestLargeWeight(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	const rows, cols, n = 150000, 1024, 2
	if g.k.dev.MaxBinding() >= 2*rows*cols {
		t.Logf("the device binds %d bytes at once; the matrix fits one binding", g.k.dev.MaxBinding())
	}
	w := make([]byte, 2*rows*cols)
	for i := 0; i < len(w); i += 8 {
		// Four finite f16 of magnitude 2^-7..2^-3 with random signs and
		// mantissas.
		v := g.r.Uint64()&0x83FF83FF83FF83FF | 0x2000200020002000
		v |= (g.r.Uint64() & 0x0C000C000C000C00)
		putU32(w[i:], uint32(v))
		putU32(w[i+4:], uint32(v>>32))
	}
	var table [1 << 16]float32
	for i := range table {
		table[i] = dqHalfToFloat(uint16(i))
	}
	row := func(r int) []float32 {
		out := make([]float32, cols)
		for k := range out {
			out[k] = table[uint16(w[2*(r*cols+k)])|uint16(w[2*(r*cols+k)+1])<<8]
		}
		return out
	}
	wt := g.upWeight(gguf.TypeF16, w, rows, cols, 0)
	// windows is how many dispatches one pass over the matrix takes.
	chunks, err := planRowChunks(0, 2*cols, rows, wt.Data.Buf.Size(), g.k.dev.MaxBinding(), max(g.k.dev.Limits().MinStorageOffsetAlign, 4))
	if err != nil {
		t.Fatal(err)
	}
	windows := len(chunks)
	t.Logf("%d-byte matrix bound in %d windows of at most %d bytes", len(w), windows, g.k.dev.MaxBinding())

	t.Run("GetRows", func(t *testing.T) {
		defer func(parent *testing.T) { g.t = parent }(g.t)
		g.t = t
		ids := []int32{0, rows - 1, 65535, 65536, 65537, 100000, 131071, 3}
		ir := g.upI32(ids)
		dst := g.buf(4 * len(ids) * cols)
		g.run(func(c *vk.Cmd) error {
			err := g.k.GetRows(c, wt, ir, len(ids), dst)
			if c.Dispatches() != windows {
				t.Errorf("GetRows recorded %d dispatches, want %d (one per window)", c.Dispatches(), windows)
			}
			return err
		})
		got := g.downF32(dst, len(ids)*cols)
		for i, id := range ids {
			want := row(int(id))
			for k := range want {
				if got[i*cols+k] != want[k] {
					t.Fatalf("GetRows(F16 %dx%d)[%d][%d] (row %d) = %g, want %g", rows, cols, i, k, id, got[i*cols+k], want[k])
				}
			}
		}
	})
	t.Run("MatVec", func(t *testing.T) {
		defer func(parent *testing.T) { g.t = parent }(g.t)
		g.t = t
		x := randomVector(g.r, n*cols)
		xr := g.upF32(x)
		y := g.buf(4 * n * rows)
		g.run(func(c *vk.Cmd) error {
			err := g.k.MatVec(c, wt, xr, n, y)
			if c.Dispatches() != windows {
				t.Errorf("MatVec recorded %d dispatches, want %d (one per window)", c.Dispatches(), windows)
			}
			return err
		})
		want := make([]float64, n*rows)
		mag := make([]float64, n*rows)
		for r := 0; r < rows; r++ {
			wr := row(r)
			for c := 0; c < n; c++ {
				var s, m float64
				for k, v := range wr {
					p := float64(v) * float64(x[c*cols+k])
					s += p
					m += math.Abs(p)
				}
				want[c*rows+r], mag[c*rows+r] = s, m
			}
		}
		checkProduct(t, fmt.Sprintf("MatVec(F16 %dx%d, n=%d)", rows, cols, n), g.downF32(y, n*rows), want, mag, rows)
	})
}

// TestWeightKernelAllocs holds the decode-step recording of GetRows, MatVec and
// MatMul to zero allocations once the pipelines and descriptor sets exist.
func TestWeightKernelAllocs(t *testing.T) {
	g := newRig(t)
	const rows, cols = 40, 256
	typ := gguf.TypeQ4_K
	wt := g.upWeight(typ, randomWeights(g.r, typ, rows, cols), rows, cols, 0)
	x := g.upF32(randomVector(g.r, 16*cols))
	y := g.buf(4 * 16 * rows)
	ids := g.upI32([]int32{1, 2, 3})
	y3 := [3]vk.Range{g.buf(4 * 3 * 20), g.buf(4 * 3 * 10), g.buf(4 * 3 * 10)}
	bias := g.upF32(randomVector(g.r, rows))
	c, err := g.k.dev.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	for _, tt := range []struct {
		name string
		f    func() error
	}{
		{"GetRows", func() error { return g.k.GetRows(c, wt, ids, 3, x) }},
		{"MatVec", func() error { return g.k.MatVec(c, wt, x, 3, y) }},
		{"MatMul", func() error { return g.k.MatMul(c, wt, x, 16, y) }},
		{"MatVecSplit", func() error { return g.k.MatVecSplit(c, wt, x, 3, [3]int{20, 10, 10}, y3, bias) }},
		{"MatVecGLU", func() error { return g.k.MatVecGLU(c, wt, x, 3, y, false) }},
	} {
		if err := tt.f(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if n := testing.AllocsPerRun(10, func() { _ = tt.f() }); n != 0 {
			t.Errorf("%s records with %v allocations, want 0", tt.name, n)
		}
	}
	if g.k.dev.Features().IntegerDot {
		// The integer-dot path: the quantization (or its reuse, with
		// the barrier skipped) and the matvec.
		g.k.SetIntegerDot(true)
		g.setScratch(cols, 16)
		for _, tt := range []struct {
			name string
			f    func() error
		}{
			{"MatVecIntDot", func() error { return g.k.MatVec(c, wt, x, 3, y) }},
			{"MatVecIntDotReuse", func() error { c.NoBarrier(); return g.k.MatVec(c, wt, x, 3, y) }},
			{"MatVecSplitIntDot", func() error { return g.k.MatVecSplit(c, wt, x, 3, [3]int{20, 10, 10}, y3, bias) }},
			{"MatVecGLUIntDot", func() error { return g.k.MatVecGLU(c, wt, x, 3, y, true) }},
		} {
			if err := tt.f(); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if n := testing.AllocsPerRun(10, func() { _ = tt.f() }); n != 0 {
				t.Errorf("%s records with %v allocations, want 0", tt.name, n)
			}
		}
		g.k.SetIntegerDot(false)
	}
	// Batch sizes vary every step: the bindings, hence the cached
	// descriptor sets, must not.
	for n := 9; n <= 16; n++ {
		if err := g.k.MatMul(c, wt, x, n, y); err != nil {
			t.Fatalf("MatMul(n=%d): %v", n, err)
		}
	}
	names, _ := kernelsFor(typ)
	p, err := g.k.Pipeline(names.matmul, 3, uint32(unsafe.Sizeof(MatVecPush{})), matmulWG, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.CachedSets(); got != 1 {
		t.Errorf("MatMul over batch sizes 9..16 cached %d descriptor sets, want 1", got)
	}
}

// TestWeightKernelErrors checks that bad shapes and ranges are reported,
// not dispatched.
func TestWeightKernelErrors(t *testing.T) {
	g := newRig(t)
	w := g.upWeight(gguf.TypeQ4_0, randomWeights(g.r, gguf.TypeQ4_0, 4, 64), 4, 64, 0)
	x := g.buf(4 * 64 * 2)
	y := g.buf(4 * 4 * 2)
	ids := g.upI32([]int32{0, 1})
	short := w
	short.Data.Size--
	wrongCols := w
	wrongCols.Cols = 48
	unsupported := w
	unsupported.Type = gguf.TypeIQ2_XXS
	c, err := g.k.dev.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"MatVec short weight", g.k.MatVec(c, short, x, 2, y)},
		{"MatVec cols not whole blocks", g.k.MatVec(c, wrongCols, x, 2, y)},
		{"MatVec unsupported type", g.k.MatVec(c, unsupported, x, 2, y)},
		{"MatVec short x", g.k.MatVec(c, w, x.Sub(0, 4*64*2-4), 2, y)},
		{"MatVec short y", g.k.MatVec(c, w, x, 2, y.Sub(0, 4*4*2-4))},
		{"MatVec no columns", g.k.MatVec(c, w, x, 0, y)},
		{"MatMul no buffer", g.k.MatMul(c, Weight{Type: gguf.TypeQ4_0, Rows: 4, Cols: 64}, x, 2, y)},
		{"GetRows short dst", g.k.GetRows(c, w, ids, 2, x.Sub(0, 4*64*2-4))},
		{"GetRows short ids", g.k.GetRows(c, w, ids.Sub(0, 4), 2, x)},
		{"GetRows unsupported type", g.k.GetRows(c, unsupported, ids, 2, x)},
	} {
		if tt.err == nil {
			t.Errorf("%s: succeeded, want an error", tt.name)
		}
	}
	if n := c.Dispatches(); n != 0 {
		t.Errorf("failed calls recorded %d dispatches, want 0", n)
	}
}

// TestPrepareWeight checks that after PrepareWeight, called alone or
// inside PrepareAll (which compiles what it collects at once), no MatVec or
// MatMul step creates a pipeline.
func TestPrepareWeight(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("PrepareAll=%v", all), func(t *testing.T) {
			g := newRig(t)
			prepare := func(typ gguf.GGMLType, rows, cols int, add bool) error {
				if !all {
					return g.k.PrepareWeight(typ, rows, cols, add)
				}
				return g.k.PrepareAll(func() error { return g.k.PrepareWeight(typ, rows, cols, add) })
			}
			for _, tt := range []struct {
				typ  gguf.GGMLType
				cols int
			}{{gguf.TypeQ4_K, 512}, {gguf.TypeQ8_0, 64}, {gguf.TypeF16, 132}} {
				const rows = 9
				w := g.upWeight(tt.typ, randomWeights(g.r, tt.typ, rows, tt.cols), rows, tt.cols, 0)
				x := g.upF32(randomVector(g.r, 16*tt.cols))
				y := g.buf(4 * 16 * rows)
				for _, add := range []bool{false, true} {
					mul := g.k.MulMat
					if add {
						mul = g.k.MulMatAdd
					}
					if err := prepare(tt.typ, rows, tt.cols, add); err != nil {
						t.Fatalf("PrepareWeight(%v, %d, %v): %v", tt.typ, tt.cols, add, err)
					}
					before := len(g.k.pipes)
					if all && before == 0 {
						t.Fatal("PrepareAll created no pipelines")
					}
					g.run(func(c *vk.Cmd) error {
						for n := 1; n <= 16; n++ {
							if err := mul(c, w, x, n, y); err != nil {
								return err
							}
						}
						return nil
					})
					if after := len(g.k.pipes); after != before {
						t.Errorf("PrepareWeight(%v, %d, %v): products over 1..16 columns created %d more pipelines, want 0", tt.typ, tt.cols, add, after-before)
					}
				}
			}
			if err := prepare(gguf.TypeQ4_0, 9, 48, false); err == nil {
				t.Error("PrepareWeight(Q4_0, 48 columns) succeeded, want an error")
			}
		})
	}
}

// TestWeightKernelsDeterministic runs MatVec and MatMul twice on the same
// inputs: the outputs must be bit-identical (fixed reduction order), which
// greedy decoding relies on.
func TestWeightKernelsDeterministic(t *testing.T) {
	g := newRig(t)
	const rows, cols = 77, 512
	typ := gguf.TypeQ6_K
	w := g.upWeight(typ, randomWeights(g.r, typ, rows, cols), rows, cols, 0)
	for _, n := range []int{5, 40} {
		x := g.upF32(randomVector(g.r, n*cols))
		var out [2][]uint32
		for i := range out {
			y := g.buf(4 * n * rows)
			g.run(func(c *vk.Cmd) error { return g.k.MulMat(c, w, x, n, y) })
			out[i] = g.downU32(y, n*rows)
		}
		for i := range out[0] {
			if out[0][i] != out[1][i] {
				t.Fatalf("MulMat(%v %dx%d, n=%d) y[%d] = %#x then %#x, want identical runs", typ, rows, cols, n, i, out[0][i], out[1][i])
			}
		}
	}
}
