package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// AttnParams describe an attention dispatch.
type AttnParams struct {
	Rows, Heads, KVHeads, HeadDim int
	// Cache is the layout of the K and V ranges (KVDim = KVHeads*HeadDim)
	// and K's element type; VType is V's.
	Cache KVParams
	VType KVType
	// Causal rows attend to positions 0..pos[r] of their slot; otherwise
	// every row attends to positions 0..NKV-1.
	Causal bool
	NKV    int
	// Scale multiplies q.k (usually 1/sqrt(HeadDim)).
	Scale float32
	// Window > 0 limits causal rows to the last Window positions
	// (pos-Window+1..pos: sliding-window attention). Windowed dispatches
	// use the per-row kernel only.
	Window int
	// SoftCap > 0 turns each scaled score s into SoftCap*tanh(s/SoftCap)
	// (Gemma 2's attention logit soft-capping); per-row kernel only.
	SoftCap float32
	// Splits > 1 divides every row's keys into that many ranges of
	// ceil(SplitKeys() / Splits) handled by separate workgroups (flash
	// decoding), merged by a second kernel; it needs Scratch of
	// AttentionScratchBytes(p) bytes. See Kernels.AttentionSplits.
	Splits  int
	Scratch vk.Range
	// Keys, when > 0, is the most positions any causal row of this
	// dispatch attends to before its window (the longest row's pos + 1):
	// the splits divide that many keys rather than the whole context.
	// A row that sees more still gets all of its keys (the last split
	// takes the rest), only more slowly.
	Keys int
	// Sinks, when it has a buffer, holds Heads f32 attention-sink logits
	// (gpt-oss): query head h's softmax also counts Sinks[h] in its max
	// and denominator, as is (not scaled nor soft-capped), with no value,
	// so a row's weights sum to less than one. Without a buffer, none.
	Sinks vk.Range
}

// SplitKeys is the most keys one row of the dispatch attends to, which
// Splits divides: Keys (or, when 0, NKV or the context), at most Window.
func (p *AttnParams) SplitKeys() int {
	n := p.maxKeys()
	if p.Causal && p.Keys > 0 {
		n = min(p.Keys, n)
	}
	if p.Causal && p.Window > 0 {
		n = min(n, p.Window)
	}
	return n
}

// AttentionScratchBytes is the scratch Attention needs with p.Splits > 1.
func AttentionScratchBytes(p AttnParams) uint64 {
	if p.Splits <= 1 {
		return 0
	}
	return 4 * uint64(p.Rows) * uint64(p.Heads) * uint64(p.Splits) * uint64(p.HeadDim+2)
}

// vCache is the layout of the V pool.
func (p *AttnParams) vCache() KVParams {
	v := p.Cache
	v.Type = p.VType
	return v
}

// maxKeys is the most keys any row can see.
func (p *AttnParams) maxKeys() int {
	if p.Causal {
		return p.Cache.NCtx
	}
	return p.NKV
}

// AttentionSplits suggests AttnParams.Splits for the dispatch p (its
// Rows, heads and SplitKeys; set Keys to the longest row's keys): enough
// splits to give the device about two workgroups per compute unit, each
// of at least MinSplitKeys keys, within one binding of scratch; 1 (no
// split) for short contexts, for batches that flash_attn_tiled serves
// (prefill) and on CPU devices unless SetComputeUnits asked for splits.
func (k *Kernels) AttentionSplits(p AttnParams) int {
	if k.splitUnits <= 0 || p.Rows <= 0 || p.Heads <= 0 || p.KVHeads <= 0 || p.Heads%p.KVHeads != 0 || p.HeadDim <= 0 || k.tiledServes(p) {
		return 1
	}
	gpw := k.attnHeadsPerGroup(p.Heads/p.KVHeads, p.HeadDim, k.attnWG)
	if gpw == 0 {
		return 1
	}
	s := splitsFor(p.Rows*p.Heads/gpw, p.SplitKeys(), k.splitUnits)
	perSplit := 4 * uint64(p.Rows) * uint64(p.Heads) * uint64(p.HeadDim+2)
	return max(min(s, int(k.dev.MaxBinding()/perSplit)), 1)
}

// MinSplitKeys is the fewest keys AttentionSplits gives one split: a
// shorter range costs a workgroup launch and a partial result to merge
// for little work (two key tiles of a GPU workgroup of 128).
const MinSplitKeys = 256

// splitsFor returns the key splits that bring groups workgroups to about
// two per compute unit (units of them) with at least MinSplitKeys of the
// longest row's keys per split (never below 1).
func splitsFor(groups, keys, units int) int {
	target := 2 * units
	s := min((target+groups-1)/groups, keys/MinSplitKeys)
	return max(s, 1)
}

// SetComputeUnits makes AttentionSplits and the GPU matvec's rows per
// workgroup (gpuGroupRows) fill n compute units (n > 0) on
// any device, CPU devices included (tests run the GPUs' split decoding on
// lavapipe so); n <= 0 restores the default: the device's count
// (vk.DeviceInfo.EstimateComputeUnits) on GPUs, no splits on CPU devices,
// whose few cores the unsplit kernels already keep busy.
func (k *Kernels) SetComputeUnits(n int) {
	info := k.dev.Info()
	k.units, _ = info.EstimateComputeUnits()
	if n > 0 {
		k.units = n
	}
	switch {
	case n > 0:
		k.splitUnits = n
	case k.dev.Info().Type == vk.TypeCPU:
		k.splitUnits = 0
	default:
		k.splitUnits = k.units
	}
}

// MaxAttentionScratch is the most scratch Attention needs for dispatches
// like p of 1 to p.Rows rows whose rows see up to SplitKeys() keys with
// the splits AttentionSplits chooses: what to reserve at load for them.
func (k *Kernels) MaxAttentionScratch(p AttnParams) uint64 {
	var most uint64
	for rows := 1; rows <= p.Rows; rows++ {
		q := p
		q.Rows = rows
		q.Splits = k.AttentionSplits(q)
		most = max(most, AttentionScratchBytes(q))
	}
	return most
}

// tiledServes reports whether Attention dispatches flash_attn_tiled for p
// without splits: batches of at least two query tiles, neither windowed
// nor soft-capped, within a CPU device's bound on the tiled loops.
func (k *Kernels) tiledServes(p AttnParams) bool {
	longCPU := k.rowKernels && p.maxKeys() > cpuTiledMaxKeys
	tile, ok := k.attnTileFor(p.Heads/p.KVHeads, p.HeadDim, k.attnWG)
	return ok && !longCPU && p.Rows >= 2*tile.Rows && !(p.Causal && p.Window > 0) && p.SoftCap == 0
}

// AttnPush mirrors the push-constant block of attention.comp
// (attention_tiled.comp shares it).
type AttnPush struct {
	Rows, Heads, KVHeads, HeadDim, NCtx, NSlots, NKV, Causal uint32
	Scale                                                    float32
	SplitLen, NSplit, TileRows, Window                       uint32
	SoftCap                                                  float32
	PageShift, TableStride, NPages                           uint32
	Sinks                                                    uint32 // 1: binding 7 holds the sinks
}

// AttnCombinePush mirrors the push-constant block of attn_combine.comp.
type AttnCombinePush struct {
	RowsHeads, HeadDim, NSplit uint32
}

// MaxHeadDim is the largest head dimension Attention supports.
const MaxHeadDim = 256

func (p *AttnParams) check() error {
	if err := p.Cache.check(); err != nil {
		return fmt.Errorf("ops: Attention: %w", err)
	}
	if v := p.vCache(); v.check() != nil {
		return fmt.Errorf("ops: Attention: V: %w", v.check())
	}
	if p.Rows <= 0 || p.Heads <= 0 || p.KVHeads <= 0 || p.Heads%p.KVHeads != 0 || p.HeadDim <= 0 || p.HeadDim > MaxHeadDim ||
		p.Cache.KVDim != p.KVHeads*p.HeadDim || (!p.Causal && (p.NKV <= 0 || p.NKV > p.Cache.NCtx)) ||
		p.Splits < 0 || p.Splits > p.maxKeys() || p.Window < 0 || p.SoftCap < 0 {
		return fmt.Errorf("ops: Attention: bad parameters %+v", *p)
	}
	return nil
}

// Attention records out = softmax(Scale * q K^T) V for every row and head,
// over the row's slot in the paged f16 cache (see KVParams; table holds
// the page ids), with GQA (query head h reads kv head h / (Heads/KVHeads)).
// q and out are [Rows][Heads][HeadDim] f32; slot and pos are int32 per row.
// Rows with an out-of-range slot produce zeros; every position a row sees
// must have a page in the pool. With p.Sinks each head's softmax also
// counts its sink logit (see AttnParams.Sinks; split dispatches count it
// once, in split 0).
//
// Without splits, a batch of at least two query tiles (see attnTileFor)
// also dispatches flash_attn_tiled, which serves every tile of rows whose
// slots agree (prefill), and the per-row kernel serves only the rest
// (tiles mixing slots, e.g. decode rows of other sequences); smaller
// batches (decode) use the per-row kernel alone.
func (k *Kernels) Attention(c *vk.Cmd, out, q, kc, vc, slot, pos, table vk.Range, p AttnParams) error {
	if err := p.check(); err != nil {
		return err
	}
	if !k.dev.Features().Storage16 {
		return fmt.Errorf("ops: Attention: device lacks 16-bit storage")
	}
	qn := 4 * uint64(p.Rows*p.Heads*p.HeadDim)
	cacheBytes, vBytes := p.Cache.PoolBytes(), p.vCache().PoolBytes()
	tableBytes := 4 * uint64(p.Cache.Slots) * uint64(p.Cache.TablePages())
	for _, o := range []struct {
		what string
		r    vk.Range
		n    uint64
	}{{"out", out, qn}, {"q", q, qn}, {"k", kc, cacheBytes}, {"v", vc, vBytes}, {"slot", slot, 4 * uint64(p.Rows)}, {"pos", pos, 4 * uint64(p.Rows)}, {"table", table, tableBytes}} {
		if err := sized("Attention", o.what, o.r, o.n); err != nil {
			return err
		}
		if o.n > k.dev.MaxBinding() {
			return fmt.Errorf("ops: Attention: %s of %d bytes exceeds one binding", o.what, o.n)
		}
	}
	push := AttnPush{Rows: uint32(p.Rows), Heads: uint32(p.Heads), KVHeads: uint32(p.KVHeads), HeadDim: uint32(p.HeadDim),
		NCtx: uint32(p.Cache.NCtx), NSlots: uint32(p.Cache.Slots), NKV: uint32(p.NKV), Scale: p.Scale,
		PageShift: p.Cache.pageShift(), TableStride: uint32(p.Cache.TablePages()), NPages: uint32(p.Cache.Pages)}
	tb := k.window(table, 0, tableBytes)
	sinks := k.window(slot, 0, 4*uint64(p.Rows)) // bound, unread, without sinks
	if p.Sinks.Buf != nil {
		if err := sized("Attention", "sinks", p.Sinks, 4*uint64(p.Heads)); err != nil {
			return err
		}
		sinks, push.Sinks = k.window(p.Sinks, 0, 4*uint64(p.Heads)), 1
	}
	if p.Causal {
		push.Causal, push.Window = 1, uint32(p.Window)
	}
	push.SoftCap = p.SoftCap
	wg := k.attnWG
	gpw := k.attnHeadsPerGroup(p.Heads/p.KVHeads, p.HeadDim, wg)
	if gpw == 0 {
		return fmt.Errorf("ops: Attention: head_dim %d needs more shared memory than the device's %d bytes", p.HeadDim, k.dev.Limits().MaxSharedMemory)
	}
	spec := []uint32{wg, uint32(gpw), uint32(p.HeadDim)}
	names := &k.attnNames[p.Cache.Type][p.VType]
	if p.Splits <= 1 {
		if k.rowKernels && p.maxKeys() > cpuRowsMaxKeys {
			return fmt.Errorf("ops: Attention: rows of up to %d keys, more than this CPU device runs in one invocation (%d): use a shorter context", p.maxKeys(), cpuRowsMaxKeys)
		}
		// On CPU devices long contexts go to the per-row kernel: the
		// tiled one's loops would pass the driver's iteration bound.
		if k.tiledServes(p) {
			// Tiles of one slot (prefill) here, the rest by the per-row
			// kernel below.
			tile, _ := k.attnTileFor(p.Heads/p.KVHeads, p.HeadDim, wg)
			push.TileRows = uint32(tile.Rows)
			if err := Record(k, c, names.tiled, []uint32{wg, uint32(tile.GPW), uint32(p.HeadDim), uint32(tile.Rows)},
				k.Groups(ceilDiv(uint32(p.Rows), uint32(tile.Rows))*uint32(p.Heads/tile.GPW)), &push,
				k.window(q, 0, qn), k.window(kc, 0, cacheBytes), k.window(vc, 0, vBytes),
				k.window(slot, 0, 4*uint64(p.Rows)), k.window(pos, 0, 4*uint64(p.Rows)), k.window(out, 0, qn), tb, sinks); err != nil {
				return err
			}
		}
		name, groups := k.pick(names.row, names.rowSG), k.Groups(uint32(p.Rows*p.Heads/gpw))
		if k.rowKernels {
			// One invocation per row and group of heads (CPU devices).
			gpw = attnRowsHeads(p.Heads/p.KVHeads, p.HeadDim)
			spec = []uint32{cpuRowsWG, uint32(gpw), uint32(p.HeadDim)}
			name, groups = names.rows, k.Groups(ceilDiv(uint32(p.Rows*p.Heads/gpw), cpuRowsWG))
		}
		return Record(k, c, name, spec, groups, &push,
			k.window(q, 0, qn), k.window(kc, 0, cacheBytes), k.window(vc, 0, vBytes),
			k.window(slot, 0, 4*uint64(p.Rows)), k.window(pos, 0, 4*uint64(p.Rows)), k.window(out, 0, qn), tb, sinks)
	}
	sb := AttentionScratchBytes(p)
	if err := sized("Attention", "scratch", p.Scratch, sb); err != nil {
		return err
	}
	if sb > k.dev.MaxBinding() {
		return fmt.Errorf("ops: Attention: scratch of %d bytes exceeds one binding; use fewer splits", sb)
	}
	push.NSplit = uint32(p.Splits)
	push.SplitLen = uint32((p.SplitKeys() + p.Splits - 1) / p.Splits)
	scratch := k.window(p.Scratch, 0, sb)
	if err := Record(k, c, k.pick(names.split, names.splitSG), spec,
		k.Groups(uint32(p.Rows*p.Heads/gpw*p.Splits)), &push,
		k.window(q, 0, qn), k.window(kc, 0, cacheBytes), k.window(vc, 0, vBytes),
		k.window(slot, 0, 4*uint64(p.Rows)), k.window(pos, 0, 4*uint64(p.Rows)), scratch, tb, sinks); err != nil {
		return err
	}
	comb := AttnCombinePush{RowsHeads: uint32(p.Rows * p.Heads), HeadDim: uint32(p.HeadDim), NSplit: uint32(p.Splits)}
	return Record(k, c, "attn_combine_f32", []uint32{min(k.wg, 64)}, k.Groups(comb.RowsHeads), &comb, scratch, k.window(out, 0, qn))
}

// attnNames are the pipeline names of the attention kernels for one pair
// of K and V types: flash_attn_f32_{suffix} and so on, the suffix "f16"
// for f16 K and V, else "{k}_{v}" (q8_0_q4_0).
type attnNames struct{ tiled, row, rowSG, rows, split, splitSG string }

// newAttnNames returns the names of every pair, indexed [k][v].
func newAttnNames() [3][3]attnNames {
	var n [3][3]attnNames
	for _, kt := range KVTypes {
		for _, vt := range KVTypes {
			suf := "f16"
			if kt != KVF16 || vt != KVF16 {
				suf = kt.String() + "_" + vt.String()
			}
			n[kt][vt] = attnNames{tiled: "flash_attn_tiled_f32_" + suf, row: "flash_attn_f32_" + suf, rowSG: "flash_attn_f32_" + suf + "_sg",
				rows: "flash_attn_rows_f32_" + suf, split: "flash_attn_split_f32_" + suf, splitSG: "flash_attn_split_f32_" + suf + "_sg"}
		}
	}
	return n
}

// attnRowsHeads picks how many query heads of a GQA group one
// flash_attn_rows invocation serves (each K/V row is then read once for
// all of them): the largest divisor of group, at most 8, whose q and
// accumulator registers (2 * heads * headDim floats) stay within 2048.
func attnRowsHeads(group, headDim int) int {
	for g := min(group, 8); g > 1; g-- {
		if group%g == 0 && g*headDim <= 1024 {
			return g
		}
	}
	return 1
}

// attnHeadsPerGroup picks how many query heads of a GQA group one attention
// workgroup serves (each K/V row is then read once for all of them): the
// largest divisor of group, at most 8, whose shared arrays fit the device;
// 0 if none fits.
func (k *Kernels) attnHeadsPerGroup(group, headDim int, wg uint32) int {
	for g := min(group, 8); g >= 1; g-- {
		// q_s, acc_s, p_s, red_s and row_s of attention.comp.
		shared := 16*g*((headDim+3)/4) + 4*g*headDim + 16*((g+3)/4)*int(wg) + 4*g*int(wg) + 4*int(wg)
		if group%g == 0 && shared <= int(k.dev.Limits().MaxSharedMemory) {
			return g
		}
	}
	return 0
}

// attnTile is the query tile of flash_attn_tiled: Rows consecutive batch
// rows times GPW query heads per workgroup.
type attnTile struct{ Rows, GPW int }

// attnTileFor picks the tile of flash_attn_tiled for group query heads per
// kv head of headDim dims and workgroups of wg: the most heads (a divisor of
// group, at most 8), then the most rows (16, 8 or 4), whose Rows*GPW
// queries fit the kernel (at most 32 and wg, at most 16 vec4 accumulators
// per invocation) and whose shared arrays fit the device; ok is false if
// none does.
func (k *Kernels) attnTileFor(group, headDim int, wg uint32) (t attnTile, ok bool) {
	// The phase-3 layout of attention_tiled.comp.
	qv := (headDim + 3) / 4
	dvp := 1
	for dvp < qv {
		dvp *= 2
	}
	td := min(dvp, int(wg))
	ng, dm := int(wg)/td, dvp/td
	bc := int(wg) // keys per tile: KPL * WG
	if wg < 64 {
		bc *= 2
	}
	for g := min(group, 8); g >= 1; g-- {
		if group%g != 0 {
			continue
		}
		for _, rows := range []int{16, 8, 4} {
			q := rows * g
			qk := (q + ng - 1) / ng
			// q_s, p_s, alpha_s, l_s, nk_s and row_s.
			shared := 16*q*qv + 16*((bc*ng*qk+3)/4) + 8*q + 4*rows + 4*bc
			if q <= 32 && q <= int(wg) && dm*qk <= 16 && shared <= int(k.dev.Limits().MaxSharedMemory) {
				return attnTile{Rows: rows, GPW: g}, true
			}
		}
	}
	return attnTile{}, false
}

// RefAttention is the CPU reference of Attention over paged pools viewed
// as halfwords (see RefKVWrite): RefAttentionF32 over the pools
// dequantized with gguf/quant.
func RefAttention(out, q []float32, kq, vq []uint16, slot, pos, table []int32, sinks []float32, p AttnParams) error {
	if err := p.check(); err != nil {
		return err
	}
	kc, vc := DequantizeKV(kq, p.Cache.Type, p.Cache.KVDim), DequantizeKV(vq, p.VType, p.Cache.KVDim)
	return RefAttentionF32(out, q, kc, vc, slot, pos, table, sinks, p)
}

// RefAttentionF32 is Attention's math over paged pools of f32 values
// ([Pages][PageSize][KVDim] each, laid out as KVParams describes; p's
// element types only constrain the shapes, as they do the kernels'):
// plain two-pass softmax in float64. It is the one attention reference
// over a KV cache (RefAttention's, and the engine's CPU forward pass with
// its f32 pools). sinks, when not nil, holds p.Heads attention-sink logits
// (AttnParams.Sinks), p.Sinks being ignored: each joins its head's max and
// denominator as the reference's flash attention applies it, after the
// scores' scale and soft-cap.
func RefAttentionF32(out, q, kc, vc []float32, slot, pos, table []int32, sinks []float32, p AttnParams) error {
	if err := p.check(); err != nil {
		return err
	}
	if sinks != nil && len(sinks) != p.Heads {
		return fmt.Errorf("ops: RefAttentionF32: %d sinks, want one per head (%d)", len(sinks), p.Heads)
	}
	if n := p.Cache.Pages * p.Cache.pageSize() * p.Cache.KVDim; len(kc) < n || len(vc) < n {
		return fmt.Errorf("ops: RefAttentionF32: pools of %d and %d values, want %d", len(kc), len(vc), n)
	}
	D := p.HeadDim
	group := p.Heads / p.KVHeads
	s := make([]float64, p.Cache.NCtx)
	rowAt := make([]int, p.Cache.NCtx)
	acc := make([]float64, D)
	for r := 0; r < p.Rows; r++ {
		for h := 0; h < p.Heads; h++ {
			o := out[(r*p.Heads+h)*D : (r*p.Heads+h+1)*D]
			nk := p.NKV
			if p.Causal {
				nk = int(pos[r]) + 1
			}
			nk = max(min(nk, p.Cache.NCtx), 0)
			if slot[r] < 0 || int(slot[r]) >= p.Cache.Slots {
				nk = 0
			}
			if nk == 0 {
				clear(o)
				continue
			}
			lo := 0
			if p.Causal && p.Window > 0 && nk > p.Window {
				lo = nk - p.Window
			}
			qv := q[(r*p.Heads+h)*D:]
			kvh := (h / group) * D
			m := math.Inf(-1)
			if sinks != nil {
				m = float64(sinks[h])
			}
			for j := lo; j < nk; j++ {
				base := kvRow(table, slot[r], int32(j), p.Cache)
				if base < 0 {
					return fmt.Errorf("ops: RefAttentionF32: row %d: position %d of slot %d has no page", r, j, slot[r])
				}
				rowAt[j] = base + kvh
				var dot float64
				for d := 0; d < D; d++ {
					dot += float64(qv[d]) * float64(kc[rowAt[j]+d])
				}
				s[j] = dot * float64(p.Scale)
				if p.SoftCap > 0 {
					s[j] = float64(p.SoftCap) * math.Tanh(s[j]/float64(p.SoftCap))
				}
				m = math.Max(m, s[j])
			}
			var sum float64
			if sinks != nil {
				sum = math.Exp(float64(sinks[h]) - m) // a weight with no value
			}
			clear(acc)
			for j := lo; j < nk; j++ {
				w := math.Exp(s[j] - m)
				sum += w
				for d := 0; d < D; d++ {
					acc[d] += w * float64(vc[rowAt[j]+d])
				}
			}
			for d := range o {
				o[d] = float32(acc[d] / sum)
			}
		}
	}
	return nil
}
