package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// BatchAttnParams describe an AttentionBatch dispatch.
type BatchAttnParams struct {
	Rows, Heads, KVHeads, HeadDim int
	Scale                         float32 // multiplies q.k
	// Sinks, when it has a buffer, holds Heads f32 attention-sink logits,
	// as AttnParams.Sinks.
	Sinks vk.Range
}

// BatchAttnPush mirrors the push-constant block of attn_batch.comp.
type BatchAttnPush struct {
	Rows, Heads, KVHeads, HeadDim uint32
	Scale                         float32
	Sinks                         uint32 // 1: binding 6 holds the sinks
}

func (p *BatchAttnParams) check() error {
	if p.Rows <= 0 || p.Heads <= 0 || p.KVHeads <= 0 || p.Heads%p.KVHeads != 0 || p.HeadDim <= 0 || p.HeadDim > MaxHeadDim {
		return fmt.Errorf("ops: AttentionBatch: bad parameters %+v", *p)
	}
	return nil
}

// AttentionBatch records the bidirectional attention of encoders, which
// keep no KV cache: every row attends to the rows of its own sequence in
// the batch. A sequence's rows are consecutive at positions 0..n-1, so row
// r sees rows r-pos[r] .. end[r]-1 (pos and end int32 per row; end is one
// past the row's sequence). q and out are [Rows][Heads][HeadDim] f32, k and
// v [Rows][KVHeads][HeadDim] f32 (GQA as Attention). p.Sinks adds
// attention sinks as Attention's.
func (k *Kernels) AttentionBatch(c *vk.Cmd, out, q, kk, v, pos, end vk.Range, p BatchAttnParams) error {
	if err := p.check(); err != nil {
		return err
	}
	qn := 4 * uint64(p.Rows*p.Heads*p.HeadDim)
	kn := 4 * uint64(p.Rows*p.KVHeads*p.HeadDim)
	for _, o := range []struct {
		what string
		r    vk.Range
		n    uint64
	}{{"out", out, qn}, {"q", q, qn}, {"k", kk, kn}, {"v", v, kn}, {"pos", pos, 4 * uint64(p.Rows)}, {"end", end, 4 * uint64(p.Rows)}} {
		if err := sized("AttentionBatch", o.what, o.r, o.n); err != nil {
			return err
		}
		if o.n > k.dev.MaxBinding() {
			return fmt.Errorf("ops: AttentionBatch: %s of %d bytes exceeds one binding", o.what, o.n)
		}
	}
	push := BatchAttnPush{Rows: uint32(p.Rows), Heads: uint32(p.Heads), KVHeads: uint32(p.KVHeads), HeadDim: uint32(p.HeadDim), Scale: p.Scale}
	sinks := k.window(pos, 0, 4*uint64(p.Rows)) // bound, unread, without sinks
	if p.Sinks.Buf != nil {
		if err := sized("AttentionBatch", "sinks", p.Sinks, 4*uint64(p.Heads)); err != nil {
			return err
		}
		sinks, push.Sinks = k.window(p.Sinks, 0, 4*uint64(p.Heads)), 1
	}
	return Record(k, c, k.pick("attn_batch_f32", "attn_batch_f32_sg"), []uint32{k.attnWG}, k.Groups(uint32(p.Rows*p.Heads)), &push,
		k.window(q, 0, qn), k.window(kk, 0, kn), k.window(v, 0, kn), k.window(pos, 0, 4*uint64(p.Rows)),
		k.window(end, 0, 4*uint64(p.Rows)), k.window(out, 0, qn), sinks)
}

// RefAttentionBatch is the CPU reference of AttentionBatch: two-pass
// softmax in float64, with sinks (nil: none; else p.Heads logits, p.Sinks
// being ignored) as RefAttentionF32's.
func RefAttentionBatch(out, q, kk, v []float32, pos, end []int32, sinks []float32, p BatchAttnParams) error {
	if err := p.check(); err != nil {
		return err
	}
	if sinks != nil && len(sinks) != p.Heads {
		return fmt.Errorf("ops: RefAttentionBatch: %d sinks, want one per head (%d)", len(sinks), p.Heads)
	}
	D, stride, group := p.HeadDim, p.KVHeads*p.HeadDim, p.Heads/p.KVHeads
	s := make([]float64, p.Rows)
	acc := make([]float64, D)
	for r := 0; r < p.Rows; r++ {
		beg, fin := max(r-int(pos[r]), 0), min(max(int(end[r]), 0), p.Rows)
		for h := 0; h < p.Heads; h++ {
			o := out[(r*p.Heads+h)*D : (r*p.Heads+h+1)*D]
			if beg >= fin {
				clear(o)
				continue
			}
			qv := q[(r*p.Heads+h)*D:]
			kvh := h / group
			m := math.Inf(-1)
			if sinks != nil {
				m = float64(sinks[h])
			}
			for j := beg; j < fin; j++ {
				var dot float64
				for d := 0; d < D; d++ {
					dot += float64(qv[d]) * float64(kk[j*stride+kvh*D+d])
				}
				s[j] = dot * float64(p.Scale)
				m = math.Max(m, s[j])
			}
			var sum float64
			if sinks != nil {
				sum = math.Exp(float64(sinks[h]) - m) // a weight with no value
			}
			clear(acc)
			for j := beg; j < fin; j++ {
				w := math.Exp(s[j] - m)
				sum += w
				for d := 0; d < D; d++ {
					acc[d] += w * float64(v[j*stride+kvh*D+d])
				}
			}
			for d := range o {
				o[d] = float32(acc[d] / sum)
			}
		}
	}
	return nil
}
