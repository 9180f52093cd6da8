package ops

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/gguf/quant"
	"github.com/vkllm/vkllm/vk"
)

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
