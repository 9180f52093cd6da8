package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/sweep"
	"github.com/vkllm/vkllm/vk"
)

// scatteredTable returns a page table of kv.Slots rows that maps every
// position of every slot to a distinct page, in a scrambled order, with
// kv.Pages = slots * pages per slot + spare (unused pages).
func scatteredTable(g *rig, kv *KVParams, spare int) []int32 {
	tp := kv.TablePages()
	kv.Pages = kv.Slots*tp + spare
	perm := g.r.Perm(kv.Pages)
	table := make([]int32, kv.Slots*tp)
	for i := range table {
		table[i] = int32(perm[i])
	}
	return table
}

// TestPagedAttentionShared checks that two slots whose tables name the same
// pages (a shared prompt prefix) see the same keys: rows of both slots at
// the same positions get the same output, and it equals the reference.
func TestPagedAttentionShared(t *testing.T) {
	g := newRig(t)
	for _, ps := range []int{1, 4, 16, 32} {
		t.Run(fmt.Sprintf("page%d", ps), func(t *testing.T) {
			p := AttnParams{Rows: 4, Heads: 4, KVHeads: 2, HeadDim: 32, Causal: true, Scale: 0.2,
				Cache: KVParams{Slots: 2, NCtx: 70, KVDim: 64, PageSize: ps}}
			table := scatteredTable(g, &p.Cache, 3)
			tp := p.Cache.TablePages()
			copy(table[tp:], table[:tp]) // slot 1 shares slot 0's pages
			nc := p.Cache.Pages * ps * p.Cache.KVDim
			kc, vc := make([]uint16, nc), make([]uint16, nc)
			for i := range kc {
				kc[i] = F16FromF32(float32(g.r.NormFloat64()))
				vc[i] = F16FromF32(float32(g.r.NormFloat64()))
			}
			q1 := g.randn(p.Heads*p.HeadDim, 1)
			q := append(append(append([]float32(nil), q1...), q1...), g.randn(2*p.Heads*p.HeadDim, 1)...)
			slot, pos := []int32{0, 1, 0, 1}, []int32{66, 66, int32(ps), int32(ps - 1)}
			out := g.buf(4 * len(q))
			defer func(rows bool) { g.k.rowKernels = rows }(g.k.rowKernels)
			for _, rows := range []bool{false, true} {
				g.k.rowKernels = rows
				g.run(func(c *vk.Cmd) error {
					return g.k.Attention(c, out, g.upF32(q), g.upF16(kc), g.upF16(vc), g.upI32(slot), g.upI32(pos), g.upI32(table), p)
				})
				got := g.downF32(out, len(q))
				n := p.Heads * p.HeadDim
				for i := 0; i < n; i++ {
					if got[i] != got[n+i] {
						t.Fatalf("shared pages: slot 1 output[%d] = %g, slot 0's %g", i, got[n+i], got[i])
					}
				}
				want := make([]float32, len(q))
				if err := RefAttention(want, q, kc, vc, slot, pos, table, nil, p); err != nil {
					t.Fatal(err)
				}
				closeTo(t, fmt.Sprintf("Attention (per-row kernel %v)", rows), got, want, 1e-4)
			}
		})
	}
}

func TestAttention(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	cases := []struct {
		name string
		p    AttnParams
		pos  []int32
		slot []int32
	}{
		{"decode", AttnParams{Rows: 1, Heads: 4, KVHeads: 4, HeadDim: 64, Causal: true}, []int32{37}, []int32{0}},
		{"gqa-mixed-slots", AttnParams{Rows: 5, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true}, []int32{0, 1, 2, 300, 129}, []int32{1, 1, 1, 0, 2}},
		{"odd-dim", AttnParams{Rows: 3, Heads: 3, KVHeads: 1, HeadDim: 40, Causal: true}, []int32{4, 5, 250}, []int32{2, 2, 0}},
		{"dim18", AttnParams{Rows: 2, Heads: 6, KVHeads: 2, HeadDim: 18, Causal: true}, []int32{9, 140}, []int32{1, 0}},
		{"mha-dim256", AttnParams{Rows: 2, Heads: 2, KVHeads: 2, HeadDim: 256, Causal: true}, []int32{70, 3}, []int32{0, 1}},
		{"gqa8-dim256", AttnParams{Rows: 1, Heads: 8, KVHeads: 1, HeadDim: 256, Causal: true}, []int32{200}, []int32{2}},
		{"noncausal", AttnParams{Rows: 4, Heads: 4, KVHeads: 4, HeadDim: 32, NKV: 23}, []int32{0, 1, 2, 3}, []int32{1, 1, 1, 1}},
		{"bad-slot", AttnParams{Rows: 2, Heads: 2, KVHeads: 2, HeadDim: 16, Causal: true}, []int32{5, 5}, []int32{9, 0}},
		// Prefill-shaped batches (flash_attn_tiled for tiles of one slot).
		{"prefill37", AttnParams{Rows: 37, Heads: 8, KVHeads: 4, HeadDim: 32, Causal: true}, run(37, 0), fill(37, 1)},
		{"prefill130-gqa4-d64", AttnParams{Rows: 130, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true}, run(130, 0), fill(130, 0)},
		{"prefill-continued-d128", AttnParams{Rows: 40, Heads: 4, KVHeads: 2, HeadDim: 128, Causal: true}, run(40, 230), fill(40, 2)},
		{"prefill-d18", AttnParams{Rows: 41, Heads: 6, KVHeads: 2, HeadDim: 18, Causal: true}, run(41, 3), fill(41, 1)},
		{"prefill-d40", AttnParams{Rows: 33, Heads: 3, KVHeads: 1, HeadDim: 40, Causal: true}, run(33, 100), fill(33, 0)},
		{"prefill-d256", AttnParams{Rows: 34, Heads: 4, KVHeads: 2, HeadDim: 256, Causal: true}, run(34, 0), fill(34, 2)},
		{"prefill-mha-d32", AttnParams{Rows: 70, Heads: 3, KVHeads: 3, HeadDim: 32, Causal: true}, run(70, 7), fill(70, 1)},
		{"prefill-noncausal", AttnParams{Rows: 45, Heads: 4, KVHeads: 4, HeadDim: 32, NKV: 150}, run(45, 0), fill(45, 2)},
		{"prefill-shuffled", AttnParams{Rows: 50, Heads: 4, KVHeads: 1, HeadDim: 64, Causal: true}, shuffled(50, 280), fill(50, 0)},
		// Decode rows of other slots (and one out of range) before, inside
		// and after a prefill run: tiles of several slots fall back to the
		// per-row kernel.
		{"prefill-mixed", AttnParams{Rows: 45, Heads: 8, KVHeads: 4, HeadDim: 32, Causal: true},
			append(append([]int32{290, 17, 5}, run(39, 0)...), 250, 60, 299), append(append([]int32{0, 2, 9}, fill(39, 1)...), 2, -1, 0)},
		{"decode-many-slots", AttnParams{Rows: 40, Heads: 4, KVHeads: 2, HeadDim: 64, Causal: true}, shuffled(40, 300), cycle(40, 3)},
		// Sliding windows (Gemma): rows before, at and past the window.
		{"window16", AttnParams{Rows: 5, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true, Window: 16}, []int32{0, 10, 15, 16, 300}, []int32{1, 1, 1, 0, 2}},
		{"prefill-window7", AttnParams{Rows: 37, Heads: 4, KVHeads: 2, HeadDim: 32, Causal: true, Window: 7}, run(37, 0), fill(37, 1)},
		// Gemma 2's soft-capped scores (a cap below the scores' range).
		{"softcap", AttnParams{Rows: 36, Heads: 4, KVHeads: 2, HeadDim: 64, Causal: true, Window: 9, SoftCap: 1.5}, run(36, 0), fill(36, 2)},
	}
	// The CPU and the GPU workgroup sizes, whichever this device is, and
	// the CPU devices' per-row kernel (flash_attn_rows, no subgroup
	// variant).
	defer func(wg uint32, rows bool) { g.k.attnWG, g.k.rowKernels = wg, rows }(g.k.attnWG, g.k.rowKernels)
	for ci, cfg := range []struct {
		wg   uint32
		rows bool
	}{{min(g.k.wg, cpuAttnWG), false}, {min(g.k.wg, 128), false}, {min(g.k.wg, cpuAttnWG), true}} {
		g.k.attnWG, g.k.rowKernels = cfg.wg, cfg.rows
		wg := cfg.wg
		variants := bothSampled
		if cfg.rows {
			variants = func(t *testing.T, _ *rig, _ int, f func(t *testing.T)) { t.Run("rows", f) }
		}
		for i, tc := range cases {
			if !cfg.rows && i > 0 && !sweep.Pick(i, ci, 2) {
				continue // CI: each case past the first on one workgroup size, alternating
			}
			if cfg.rows && !sweep.Long() && tc.p.HeadDim*attnRowsHeads(tc.p.Heads/tc.p.KVHeads, tc.p.HeadDim) > 256 {
				// The per-row kernel keeps GPW heads' q and accumulators
				// in registers: at 512 or 1024 of them lavapipe's LLVM
				// takes 20 to 85 s on a cold cache. mha-dim256 and
				// prefill-continued-d128 run its largest register sets
				// in CI; make test-long runs these too.
				continue
			}
			for j, splits := range []int{0, 3, 7} {
				if j > 0 && !sweep.Pick(i/2, j-1, 2) {
					continue // CI: 3 or 7 splits, alternating over each workgroup size's cases
				}
				t.Run(fmt.Sprintf("wg%d/%s/splits=%d", wg, tc.name, splits), func(t *testing.T) {
					variants(t, g, i+j, func(t *testing.T) {
						p := tc.p
						// Pages of 16 positions in a scrambled order: every
						// row crosses page boundaries.
						p.Cache = KVParams{Slots: 3, NCtx: 301, KVDim: p.KVHeads * p.HeadDim, PageSize: 16}
						p.Splits = splits
						checkAttention(t, g, p, tc.slot, tc.pos)
					})
				})
			}
		}
	}
}

// run returns positions p0, p0+1, ... for n rows.
func run(n int, p0 int32) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = p0 + int32(i)
	}
	return x
}

// fill returns n copies of v.
func fill(n int, v int32) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = v
	}
	return x
}

// cycle returns 0, 1, ..., m-1, 0, 1, ... for n rows.
func cycle(n int, m int32) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(i) % m
	}
	return x
}

// shuffled returns n distinct positions below limit in a fixed scrambled
// order.
func shuffled(n int, limit int32) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(i*97+13) % limit
	}
	return x
}

// TestAttentionTiles checks which attention kernels serve prefill batches:
// the query-tiled one wherever a tile fits, on both workgroup sizes.
func TestAttentionTiles(t *testing.T) {
	g := newRig(t)
	for _, wg := range []uint32{min(g.k.wg, cpuAttnWG), min(g.k.wg, 128)} {
		for _, tc := range []struct {
			group, dim int
			want       attnTile
		}{
			{2, 32, attnTile{Rows: 16, GPW: 2}},
			{4, 64, attnTile{Rows: 8, GPW: 4}},
			{1, 32, attnTile{Rows: 16, GPW: 1}},
			{3, 18, attnTile{Rows: 8, GPW: 3}},
		} {
			if got, ok := g.k.attnTileFor(tc.group, tc.dim, wg); !ok || got != tc.want {
				t.Errorf("wg %d: attnTileFor(%d, %d) = %+v, %v; want %+v", wg, tc.group, tc.dim, got, ok, tc.want)
			}
		}
		for _, dim := range []int{40, 64, 128, 256} {
			if _, ok := g.k.attnTileFor(2, dim, wg); !ok {
				t.Errorf("wg %d: no tile for head_dim %d", wg, dim)
			}
		}
	}
}

// TestDecodeStep records what one layer's attention does in a step, in one
// graph: RoPE on q and k, KVWrite of k and v, Attention, for rows of two
// sequences (one prefilling, one decoding) whose earlier positions are
// already cached, and checks the output against the references chained on
// the CPU.
func TestDecodeStep(t *testing.T) {
	g := newRig(t)
	const heads, kvHeads, dim = 4, 2, 32
	kv := KVParams{Slots: 2, NCtx: 40, KVDim: kvHeads * dim, PageSize: 4}
	table := scatteredTable(g, &kv, 2)
	slot := []int32{1, 1, 1, 0}
	pos := []int32{5, 6, 7, 20}
	rows := len(slot)
	nc := kv.Pages * kv.PageSize * kv.KVDim
	kc, vc := make([]uint16, nc), make([]uint16, nc)
	for i := range kc { // earlier positions; the rest is overwritten or unseen
		kc[i] = F16FromF32(float32(g.r.NormFloat64()))
		vc[i] = F16FromF32(float32(g.r.NormFloat64()))
	}
	q, k, v := g.randn(rows*heads*dim, 1), g.randn(rows*kv.KVDim, 1), g.randn(rows*kv.KVDim, 1)
	rope := RoPEParams{Rows: rows, Heads: heads, HeadDim: dim, FreqBase: 10000, NeoX: true}
	ap := AttnParams{Rows: rows, Heads: heads, KVHeads: kvHeads, HeadDim: dim, Cache: kv, Causal: true, Scale: 0.17}

	qr, kr, vr := g.upF32(q), g.upF32(k), g.upF32(v)
	kcr, vcr := g.upF16(kc), g.upF16(vc)
	sr, pr, out, tr := g.upI32(slot), g.upI32(pos), g.buf(4*len(q)), g.upI32(table)
	g.run(func(c *vk.Cmd) error {
		if err := g.k.RoPE(c, qr, qr, pr, vk.Range{}, rope); err != nil {
			return err
		}
		kRope := rope
		kRope.Heads = kvHeads
		if err := g.k.RoPE(c, kr, kr, pr, vk.Range{}, kRope); err != nil {
			return err
		}
		if err := g.k.KVWrite(c, kcr, kr, sr, pr, tr, rows, kv); err != nil {
			return err
		}
		if err := g.k.KVWrite(c, vcr, vr, sr, pr, tr, rows, kv); err != nil {
			return err
		}
		return g.k.Attention(c, out, qr, kcr, vcr, sr, pr, tr, ap)
	})

	qRef, kRef := make([]float32, len(q)), make([]float32, len(k))
	if err := RefRoPE(qRef, q, pos, nil, rope); err != nil {
		t.Fatal(err)
	}
	kRope := rope
	kRope.Heads = kvHeads
	if err := RefRoPE(kRef, k, pos, nil, kRope); err != nil {
		t.Fatal(err)
	}
	RefKVWrite(kc, kRef, slot, pos, table, rows, kv)
	RefKVWrite(vc, v, slot, pos, table, rows, kv)
	want := make([]float32, len(q))
	if err := RefAttention(want, qRef, kc, vc, slot, pos, table, nil, ap); err != nil {
		t.Fatal(err)
	}
	// f16 rounding of k in the cache may differ by an ulp where the GPU's
	// rotated k differs from the reference's in the last bit: f16 tolerance.
	closeTo(t, "decode step", g.downF32(out, len(q)), want, 1e-3)
}

func TestSplitsFor(t *testing.T) {
	cases := []struct {
		name                string
		groups, keys, units int
		want                int
	}{
		{"h100-decode-8b", 8, 4096, 132, 16},    // one row, 8 kv groups: 16 splits of 256 keys
		{"h100-decode-long", 8, 32768, 132, 33}, // 264 workgroups, 2 per SM
		{"short-context", 8, 300, 132, 1},       // under two splits' worth of keys
		{"keys-bound", 8, 600, 132, 2},          // floor(600/256)
		{"full-gpu", 264, 8192, 132, 1},         // enough workgroups already
		{"nearly-full", 200, 8192, 132, 2},      // ceil(264/200)
		{"many-rows", 1000, 8192, 132, 1},
		{"one-group", 1, 1 << 20, 132, 264},
		{"small-gpu", 8, 8192, 8, 2}, // 16 workgroups on 8 units
		{"guessed-discrete", 8, 8192, 16, 4},
		{"no-units", 8, 8192, 0, 1},
	}
	for _, tc := range cases {
		if got := splitsFor(tc.groups, tc.keys, tc.units); got != tc.want {
			t.Errorf("%s: splitsFor(%d, %d, %d) = %d, want %d", tc.name, tc.groups, tc.keys, tc.units, got, tc.want)
		}
	}
}

// TestAttentionSplits checks the split count the engine asks for: from the
// rows' real keys (Keys), the window, the compute units and the batch, and
// none on CPU devices by default.
func TestAttentionSplits(t *testing.T) {
	g := newRig(t)
	defer g.k.SetComputeUnits(0)
	base := AttnParams{Rows: 1, Heads: 32, KVHeads: 8, HeadDim: 128, Causal: true,
		Cache: KVParams{Slots: 4, NCtx: 32768, KVDim: 8 * 128, Pages: 8, PageSize: 16}}
	gpw := g.k.attnHeadsPerGroup(4, 128, g.k.attnWG)
	g.k.SetComputeUnits(0)
	if g.k.dev.Info().Type == vk.TypeCPU {
		p := base
		p.Keys = 32768
		if got := g.k.AttentionSplits(p); got != 1 {
			t.Errorf("AttentionSplits(%d keys) on a CPU device = %d, want 1 (no splits by default)", p.Keys, got)
		}
	}
	g.k.SetComputeUnits(132)
	cases := []struct {
		name               string
		rows, keys, window int
		softcap            float32
		want               int
	}{
		{"decode-4096", 1, 4096, 0, 0, splitsFor(32/gpw, 4096, 132)},
		{"decode-short", 1, 300, 0, 0, 1},
		{"context-not-keys", 1, 0, 0, 0, splitsFor(32/gpw, 32768, 132)}, // Keys unset: the whole context
		{"window", 1, 20000, 1024, 0, splitsFor(32/gpw, 1024, 132)},
		{"window-short", 1, 20000, 300, 0, 1},
		{"softcap", 1, 4096, 0, 30, splitsFor(32/gpw, 4096, 132)},
		{"decode-batch", 4, 8192, 0, 0, splitsFor(4*32/gpw, 8192, 132)},
	}
	for _, tc := range cases {
		p := base
		p.Rows, p.Keys, p.Window, p.SoftCap = tc.rows, tc.keys, tc.window, tc.softcap
		if got := g.k.AttentionSplits(p); got != tc.want {
			t.Errorf("%s: AttentionSplits(%d rows, %d keys, window %d) = %d, want %d", tc.name, tc.rows, tc.keys, tc.window, got, tc.want)
		}
	}
	// A batch the tiled kernel serves (prefill) keeps its path.
	if tile, ok := g.k.attnTileFor(4, 128, g.k.attnWG); ok {
		p := base
		p.Rows, p.Keys = 2*tile.Rows, 8192
		p.Cache.NCtx = 8192 // CPU devices tile at most cpuTiledMaxKeys
		if got := g.k.AttentionSplits(p); got != 1 {
			t.Errorf("AttentionSplits(%d rows: tiled) = %d, want 1", p.Rows, got)
		}
	}
	// The reservation covers every batch up to its rows.
	p := base
	p.Rows = 64
	most := g.k.MaxAttentionScratch(p)
	for rows := 1; rows <= p.Rows; rows++ {
		q := p
		q.Rows, q.Keys = rows, 32768
		q.Splits = g.k.AttentionSplits(q)
		if need := AttentionScratchBytes(q); need > most {
			t.Fatalf("MaxAttentionScratch(%d rows) = %d bytes, but %d rows need %d", p.Rows, most, rows, need)
		}
	}
	if most == 0 {
		t.Errorf("MaxAttentionScratch(%+v) = 0, want room for decode splits", p)
	}
}

// TestAttentionSplitKeys runs split dispatches whose splits divide the
// rows' real keys (Keys) rather than the context: rows of very different
// lengths, a Keys shorter than a row (its last split takes the rest),
// windows and a non-causal dispatch (which ignores Keys).
func TestAttentionSplitKeys(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	cases := []struct {
		name      string
		p         AttnParams
		pos, slot []int32
	}{
		{"uneven-rows", AttnParams{Rows: 3, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true, Keys: 600, Splits: 4}, []int32{599, 4, 130}, []int32{0, 1, 2}},
		{"one-row", AttnParams{Rows: 1, Heads: 4, KVHeads: 4, HeadDim: 32, Causal: true, Keys: 513, Splits: 2}, []int32{512}, []int32{1}},
		{"keys-short", AttnParams{Rows: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Causal: true, Keys: 100, Splits: 3}, []int32{700, 50}, []int32{0, 1}},
		{"more-splits-than-keys", AttnParams{Rows: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Causal: true, Keys: 3, Splits: 5}, []int32{2, 0}, []int32{2, 1}},
		{"window", AttnParams{Rows: 3, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true, Keys: 700, Window: 90, Splits: 3}, []int32{699, 40, 95}, []int32{0, 1, 2}},
		{"noncausal", AttnParams{Rows: 2, Heads: 4, KVHeads: 4, HeadDim: 32, NKV: 333, Keys: 5, Splits: 3}, []int32{0, 1}, []int32{1, 1}},
	}
	defer func(wg uint32) { g.k.attnWG = wg }(g.k.attnWG)
	for _, wg := range []uint32{min(g.k.wg, cpuAttnWG), min(g.k.wg, 128)} {
		g.k.attnWG = wg
		for _, tc := range cases {
			t.Run(fmt.Sprintf("wg%d/%s", wg, tc.name), func(t *testing.T) {
				both(t, g, func(t *testing.T) {
					p := tc.p
					p.Cache = KVParams{Slots: 3, NCtx: 720, KVDim: p.KVHeads * p.HeadDim, PageSize: 16}
					checkAttention(t, g, p, tc.slot, tc.pos)
				})
			})
		}
	}
}

// TestAttentionLongContext attends over thousands of keys with every
// kernel. A CPU driver may bound the loop iterations of one invocation
// (lavapipe stops a shader's loops after 65535 back-edges in all), which
// the per-row kernel's walk over the keys, with loops over the head
// dimension inside, would pass at about a thousand keys.
func TestAttentionLongContext(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	defer func(wg uint32, rows bool) { g.k.attnWG, g.k.rowKernels = wg, rows }(g.k.attnWG, g.k.rowKernels)
	for _, cfg := range []struct {
		wg   uint32
		rows bool
	}{{min(g.k.wg, cpuAttnWG), false}, {min(g.k.wg, cpuAttnWG), true}} {
		g.k.attnWG, g.k.rowKernels = cfg.wg, cfg.rows
		for _, hd := range []int{64, 128} {
			for _, shape := range []string{"decode", "split", "prefill"} {
				t.Run(fmt.Sprintf("rows=%v/d%d/%s", cfg.rows, hd, shape), func(t *testing.T) {
					slot, pos := []int32{0, 1, 0}, []int32{int32(longCtx - 1), 2900, 1100}
					p := AttnParams{Heads: 4, KVHeads: 2, HeadDim: hd, Causal: true}
					switch shape {
					case "split":
						p.Splits = 2
					case "prefill": // the last 64 positions of one slot (flash_attn_tiled)
						slot, pos = make([]int32, 64), run(64, int32(longCtx-64))
					}
					p.Rows = len(pos)
					p.Cache = KVParams{Slots: 2, NCtx: longCtx, KVDim: p.KVHeads * p.HeadDim, PageSize: 16}
					checkAttention(t, g, p, slot, pos)
				})
			}
		}
	}
}

// longCtx is TestAttentionLongContext's context.
const longCtx = 4096

// TestAttentionLongContextCPU runs the kernels a CPU device uses (the
// per-row one) at 32768 positions, past what the tiled kernel's loops
// take there: decode rows and the end of a prefill, which must then go to
// the per-row kernel; a context past cpuRowsMaxKeys is refused.
func TestAttentionLongContextCPU(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	defer func(wg uint32, rows bool) { g.k.attnWG, g.k.rowKernels = wg, rows }(g.k.attnWG, g.k.rowKernels)
	g.k.attnWG, g.k.rowKernels = min(g.k.wg, cpuAttnWG), true
	const n = 32768
	for _, shape := range []string{"decode", "prefill"} {
		t.Run(shape, func(t *testing.T) {
			slot, pos := []int32{0, 1}, []int32{n - 1, 20000}
			if shape == "prefill" {
				slot, pos = make([]int32, 64), run(64, n-64)
			}
			p := AttnParams{Rows: len(pos), Heads: 4, KVHeads: 2, HeadDim: 128, Causal: true}
			p.Cache = KVParams{Slots: 2, NCtx: n, KVDim: p.KVHeads * p.HeadDim, PageSize: 16}
			checkAttention(t, g, p, slot, pos)
		})
	}
	p := AttnParams{Rows: 1, Heads: 4, KVHeads: 2, HeadDim: 64, Causal: true, Scale: 1,
		Cache: KVParams{Slots: 1, NCtx: cpuRowsMaxKeys + 1, KVDim: 128, PageSize: 16}}
	table := scatteredTable(g, &p.Cache, 0)
	nc := p.Cache.Pages * p.Cache.PageSize * p.Cache.KVDim
	kv := g.buf(2 * nc)
	var err error
	g.run(func(c *vk.Cmd) error {
		err = g.k.Attention(c, g.buf(4*p.Heads*p.HeadDim), g.buf(4*p.Heads*p.HeadDim), kv, kv, g.upI32([]int32{0}), g.upI32([]int32{5}), g.upI32(table), p)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "shorter context") {
		t.Errorf("Attention over %d positions on a CPU device: %v, want an error asking for a shorter context", p.Cache.NCtx, err)
	}
}

// checkAttention runs Attention with p (its Cache's pages scattered, its
// scale 1/sqrt(HeadDim), scratch for its splits) over random q, K and V
// and compares it with RefAttention.
func checkAttention(t *testing.T, g *rig, p AttnParams, slot, pos []int32) {
	t.Helper()
	checkAttentionSinks(t, g, p, slot, pos, nil)
}

// checkAttentionSinks is checkAttention with the attention-sink logits
// sinks (one per head; nil: none).
func checkAttentionSinks(t *testing.T, g *rig, p AttnParams, slot, pos []int32, sinks []float32) {
	t.Helper()
	if sinks != nil {
		p.Sinks = g.upF32(sinks)
	}
	table := scatteredTable(g, &p.Cache, 5)
	p.Scale = float32(1 / math.Sqrt(float64(p.HeadDim)))
	if p.Splits > 1 {
		p.Scratch = g.buf(int(AttentionScratchBytes(p)))
	}
	q := g.randn(p.Rows*p.Heads*p.HeadDim, 1)
	nc := p.Cache.Pages * p.Cache.PageSize * p.Cache.KVDim
	kc, vc := make([]uint16, nc), make([]uint16, nc)
	for i := range kc {
		kc[i] = F16FromF32(float32(g.r.NormFloat64()) * 2)
		vc[i] = F16FromF32(float32(g.r.NormFloat64()))
	}
	qr, kr, vr := g.upF32(q), g.upF16(kc), g.upF16(vc)
	sr, pr, out := g.upI32(slot), g.upI32(pos), g.buf(len(q)*4)
	tr := g.upI32(table)
	g.run(func(c *vk.Cmd) error { return g.k.Attention(c, out, qr, kr, vr, sr, pr, tr, p) })
	want := make([]float32, len(q))
	if err := RefAttention(want, q, kc, vc, slot, pos, table, sinks, p); err != nil {
		t.Fatal(err)
	}
	closeTo(t, "Attention", g.downF32(out, len(q)), want, 1e-4)
}

// sinkSets are the attention-sink logits of TestAttentionSinks and
// TestAttentionBatchSinks for heads heads: mixed per head (far below, near
// and far above the scores, which are about N(0, 4) here), all far above
// (the weights of the keys nearly vanish) and all far below (plain
// softmax, nearly).
func sinkSets(heads int) []struct {
	name  string
	sinks []float32
} {
	mixed, high, low := make([]float32, heads), make([]float32, heads), make([]float32, heads)
	for h := range heads {
		mixed[h] = []float32{-20, 0.5, 3, 25, -1.5}[h%5]
		high[h], low[h] = 30, -30
	}
	return []struct {
		name  string
		sinks []float32
	}{{"mixed", mixed}, {"high", high}, {"low", low}}
}

// TestAttentionSinks runs every attention kernel with attention sinks
// (gpt-oss) against RefAttention: the per-row GPU kernel (decode, GQA,
// odd head sizes, an out-of-range slot, sliding windows, soft-capping,
// non-causal rows), its split variants with the combine (3 and 7 splits:
// the sink enters once), the tiled prefill kernel beside the per-row one
// (tiles of several slots), and the CPU devices' flash_attn_rows.
func TestAttentionSinks(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	cases := []struct {
		name      string
		p         AttnParams
		pos, slot []int32
	}{
		{"decode-gqa", AttnParams{Rows: 3, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true}, []int32{0, 130, 299}, []int32{0, 1, 2}},
		{"odd-dim-bad-slot", AttnParams{Rows: 3, Heads: 3, KVHeads: 1, HeadDim: 40, Causal: true}, []int32{4, 250, 5}, []int32{2, 0, 9}},
		{"window16", AttnParams{Rows: 5, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true, Window: 16}, []int32{0, 10, 15, 16, 300}, []int32{1, 1, 1, 0, 2}},
		{"noncausal", AttnParams{Rows: 4, Heads: 4, KVHeads: 4, HeadDim: 32, NKV: 23}, []int32{0, 1, 2, 3}, []int32{1, 1, 1, 1}},
		{"prefill37", AttnParams{Rows: 37, Heads: 8, KVHeads: 4, HeadDim: 32, Causal: true}, run(37, 0), fill(37, 1)},
		{"prefill-mixed", AttnParams{Rows: 45, Heads: 8, KVHeads: 4, HeadDim: 32, Causal: true},
			append(append([]int32{290, 17, 5}, run(39, 0)...), 250, 60, 299), append(append([]int32{0, 2, 9}, fill(39, 1)...), 2, -1, 0)},
		{"softcap-window", AttnParams{Rows: 36, Heads: 4, KVHeads: 2, HeadDim: 64, Causal: true, Window: 9, SoftCap: 1.5}, run(36, 0), fill(36, 2)},
	}
	defer func(wg uint32, rows bool) { g.k.attnWG, g.k.rowKernels = wg, rows }(g.k.attnWG, g.k.rowKernels)
	for _, cfg := range []struct {
		wg   uint32
		rows bool
	}{{min(g.k.wg, cpuAttnWG), false}, {min(g.k.wg, 128), false}, {min(g.k.wg, cpuAttnWG), true}} {
		g.k.attnWG, g.k.rowKernels = cfg.wg, cfg.rows
		for _, tc := range cases {
			for _, splits := range []int{0, 3, 7} {
				if cfg.rows && splits > 1 {
					continue // the split kernels serve both
				}
				for _, set := range sinkSets(tc.p.Heads) {
					t.Run(fmt.Sprintf("wg%d/rows=%v/%s/splits=%d/%s", cfg.wg, cfg.rows, tc.name, splits, set.name), func(t *testing.T) {
						p := tc.p
						p.Cache = KVParams{Slots: 3, NCtx: 301, KVDim: p.KVHeads * p.HeadDim, PageSize: 16}
						p.Splits = splits
						checkAttentionSinks(t, g, p, tc.slot, tc.pos, set.sinks)
					})
				}
			}
		}
	}
	// A sinks buffer short of one logit per head is refused, naming it.
	p := AttnParams{Rows: 1, Heads: 4, KVHeads: 2, HeadDim: 32, Causal: true, Scale: 1,
		Cache: KVParams{Slots: 1, NCtx: 16, KVDim: 64, Pages: 1, PageSize: 16}, Sinks: g.buf(12)}
	var err error
	g.run(func(c *vk.Cmd) error {
		kv := g.buf(int(p.Cache.PoolBytes()))
		err = g.k.Attention(c, g.buf(4*4*32), g.buf(4*4*32), kv, kv, g.upI32([]int32{0}), g.upI32([]int32{3}), g.upI32([]int32{0}), p)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "sinks") {
		t.Errorf("Attention with 3 sinks for 4 heads: %v, want an error naming the sinks", err)
	}
}

// TestRefAttentionSinks checks the reference's sinks against the formula
// written out for one row and head over two keys: out = sum_j e^(s_j - m)
// v_j / (e^(sink - m) + sum_j e^(s_j - m)), m the largest of the sink and
// the scores, the sink neither scaled nor soft-capped.
func TestRefAttentionSinks(t *testing.T) {
	p := AttnParams{Rows: 1, Heads: 1, KVHeads: 1, HeadDim: 1, Causal: true, Scale: 0.5, SoftCap: 2,
		Cache: KVParams{Slots: 1, NCtx: 2, KVDim: 1, Pages: 1, PageSize: 2}}
	q, kc, vc := []float32{2}, []float32{1, -3}, []float32{4, -1}
	for _, sink := range []float32{-50, -1, 0.7, 5, 60} {
		s0, s1 := 2*math.Tanh(1/2.0), 2*math.Tanh(-3/2.0) // softcap(scale * q * k)
		m := max(float64(sink), s0, s1)
		e0, e1, es := math.Exp(s0-m), math.Exp(s1-m), math.Exp(float64(sink)-m)
		want := (4*e0 - e1) / (es + e0 + e1)
		got := make([]float32, 1)
		if err := RefAttentionF32(got, q, kc, vc, []int32{0}, []int32{1}, []int32{0}, []float32{sink}, p); err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(got[0]) - want); d > 1e-6*math.Abs(want) {
			t.Errorf("RefAttentionF32(sink %g) = %g, want %g", sink, got[0], want)
		}
	}
	if err := RefAttentionF32(make([]float32, 1), q, kc, vc, []int32{0}, []int32{1}, []int32{0}, []float32{1, 2}, p); err == nil {
		t.Errorf("RefAttentionF32 with 2 sinks for 1 head = nil error, want one")
	}
}

// TestAttentionQuant runs the attention kernels over q8_0 and q4_0 pools
// (and mixed pairs) against RefAttention over the same blocks: the
// dequantization is exact in f32, so the f16 tolerance holds.
func TestAttentionQuant(t *testing.T) {
	t.Parallel() // compiles many kernels: see "Parallel tests" in helpers_test.go
	g := newRig(t)
	cases := []struct {
		name  string
		p     AttnParams
		pos   []int32
		slot  []int32
		sinks []float32 // gpt-oss's attention sinks, when not nil
	}{
		{"decode", AttnParams{Rows: 1, Heads: 4, KVHeads: 4, HeadDim: 64, Causal: true}, []int32{37}, []int32{0}, nil},
		{"gqa-mixed-slots", AttnParams{Rows: 5, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true}, []int32{0, 1, 2, 300, 129}, []int32{1, 1, 1, 0, 2}, nil},
		{"prefill37", AttnParams{Rows: 37, Heads: 8, KVHeads: 4, HeadDim: 32, Causal: true}, run(37, 0), fill(37, 1), nil},
		{"prefill-mixed-d128", AttnParams{Rows: 45, Heads: 4, KVHeads: 2, HeadDim: 128, Causal: true},
			append(append([]int32{290, 17, 5}, run(39, 0)...), 250, 60, 299), append(append([]int32{0, 2, 9}, fill(39, 1)...), 2, -1, 0), nil},
		{"softcap-window", AttnParams{Rows: 36, Heads: 4, KVHeads: 2, HeadDim: 64, Causal: true, Window: 9, SoftCap: 1.5}, run(36, 0), fill(36, 2), nil},
		// gpt-oss: sinks, a sliding window on some layers, decode and a
		// prompt past the window.
		{"sinks-window", AttnParams{Rows: 40, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true, Window: 12}, run(40, 3), fill(40, 0), sinkSets(8)[0].sinks},
		{"sinks-decode", AttnParams{Rows: 2, Heads: 8, KVHeads: 2, HeadDim: 64, Causal: true}, []int32{200, 41}, []int32{1, 2}, sinkSets(8)[0].sinks},
	}
	pairs := [][2]KVType{{KVQ8_0, KVQ8_0}, {KVQ4_0, KVQ4_0}, {KVQ8_0, KVF16}, {KVF16, KVQ4_0}, {KVQ4_0, KVQ8_0}}
	defer func(rows bool) { g.k.rowKernels = rows }(g.k.rowKernels)
	for pi, pair := range pairs {
		for _, rows := range []bool{false, true} {
			g.k.rowKernels = rows
			for i, tc := range cases {
				if i > 0 && !sweep.Pick(i-1, pi, len(pairs)) {
					continue // CI: every pair over the decode case, each other case over one pair
				}
				for _, splits := range []int{0, 3} {
					if rows && splits > 1 {
						continue // the split kernels serve both
					}
					t.Run(fmt.Sprintf("%v_%v/rows=%v/%s/splits=%d", pair[0], pair[1], rows, tc.name, splits), func(t *testing.T) {
						p := tc.p
						p.Cache = KVParams{Slots: 3, NCtx: 301, KVDim: p.KVHeads * p.HeadDim, PageSize: 16, Type: pair[0]}
						p.VType = pair[1]
						table := scatteredTable(g, &p.Cache, 2)
						p.Scale = float32(1 / math.Sqrt(float64(p.HeadDim)))
						p.Splits = splits
						if splits > 1 {
							p.Scratch = g.buf(int(AttentionScratchBytes(p)))
						}
						if tc.sinks != nil {
							p.Sinks = g.upF32(tc.sinks)
						}
						// Fill the pools through RefKVWrite: every position
						// of every page.
						all := p.Cache.Pages * p.Cache.PageSize
						ks, vs := g.randn(all*p.Cache.KVDim, 2), g.randn(all*p.Cache.KVDim, 1)
						one := make([]int32, p.Cache.Pages) // a table naming each page once
						for i := range one {
							one[i] = int32(i)
						}
						fillKV := KVParams{Slots: 1, NCtx: all, KVDim: p.Cache.KVDim, Pages: p.Cache.Pages, PageSize: p.Cache.PageSize}
						zero, seq := make([]int32, all), run(all, 0)
						fillKV.Type = pair[0]
						kc := make([]uint16, fillKV.PoolBytes()/2)
						RefKVWrite(kc, ks, zero, seq, one, all, fillKV)
						fillKV.Type = pair[1]
						vc := make([]uint16, fillKV.PoolBytes()/2)
						RefKVWrite(vc, vs, zero, seq, one, all, fillKV)
						q := g.randn(p.Rows*p.Heads*p.HeadDim, 1)
						out := g.buf(len(q) * 4)
						g.run(func(c *vk.Cmd) error {
							return g.k.Attention(c, out, g.upF32(q), g.upF16(kc), g.upF16(vc), g.upI32(tc.slot), g.upI32(tc.pos), g.upI32(table), p)
						})
						want := make([]float32, len(q))
						if err := RefAttention(want, q, kc, vc, tc.slot, tc.pos, table, tc.sinks, p); err != nil {
							t.Fatal(err)
						}
						closeTo(t, "Attention", g.downF32(out, len(q)), want, 1e-4)
					})
				}
			}
		}
	}
}
