package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/vk"
)

// RoPEKVParams describe a RoPEKV dispatch: Rope's Rows, Heads (q's
// heads), HeadDim and angles; KVHeads heads of k and v; K and V the
// layouts of the two page pools (KVDim = KVHeads*HeadDim both, their own
// element types).
type RoPEKVParams struct {
	Rope    RoPEParams
	KVHeads int
	K, V    KVParams
}

// RoPEKVPush mirrors the push-constant block of rope_kv.comp.
type RoPEKVPush struct {
	Rows, QHeads, KVHeads, HeadDim, RotDims uint32
	FreqBase, FreqScale                     float32
	HasFactors                              uint32
	AttnFactor, ExtFactor                   float32
	Corr0, Corr1                            float32
	NCtx, NSlots                            uint32
	PageShift, TableStride, NPages          uint32
}

// ropeKVNames are the rope_kv variants by K and V element type.
var ropeKVNames = [3][3]string{
	{"rope_kv_f32_f16_f16", "rope_kv_f32_f16_q8_0", "rope_kv_f32_f16_q4_0"},
	{"rope_kv_f32_q8_0_f16", "rope_kv_f32_q8_0_q8_0", "rope_kv_f32_q8_0_q4_0"},
	{"rope_kv_f32_q4_0_f16", "rope_kv_f32_q4_0_q8_0", "rope_kv_f32_q4_0_q4_0"},
}

// RoPEKV records, in one dispatch, what RoPE of q in place, RoPE of k and
// KVWrite of the rotated k and of v do: q (rows x Heads x HeadDim f32) is
// rotated in place; k and v (rows x KVDim f32) are only read, the rotated
// k going straight into kCache. pos, slot, table and factors are as RoPE's
// and KVWrite's (K and V share the page table; factors may have no
// buffer).
func (k *Kernels) RoPEKV(c *vk.Cmd, q, kSrc, vSrc, pos, slot, table, factors, kCache, vCache vk.Range, p RoPEKVParams) error {
	r, err := p.Rope.norm()
	if err != nil {
		return err
	}
	kvDim := p.KVHeads * r.HeadDim
	if err := p.K.check(); err != nil {
		return err
	}
	if err := p.V.check(); err != nil {
		return err
	}
	if p.KVHeads <= 0 || p.K.KVDim != kvDim || p.V.KVDim != kvDim || p.K.Slots != p.V.Slots || p.K.NCtx != p.V.NCtx ||
		p.K.Pages != p.V.Pages || p.K.pageSize() != p.V.pageSize() {
		return fmt.Errorf("ops: RoPEKV: %d kv heads of %d and caches %+v, %+v do not match", p.KVHeads, r.HeadDim, p.K, p.V)
	}
	if !k.dev.Features().Storage16 {
		return fmt.Errorf("ops: RoPEKV: device lacks 16-bit storage")
	}
	rows := uint64(r.Rows)
	qBytes, kvBytes := 4*rows*uint64(r.Heads*r.HeadDim), 4*rows*uint64(kvDim)
	tableBytes := 4 * uint64(p.K.Slots) * uint64(p.K.TablePages())
	for _, o := range []struct {
		what string
		r    vk.Range
		n    uint64
	}{{"q", q, qBytes}, {"k", kSrc, kvBytes}, {"v", vSrc, kvBytes}, {"pos", pos, 4 * rows}, {"slot", slot, 4 * rows},
		{"table", table, tableBytes}, {"K cache", kCache, p.K.PoolBytes()}, {"V cache", vCache, p.V.PoolBytes()}} {
		if err := sized("RoPEKV", o.what, o.r, o.n); err != nil {
			return err
		}
		if o.n > k.dev.MaxBinding() {
			return fmt.Errorf("ops: RoPEKV: %s of %d bytes exceeds one binding", o.what, o.n)
		}
	}
	push := RoPEKVPush{Rows: uint32(r.Rows), QHeads: uint32(r.Heads), KVHeads: uint32(p.KVHeads), HeadDim: uint32(r.HeadDim),
		RotDims: uint32(r.RotDims), FreqBase: r.FreqBase, FreqScale: r.FreqScale, AttnFactor: r.AttnFactor,
		ExtFactor: r.ExtFactor, Corr0: r.CorrDims[0], Corr1: r.CorrDims[1],
		NCtx: uint32(p.K.NCtx), NSlots: uint32(p.K.Slots), PageShift: p.K.pageShift(), TableStride: uint32(p.K.TablePages()),
		NPages: uint32(p.K.Pages)}
	f := k.window(pos, 0, 4*rows)
	if factors.Buf != nil {
		if err := sized("RoPEKV", "factors", factors, 4*uint64(r.RotDims/2)); err != nil {
			return err
		}
		f = k.window(factors, 0, 4*uint64(r.RotDims/2))
		push.HasFactors = 1
	}
	units := func(t KVType) uint64 {
		if t == KVF16 {
			return rows * uint64(kvDim)
		}
		return rows * uint64(kvDim/32)
	}
	n := rows*uint64(r.Heads*r.HeadDim/2) + units(p.K.Type) + units(p.V.Type)
	if n > 1<<32-1 {
		return fmt.Errorf("ops: RoPEKV: %d work items", n)
	}
	return Record(k, c, ropeKVNames[p.K.Type][p.V.Type], []uint32{k.wg, b2u(r.NeoX)}, k.Groups(ceilDiv(uint32(n), k.wg)), &push,
		k.window(q, 0, qBytes), k.window(kSrc, 0, kvBytes), k.window(vSrc, 0, kvBytes), k.window(slot, 0, 4*rows),
		k.window(pos, 0, 4*rows), k.window(table, 0, tableBytes), f, k.window(kCache, 0, p.K.PoolBytes()),
		k.window(vCache, 0, p.V.PoolBytes()))
}

// RefRoPEKV is the CPU reference of RoPEKV: RefRoPE of q in place and of
// a copy of k, then RefKVWrite of the rotated k into kCache and of v into
// vCache (pools viewed as halfwords, see RefKVWrite).
func RefRoPEKV(q, kSrc, vSrc []float32, pos, slot, table []int32, factors []float32, kCache, vCache []uint16, p RoPEKVParams) error {
	r := p.Rope
	if err := RefRoPE(q, append([]float32(nil), q...), pos, factors, r); err != nil {
		return err
	}
	kr := p.Rope
	kr.Heads = p.KVHeads
	kRot := make([]float32, len(kSrc))
	if err := RefRoPE(kRot, kSrc, pos, factors, kr); err != nil {
		return err
	}
	RefKVWrite(kCache, kRot, slot, pos, table, r.Rows, p.K)
	RefKVWrite(vCache, vSrc, slot, pos, table, r.Rows, p.V)
	return nil
}
