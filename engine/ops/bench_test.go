package ops

import (
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// TestStepRecordAllocs holds recording and submitting a decode step's
// non-matmul kernels to zero allocations once pipelines and descriptor sets
// are cached.
func TestStepRecordAllocs(t *testing.T) {
	g := newRig(t)
	const rows, heads, dim = 2, 4, 64
	x, w, y := g.upF32(g.randn(rows*heads*dim, 1)), g.upF32(g.randn(heads*dim, 1)), g.buf(4*rows*heads*dim)
	p := AttnParams{Rows: rows, Heads: heads, KVHeads: 2, HeadDim: dim, Causal: true, Scale: 0.125,
		Cache: KVParams{Slots: 2, NCtx: 16, KVDim: 2 * dim, Pages: 2, PageSize: 16}}
	kc, vc := g.buf(2*2*16*2*dim), g.buf(2*2*16*2*dim)
	slot, pos, table := g.upI32([]int32{0, 1}), g.upI32([]int32{3, 7}), g.upI32([]int32{1, 0})
	rope := RoPEParams{Rows: rows, Heads: heads, HeadDim: dim, FreqBase: 10000}
	// Every op's error is checked: a step whose recording failed would
	// allocate nothing too.
	record := func(c *vk.Cmd) error {
		for _, err := range []error{
			g.k.RMSNorm(c, y, x, w, rows, heads*dim, 1e-5),
			g.k.RoPE(c, y, y, pos, vk.Range{}, rope),
			g.k.KVWrite(c, kc, y.Sub(0, 4*rows*2*dim), slot, pos, table, rows, p.Cache),
			g.k.KVWrite(c, vc, y.Sub(0, 4*rows*2*dim), slot, pos, table, rows, p.Cache),
			g.k.Attention(c, x, y, kc, vc, slot, pos, table, p),
			g.k.SwiGLU(c, y, x, y, rows*heads*dim),
			g.k.Add(c, x, x, y, rows*heads*dim, rows*heads*dim),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	}
	step := func() {
		c, err := g.k.dev.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := record(c); err != nil {
			c.Abort()
			t.Fatalf("recording a step: %v", err)
		}
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	step() // create pipelines and descriptor sets
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Errorf("recording and submitting a step: %v allocations, want 0", n)
	}
	vktest.Check(t, g.k.dev)
}

// benchRig opens the default device ($VKLLM_DEVICE) without validation,
// which would distort timings.
func benchRig(b *testing.B) *rig {
	if devs, err := vk.Devices(vk.Options{}); err != nil || len(devs) == 0 {
		b.Skipf("no Vulkan device: %v", err)
	}
	d, err := vk.Open(vk.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := d.Close(); err != nil {
			b.Error(err)
		}
	})
	k := New(d)
	b.Cleanup(k.Close)
	t := &testing.T{}
	return &rig{t: t, k: k, r: newRand(b)}
}

// runN records n copies of f into one graph per iteration and reports the
// bytes f moves per call as throughput.
func runN(b *testing.B, g *rig, bytes int64, f func(c *vk.Cmd) error) {
	const perGraph = 8
	b.SetBytes(bytes * perGraph)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := g.k.dev.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < perGraph; j++ {
			if err := f(c); err != nil {
				c.Abort()
				b.Fatal(err)
			}
		}
		if err := c.Submit(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRMSNorm(b *testing.B) {
	for _, sh := range []struct {
		name       string
		rows, cols int
	}{{"decode-4096", 1, 4096}, {"prefill-512x4096", 512, 4096}} {
		b.Run(sh.name, func(b *testing.B) {
			g := benchRig(b)
			n := sh.rows * sh.cols
			x, w, y := g.mustUp(b, g.randn(n, 1)), g.mustUp(b, g.randn(sh.cols, 1)), g.mustUp(b, make([]float32, n))
			runN(b, g, int64(8*n+4*sh.cols), func(c *vk.Cmd) error { return g.k.RMSNorm(c, y, x, w, sh.rows, sh.cols, 1e-5) })
		})
	}
}

// benchPageSize is the KV page size BenchmarkAttention runs with
// ($VKLLM_BENCH_PAGE overrides DefaultPageSize, to compare page sizes).
func benchPageSize() int {
	if n, err := strconv.Atoi(os.Getenv("VKLLM_BENCH_PAGE")); err == nil && n > 0 {
		return n
	}
	return DefaultPageSize
}

func BenchmarkAttention(b *testing.B) {
	for _, sh := range []struct {
		name                string
		rows, ctx           int
		heads, kvHeads, dim int
		splits              int
	}{
		{"decode-ctx512-32h-8kv", 1, 512, 32, 8, 128, 0},
		{"decode-ctx2048-32h-8kv", 1, 2048, 32, 8, 128, 0},
		{"decode-ctx2048-32h-8kv-split8", 1, 2048, 32, 8, 128, 8},
		{"batch4-ctx1024-32h-8kv", 4, 1024, 32, 8, 128, 0},
		// Prefill of a 512-token prompt into one slot of a tiny model
		// (rows at positions 0..511, causal).
		{"prefill512-8h-4kv-d32", 512, 512, 8, 4, 32, 0},
	} {
		b.Run(sh.name, func(b *testing.B) {
			g := benchRig(b)
			p := AttnParams{Rows: sh.rows, Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.dim, Causal: true,
				Scale: float32(1 / math.Sqrt(float64(sh.dim))), Cache: KVParams{Slots: sh.rows, NCtx: sh.ctx, KVDim: sh.kvHeads * sh.dim, PageSize: benchPageSize()},
				Splits: sh.splits}
			if sh.splits > 1 {
				p.Scratch = g.mustUp(b, make([]float32, AttentionScratchBytes(p)/4))
			}
			prefill := sh.rows == sh.ctx
			if prefill {
				p.Cache.Slots = 1
			}
			// Each slot's pages in a scrambled order (a pool shared by
			// sequences that grew in turns).
			tp := p.Cache.TablePages()
			p.Cache.Pages = p.Cache.Slots * tp
			table := make([]int32, p.Cache.Pages)
			for i, pg := range g.r.Perm(p.Cache.Pages) {
				table[i] = int32(pg)
			}
			nc := p.Cache.Pages * p.Cache.PageSize * p.Cache.KVDim
			half := make([]uint16, nc)
			for i := range half {
				half[i] = F16FromF32(float32(g.r.NormFloat64()))
			}
			kc, vc := g.mustUpF16(b, half), g.mustUpF16(b, half)
			q := g.mustUp(b, g.randn(sh.rows*sh.heads*sh.dim, 1))
			out := g.mustUp(b, make([]float32, sh.rows*sh.heads*sh.dim))
			slots, poss := make([]int32, sh.rows), make([]int32, sh.rows)
			for i := range slots {
				slots[i], poss[i] = int32(i), int32(sh.ctx-1)
				if prefill {
					slots[i], poss[i] = 0, int32(i)
				}
			}
			sr, pr, tr := g.mustUpI32(b, slots), g.mustUpI32(b, poss), g.mustUpI32(b, table)
			// Bytes: the K and V rows each row reads, plus q and out.
			bytes := int64(sh.rows*sh.ctx*p.Cache.KVDim*2*2 + 2*4*sh.rows*sh.heads*sh.dim)
			runN(b, g, bytes, func(c *vk.Cmd) error { return g.k.Attention(c, out, q, kc, vc, sr, pr, tr, p) })
		})
	}
}

func (g *rig) mustUp(b *testing.B, x []float32) vk.Range {
	r, err := g.k.dev.NewBuffer(uint64(4*len(x)), vk.DeviceBuffer)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Write(0, f32Bytes(x)); err != nil {
		b.Fatal(err)
	}
	return r.All()
}

func (g *rig) mustUpF16(b *testing.B, x []uint16) vk.Range {
	buf := make([]byte, 2*len(x))
	for i, v := range x {
		buf[2*i], buf[2*i+1] = byte(v), byte(v>>8)
	}
	r, err := g.k.dev.NewBuffer(uint64(len(buf)), vk.DeviceBuffer)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Write(0, buf); err != nil {
		b.Fatal(err)
	}
	return r.All()
}

func (g *rig) mustUpI32(b *testing.B, x []int32) vk.Range {
	f := make([]float32, len(x))
	for i, v := range x {
		f[i] = math.Float32frombits(uint32(v))
	}
	return g.mustUp(b, f)
}

// TestSetsStableAcrossSizes checks that steps of different batch sizes over
// the same buffers reuse one descriptor set per pipeline.
func TestSetsStableAcrossSizes(t *testing.T) {
	g := newRig(t)
	g.k.SetSubgroups(false)
	defer func(rows bool) { g.k.rowKernels = rows }(g.k.rowKernels)
	g.k.rowKernels = false // the workgroup kernel, whatever the device
	const maxRows, cols = 9, 100
	x, w, y := g.upF32(g.randn(maxRows*cols, 1)), g.upF32(g.randn(cols, 1)), g.buf(4*maxRows*cols)
	for rows := 1; rows <= maxRows; rows++ {
		// Ranges cut to the step's size, as an engine would pass them.
		n := uint64(4 * rows * cols)
		g.run(func(c *vk.Cmd) error { return g.k.RMSNorm(c, y.Sub(0, n), x.Sub(0, n), w, rows, cols, 1e-6) })
	}
	p, err := g.k.Pipeline("rms_norm_mul_f32", 3, 12, g.k.WG())
	if err != nil {
		t.Fatal(err)
	}
	if n := p.CachedSets(); n != 1 {
		t.Errorf("CachedSets() after RMSNorm over 1..%d rows = %d, want 1", maxRows, n)
	}
}

// BenchmarkGatedDeltaNet compares GatedDeltaNet (token by token) with
// GatedDeltaNetChunked on a prompt: one run of 512 rows from position 0,
// 8 value heads (2 key heads) of 128, Qwen3.5's head size. Bytes: q, k, v
// and out of every row, the state read and written.
func BenchmarkGatedDeltaNet(b *testing.B) {
	const rows = 512
	p := DeltaNetParams{KHeads: 2, VHeads: 8, HeadK: 128, HeadV: 128, Slots: 1, Eps: 1e-6}
	for _, k := range []string{"token", "chunked"} {
		b.Run(k+"-prompt512-8h-128", func(b *testing.B) {
			g := benchRig(b)
			op := g.k.GatedDeltaNet
			if k == "chunked" {
				op = g.k.GatedDeltaNetChunked
			}
			qkv := g.mustUp(b, g.randn(rows*p.QKVCols(), 1))
			beta, alpha := g.mustUp(b, g.randn(rows*p.VHeads, 1)), g.mustUp(b, g.randn(rows*p.VHeads, 1))
			a := g.randn(p.VHeads, 0.5)
			for i, v := range a {
				a[i] = -float32(math.Exp(float64(v)))
			}
			dt, ar := g.mustUp(b, g.randn(p.VHeads, 1)), g.mustUp(b, a)
			state, out := g.mustUp(b, make([]float32, p.StateLen())), g.mustUp(b, make([]float32, rows*p.VHeads*p.HeadV))
			runs := g.mustUpI32(b, []int32{0, 0, rows, 0})
			bytes := int64(4 * (rows*(p.QKVCols()+p.VHeads*p.HeadV) + 2*p.StateLen()))
			runN(b, g, bytes, func(c *vk.Cmd) error { return op(c, out, qkv, beta, alpha, dt, ar, state, runs, 1, p) })
		})
	}
}
