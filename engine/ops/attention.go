package ops

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/gguf/quant"
	"github.com/vkllm/vkllm/vk"
)

// RoPEParams describe a RoPE dispatch over rows of [Heads][HeadDim] f32.
type RoPEParams struct {
	Rows, Heads, HeadDim int
	// RotDims is the number of leading dimensions rotated (partial rotary);
	// 0 means HeadDim. Even, at most HeadDim.
	RotDims int
	// NeoX pairs element j with j+RotDims/2 (GPT-NeoX, Qwen, Phi, ...);
	// otherwise pairs are (2j, 2j+1) (LLaMA in GGUF's layout).
	NeoX bool
	// FreqBase is the rope theta (10000 for LLaMA 1/2).
	FreqBase float32
	// FreqScale multiplies positions (linear scaling: 1/factor); 0 means 1.
	FreqScale float32
	// AttnFactor multiplies cos and sin (LongRoPE, YaRN); 0 means 1.
	AttnFactor float32
	// ExtFactor != 0 turns on YaRN: the angle of pair j mixes the scaled
	// and the unscaled angle by ramp(j) * ExtFactor, ramp falling from 1 to
	// 0 over CorrDims, and the magnitude grows by 1 + 0.1 ln(1/FreqScale)
	// (the reference's rope_yarn).
	ExtFactor float32
	CorrDims  [2]float32
}

// RoPEPush mirrors the push-constant block of rope.comp.
type RoPEPush struct {
	Rows, Heads, HeadDim, RotDims uint32
	FreqBase, FreqScale           float32
	HasFactors                    uint32
	AttnFactor, ExtFactor         float32
	Corr0, Corr1                  float32
}

func (p *RoPEParams) norm() (RoPEParams, error) {
	q := *p
	if q.RotDims == 0 {
		q.RotDims = q.HeadDim
	}
	if q.FreqScale == 0 {
		q.FreqScale = 1
	}
	if q.AttnFactor == 0 {
		q.AttnFactor = 1
	}
	if q.Rows <= 0 || q.Heads <= 0 || q.HeadDim <= 0 || q.HeadDim%2 != 0 || q.RotDims%2 != 0 || q.RotDims > q.HeadDim || q.FreqBase <= 0 {
		return q, fmt.Errorf("ops: RoPE: bad parameters %+v", *p)
	}
	return q, nil
}

// RoPE records rotary position embedding of src into dst (may be the same
// range): rows x heads x headDim f32, row r at position pos[r] (int32).
// factors, when it has a buffer, holds RotDims/2 f32 frequency factors that
// divide the angles (LLaMA 3 "rope_freqs", Phi-3 LongRoPE factors).
func (k *Kernels) RoPE(c *vk.Cmd, dst, src, pos, factors vk.Range, p RoPEParams) error {
	q, err := p.norm()
	if err != nil {
		return err
	}
	n := uint64(q.Rows * q.Heads * q.HeadDim)
	if err := sized("RoPE", "src", src, 4*n); err != nil {
		return err
	}
	if err := sized("RoPE", "dst", dst, 4*n); err != nil {
		return err
	}
	if err := sized("RoPE", "pos", pos, 4*uint64(q.Rows)); err != nil {
		return err
	}
	push := RoPEPush{Rows: uint32(q.Rows), Heads: uint32(q.Heads), HeadDim: uint32(q.HeadDim), RotDims: uint32(q.RotDims),
		FreqBase: q.FreqBase, FreqScale: q.FreqScale, AttnFactor: q.AttnFactor, ExtFactor: q.ExtFactor, Corr0: q.CorrDims[0], Corr1: q.CorrDims[1]}
	f := k.window(pos, 0, 4*uint64(q.Rows))
	if factors.Buf != nil {
		if err := sized("RoPE", "factors", factors, 4*uint64(q.RotDims/2)); err != nil {
			return err
		}
		f = k.window(factors, 0, 4*uint64(q.RotDims/2))
		push.HasFactors = 1
	}
	if 4*n > k.dev.MaxBinding() {
		return fmt.Errorf("ops: RoPE: %d bytes exceed one binding", 4*n)
	}
	name := "rope_norm_f32"
	if q.NeoX {
		name = "rope_neox_f32"
	}
	pairs := uint32(n / 2)
	return Record(k, c, name, []uint32{k.wg}, k.Groups(ceilDiv(pairs, k.wg)), &push,
		k.window(src, 0, 4*n), k.window(pos, 0, 4*uint64(q.Rows)), f, k.window(dst, 0, 4*n))
}

// RefRoPE is the CPU reference of RoPE (factors may be nil). Angles are
// computed in float64 from float32 inputs.
func RefRoPE(dst, src []float32, pos []int32, factors []float32, p RoPEParams) error {
	q, err := p.norm()
	if err != nil {
		return err
	}
	copy(dst, src[:q.Rows*q.Heads*q.HeadDim])
	for r := 0; r < q.Rows; r++ {
		for h := 0; h < q.Heads; h++ {
			x := src[(r*q.Heads+h)*q.HeadDim:]
			y := dst[(r*q.Heads+h)*q.HeadDim:]
			for j := 0; j < q.RotDims/2; j++ {
				extrap := float64(pos[r]) * math.Pow(float64(q.FreqBase), -float64(2*j)/float64(q.RotDims))
				if factors != nil {
					extrap /= float64(factors[j])
				}
				theta, mscale := float64(q.FreqScale)*extrap, float64(q.AttnFactor)
				if q.ExtFactor != 0 {
					y := (float64(j) - float64(q.CorrDims[0])) / math.Max(0.001, float64(q.CorrDims[1]-q.CorrDims[0]))
					ramp := (1 - math.Min(1, math.Max(0, y))) * float64(q.ExtFactor)
					theta = theta*(1-ramp) + extrap*ramp
					mscale *= 1 + 0.1*math.Log(1/float64(q.FreqScale))
				}
				i0, i1 := 2*j, 2*j+1
				if q.NeoX {
					i0, i1 = j, j+q.RotDims/2
				}
				cs, sn := math.Cos(theta)*mscale, math.Sin(theta)*mscale
				x0, x1 := float64(x[i0]), float64(x[i1])
				y[i0] = float32(x0*cs - x1*sn)
				y[i1] = float32(x0*sn + x1*cs)
			}
		}
	}
	return nil
}

// SoftMaxPush mirrors the push-constant block of softmax.comp.
type SoftMaxPush struct {
	Rows, Cols, MaskRows uint32
	Scale                float32
}

// SoftMax records dst[r] = softmax(src[r]*scale + mask[r % maskRows]) over
// rows x cols f32; maskRows == 0 (mask without a buffer) means no mask.
func (k *Kernels) SoftMax(c *vk.Cmd, dst, src, mask vk.Range, rows, cols, maskRows int, scale float32) error {
	if rows <= 0 || cols <= 0 || maskRows < 0 {
		return fmt.Errorf("ops: SoftMax: shape %dx%d, %d mask rows", rows, cols, maskRows)
	}
	n := 4 * uint64(rows) * uint64(cols)
	if err := sized("SoftMax", "src", src, n); err != nil {
		return err
	}
	if err := sized("SoftMax", "dst", dst, n); err != nil {
		return err
	}
	m := k.window(src, 0, 4*uint64(cols))
	if maskRows > 0 {
		if err := sized("SoftMax", "mask", mask, 4*uint64(maskRows*cols)); err != nil {
			return err
		}
		if 4*uint64(maskRows*cols) > k.dev.MaxBinding() {
			return fmt.Errorf("ops: SoftMax: mask exceeds one binding")
		}
		m = k.window(mask, 0, 4*uint64(maskRows*cols))
	}
	rowBytes := 4 * uint64(cols)
	name := k.pick("soft_max_f32", "soft_max_f32_sg")
	if maskRows > 0 && rows > int(k.dev.MaxBinding()/rowBytes) && maskRows != 1 {
		return fmt.Errorf("ops: SoftMax: a %d-row mask with %d rows larger than one binding", maskRows, rows)
	}
	return k.rowChunks("SoftMax", rows, rowBytes, func(r0, nr int) error {
		push := SoftMaxPush{Rows: uint32(nr), Cols: uint32(cols), MaskRows: uint32(maskRows), Scale: scale}
		return Record(k, c, name, []uint32{k.wg}, k.Groups(uint32(nr)), &push,
			k.window(src, uint64(r0)*rowBytes, uint64(nr)*rowBytes), m, k.window(dst, uint64(r0)*rowBytes, uint64(nr)*rowBytes))
	})
}

// RefSoftMax is the CPU reference of SoftMax (mask nil or maskRows x cols).
func RefSoftMax(dst, src, mask []float32, rows, cols, maskRows int, scale float32) {
	v := make([]float64, cols)
	for r := 0; r < rows; r++ {
		m := math.Inf(-1)
		for i := 0; i < cols; i++ {
			v[i] = float64(src[r*cols+i] * scale)
			if maskRows > 0 {
				v[i] += float64(mask[(r%maskRows)*cols+i])
			}
			m = math.Max(m, v[i])
		}
		var s float64
		for i := range v {
			v[i] = math.Exp(v[i] - m)
			s += v[i]
		}
		for i := range v {
			dst[r*cols+i] = float32(v[i] / s)
		}
	}
}

// KVParams describe the paged f16 KV cache of one layer: a pool of Pages
// pages of PageSize positions, [Pages][PageSize][KVDim] (KVDim = kv_heads *
// head_dim), one range for K and one for V, and a page table of Slots rows
// of TablePages() int32 page ids: position p of slot s lives in page
// table[s][p / PageSize], at p % PageSize within it. Sequences of a slot
// hold at most NCtx positions.
type KVParams struct {
	Slots, NCtx, KVDim int
	// Pages is the size of the pool; PageSize the positions per page, a
	// power of two (0 means DefaultPageSize).
	Pages, PageSize int
	// Type is the pool's element type (KVWrite's; Attention's K pool).
	Type KVType
}

// KVType is the element type of a KV page pool: f16, or the reference's
// q8_0 or q4_0 blocks of 32 values (quantized by KVWrite, dequantized by
// the attention kernels; they need KVDim % 32 == 0).
type KVType int

// The KV element types.
const (
	KVF16 KVType = iota
	KVQ8_0
	KVQ4_0
)

// KVTypes lists the KV element types by their names (String).
var KVTypes = []KVType{KVF16, KVQ8_0, KVQ4_0}

// String returns the type's name as the reference spells it: "f16",
// "q8_0" or "q4_0".
func (t KVType) String() string {
	switch t {
	case KVQ8_0:
		return "q8_0"
	case KVQ4_0:
		return "q4_0"
	}
	return "f16"
}

// ParseKVType returns the type named s (see String).
func ParseKVType(s string) (KVType, error) {
	for _, t := range KVTypes {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("ops: KV cache type %q: want f16, q8_0 or q4_0", s)
}

// RowBytes is the size of one position of kvDim values (a multiple of 32
// for the quantized types).
func (t KVType) RowBytes(kvDim int) int {
	switch t {
	case KVQ8_0:
		return kvDim / 32 * 34
	case KVQ4_0:
		return kvDim / 32 * 18
	}
	return 2 * kvDim
}

// ggml returns the GGUF tensor type of t's blocks.
func (t KVType) ggml() gguf.GGMLType {
	switch t {
	case KVQ8_0:
		return gguf.TypeQ8_0
	case KVQ4_0:
		return gguf.TypeQ4_0
	}
	return gguf.TypeF16
}

// KVBlocked reports whether a pool of type t can hold rows of kvDim
// values: any width in f16, multiples of 32 in the block types.
func KVBlocked(t KVType, kvDim int) bool { return t == KVF16 || kvDim%32 == 0 }

// DefaultPageSize is the positions per KV page the engine uses. 16 and 32
// measured the same on lavapipe (BenchmarkAttention's decode and prefill
// shapes within noise), so the smaller page wins: less memory stranded in
// each sequence's last page and finer prefix sharing.
const DefaultPageSize = 16

// TablePages is the number of page-table entries per slot:
// ceil(NCtx / PageSize).
func (kv KVParams) TablePages() int {
	ps := kv.pageSize()
	return (kv.NCtx + ps - 1) / ps
}

// PoolBytes is the size of one layer's K (or V) pool in bytes.
func (kv KVParams) PoolBytes() uint64 {
	return uint64(kv.Pages) * uint64(kv.pageSize()) * uint64(kv.Type.RowBytes(kv.KVDim))
}

func (kv KVParams) pageSize() int {
	if kv.PageSize == 0 {
		return DefaultPageSize
	}
	return kv.PageSize
}

func (kv KVParams) check() error {
	ps := kv.pageSize()
	if kv.Slots <= 0 || kv.NCtx <= 0 || kv.KVDim <= 0 || kv.Pages <= 0 || ps <= 0 || ps&(ps-1) != 0 || ps > 1<<12 {
		return fmt.Errorf("ops: KV cache %+v: want positive sizes and a power-of-two page size", kv)
	}
	if kv.Type < KVF16 || kv.Type > KVQ4_0 || !KVBlocked(kv.Type, kv.KVDim) {
		return fmt.Errorf("ops: a KV cache of %v rows of %d values: the block types need a multiple of 32", kv.Type, kv.KVDim)
	}
	return nil
}

// pageShift is log2(PageSize).
func (kv KVParams) pageShift() uint32 { return uint32(bits.TrailingZeros(uint(kv.pageSize()))) }

// KVWritePush mirrors the push-constant block of kv_write.comp.
type KVWritePush struct {
	Rows, KVDim, NCtx, NSlots      uint32
	PageShift, TableStride, NPages uint32
}

// KVWrite records storing rows x KVDim f32 (k or v activations) into the
// paged f16 cache at position pos[r] of slot slot[r] for each row r (see
// KVParams; table holds the page ids); rows with an out-of-range slot,
// position or page are skipped.
func (k *Kernels) KVWrite(c *vk.Cmd, cache, src, slot, pos, table vk.Range, rows int, kv KVParams) error {
	if err := kv.check(); err != nil {
		return err
	}
	if rows <= 0 {
		return fmt.Errorf("ops: KVWrite: %d rows", rows)
	}
	if !k.dev.Features().Storage16 {
		return fmt.Errorf("ops: KVWrite: device lacks 16-bit storage")
	}
	cacheBytes := kv.PoolBytes()
	tableBytes := 4 * uint64(kv.Slots) * uint64(kv.TablePages())
	for _, o := range []struct {
		what string
		r    vk.Range
		n    uint64
	}{{"cache", cache, cacheBytes}, {"src", src, 4 * uint64(rows*kv.KVDim)}, {"slot", slot, 4 * uint64(rows)}, {"pos", pos, 4 * uint64(rows)}, {"table", table, tableBytes}} {
		if err := sized("KVWrite", o.what, o.r, o.n); err != nil {
			return err
		}
		if o.n > k.dev.MaxBinding() {
			return fmt.Errorf("ops: KVWrite: %s of %d bytes exceeds one binding (use fewer pages per cache range)", o.what, o.n)
		}
	}
	push := KVWritePush{Rows: uint32(rows), KVDim: uint32(kv.KVDim), NCtx: uint32(kv.NCtx), NSlots: uint32(kv.Slots),
		PageShift: kv.pageShift(), TableStride: uint32(kv.TablePages()), NPages: uint32(kv.Pages)}
	name, n := "kv_write_f32_f16", uint32(rows*kv.KVDim)
	switch kv.Type {
	case KVQ8_0:
		name, n = "kv_write_f32_q8_0", n/32 // one invocation per block
	case KVQ4_0:
		name, n = "kv_write_f32_q4_0", n/32
	}
	return Record(k, c, name, []uint32{k.wg}, k.Groups(ceilDiv(n, k.wg)), &push,
		k.window(src, 0, 4*uint64(rows*kv.KVDim)), k.window(slot, 0, 4*uint64(rows)), k.window(pos, 0, 4*uint64(rows)),
		k.window(cache, 0, cacheBytes), k.window(table, 0, tableBytes))
}

// kvRow returns the element offset of position pos of slot in a paged cache,
// or -1 when the slot, position or page is out of range.
func kvRow(table []int32, slot, pos int32, kv KVParams) int {
	if slot < 0 || int(slot) >= kv.Slots || pos < 0 || int(pos) >= kv.NCtx {
		return -1
	}
	ps := kv.pageSize()
	page := table[int(slot)*kv.TablePages()+int(pos)/ps]
	if page < 0 || int(page) >= kv.Pages {
		return -1
	}
	return (int(page)*ps + int(pos)%ps) * kv.KVDim
}

// RefKVWrite is the CPU reference of KVWrite over a pool viewed as
// halfwords (f16 values, or the 17 / 9 halfwords of each q8_0 / q4_0
// block), quantizing with gguf/quant.
func RefKVWrite(cache []uint16, src []float32, slot, pos, table []int32, rows int, kv KVParams) {
	rb := kv.Type.RowBytes(kv.KVDim)
	for r := 0; r < rows; r++ {
		base := kvRow(table, slot[r], pos[r], kv)
		if base < 0 {
			continue
		}
		x := src[r*kv.KVDim : (r+1)*kv.KVDim]
		if kv.Type == KVF16 {
			for i, v := range x {
				cache[base+i] = F16FromF32(v)
			}
			continue
		}
		row := base / kv.KVDim
		dst := unsafe.Slice((*byte)(unsafe.Pointer(&cache[0])), 2*len(cache))[row*rb : (row+1)*rb]
		if err := quant.QuantizeTo(kv.Type.ggml(), dst, x); err != nil {
			panic("BUG: ops: RefKVWrite: " + err.Error())
		}
	}
}

// DequantizeKV returns the values of a pool of type t with rows of kvDim
// values, viewed as halfwords (see RefKVWrite), in the f16 layout's order.
func DequantizeKV(cache []uint16, t KVType, kvDim int) []float32 {
	if t == KVF16 {
		out := make([]float32, len(cache))
		for i, h := range cache {
			out[i] = F32FromF16(h)
		}
		return out
	}
	rows := 2 * len(cache) / t.RowBytes(kvDim)
	out := make([]float32, rows*kvDim)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&cache[0])), rows*t.RowBytes(kvDim))
	if err := quant.Dequantize(t.ggml(), b, out); err != nil {
		panic("BUG: ops: DequantizeKV: " + err.Error())
	}
	return out
}

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
// must have a page in the pool.
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
				k.window(slot, 0, 4*uint64(p.Rows)), k.window(pos, 0, 4*uint64(p.Rows)), k.window(out, 0, qn), tb); err != nil {
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
			k.window(slot, 0, 4*uint64(p.Rows)), k.window(pos, 0, 4*uint64(p.Rows)), k.window(out, 0, qn), tb)
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
		k.window(slot, 0, 4*uint64(p.Rows)), k.window(pos, 0, 4*uint64(p.Rows)), scratch, tb); err != nil {
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
// as halfwords (see RefKVWrite), dequantized with gguf/quant: plain
// two-pass softmax in float64.
func RefAttention(out, q []float32, kq, vq []uint16, slot, pos, table []int32, p AttnParams) error {
	if err := p.check(); err != nil {
		return err
	}
	kc, vc := DequantizeKV(kq, p.Cache.Type, p.Cache.KVDim), DequantizeKV(vq, p.VType, p.Cache.KVDim)
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
			for j := lo; j < nk; j++ {
				base := kvRow(table, slot[r], int32(j), p.Cache)
				if base < 0 {
					return fmt.Errorf("ops: RefAttention: row %d: position %d of slot %d has no page", r, j, slot[r])
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

// ArgmaxPush mirrors the push-constant block of argmax.comp.
type ArgmaxPush struct {
	Rows, Cols uint32
}

// ArgmaxNone is what Argmax writes for a row with no element above -Inf
// (every one -Inf or NaN); as an int32 it is -1.
const ArgmaxNone = 0xFFFFFFFF

// Argmax records dst[r] = index of the largest element of src row r (the
// first on ties; NaN and -Inf never chosen, ArgmaxNone when nothing else is
// left) as uint32, over rows x cols f32. It is the sampler's greedy pick
// exactly, so a greedy sequence can take its token from the device.
func (k *Kernels) Argmax(c *vk.Cmd, dst, src vk.Range, rows, cols int) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("ops: Argmax: shape %dx%d", rows, cols)
	}
	if err := sized("Argmax", "src", src, 4*uint64(rows*cols)); err != nil {
		return err
	}
	if err := sized("Argmax", "dst", dst, 4*uint64(rows)); err != nil {
		return err
	}
	rowBytes := 4 * uint64(cols)
	return k.rowChunks("Argmax", rows, rowBytes, func(r0, nr int) error {
		push := ArgmaxPush{Rows: uint32(nr), Cols: uint32(cols)}
		return Record(k, c, k.pick("argmax_f32", "argmax_f32_sg"), []uint32{k.wg}, k.Groups(uint32(nr)), &push,
			k.window(src, uint64(r0)*rowBytes, uint64(nr)*rowBytes), k.window(dst, 4*uint64(r0), 4*uint64(nr)))
	})
}

// RefArgmax is the CPU reference of Argmax.
func RefArgmax(dst []uint32, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		best, bi := float32(math.Inf(-1)), uint32(ArgmaxNone)
		for i, v := range src[r*cols : (r+1)*cols] {
			if v > best {
				best, bi = v, uint32(i)
			}
		}
		dst[r] = bi
	}
}

// MaxTopK is the largest k TopK supports.
const MaxTopK = 64

// TopKPush mirrors the push-constant block of topk.comp.
type TopKPush struct {
	Rows, Cols, K uint32
	Skip          uint32 // elements of the binding before the first row
}

// TopK records, for each of rows rows of cols f32, the k largest elements
// sorted by value descending (ties, -0 = +0, by index ascending; NaNs last)
// into idx (uint32) and vals (f32), both [rows][k]. 1 <= k <= min(cols,
// MaxTopK). src may start at any multiple of 4 bytes (rows after others in
// a logits buffer): the kernel binds from the aligned offset below it.
func (k *Kernels) TopK(c *vk.Cmd, idx, vals, src vk.Range, rows, cols, topK int) error {
	if rows <= 0 || cols <= 0 || topK <= 0 || topK > MaxTopK || topK > cols {
		return fmt.Errorf("ops: TopK: %d rows of %d, k %d (want 1 <= k <= min(cols, %d))", rows, cols, topK, MaxTopK)
	}
	if err := sized("TopK", "src", src, 4*uint64(rows*cols)); err != nil {
		return err
	}
	if src.Offset%4 != 0 {
		return fmt.Errorf("ops: TopK: src offset %d is not a multiple of 4", src.Offset)
	}
	for _, o := range []struct {
		what string
		r    vk.Range
	}{{"idx", idx}, {"vals", vals}} {
		if err := sized("TopK", o.what, o.r, 4*uint64(rows*topK)); err != nil {
			return err
		}
	}
	align := max(k.dev.Limits().MinStorageOffsetAlign, 4)
	rowBytes := 4 * uint64(cols)
	outBytes := 4 * uint64(topK)
	// At most this many rows fit in one binding after the worst skip;
	// output chunks start at multiples of 64 rows, or of whatever keeps
	// them aligned.
	per := int((k.dev.MaxBinding() - align) / rowBytes)
	if per == 0 {
		return fmt.Errorf("ops: TopK: a row of %d bytes exceeds one storage binding (%d bytes)", rowBytes, k.dev.MaxBinding())
	}
	if rows > per {
		if per >= 64 {
			per &^= 63
		}
		for per > 1 && (uint64(per)*outBytes)%align != 0 {
			per--
		}
		if (uint64(per)*outBytes)%align != 0 {
			return fmt.Errorf("ops: TopK: %d rows of %d cannot be split at aligned offsets", rows, cols)
		}
	}
	for r0 := 0; r0 < rows; r0 += per {
		nr := min(per, rows-r0)
		start := src.Offset + uint64(r0)*rowBytes
		base := start &^ (align - 1)
		in := vk.Range{Buf: src.Buf, Offset: base, Size: start - base + uint64(nr)*rowBytes}
		push := TopKPush{Rows: uint32(nr), Cols: uint32(cols), K: uint32(topK), Skip: uint32((start - base) / 4)}
		if err := Record(k, c, "top_k_f32", []uint32{k.wg}, k.Groups(uint32(nr)), &push, in,
			k.window(idx, uint64(r0)*outBytes, uint64(nr)*outBytes), k.window(vals, uint64(r0)*outBytes, uint64(nr)*outBytes)); err != nil {
			return err
		}
	}
	return nil
}

// RefTopK is the CPU reference of TopK.
func RefTopK(idx []uint32, vals []float32, src []float32, rows, cols, topK int) {
	order := make([]int, cols)
	for r := 0; r < rows; r++ {
		x := src[r*cols : (r+1)*cols]
		for i := range order {
			order[i] = i
		}
		less := func(a, b int) bool { // a ranks before b
			xa, xb := x[a], x[b]
			na, nb := xa != xa, xb != xb
			switch {
			case na != nb:
				return nb
			case na || xa == xb:
				return a < b
			}
			return xa > xb
		}
		// Partial selection sort is enough for k <= MaxTopK.
		for j := 0; j < topK; j++ {
			best := j
			for i := j + 1; i < cols; i++ {
				if less(order[i], order[best]) {
					best = i
				}
			}
			order[j], order[best] = order[best], order[j]
			idx[r*topK+j] = uint32(order[j])
			vals[r*topK+j] = x[order[j]]
		}
	}
}
