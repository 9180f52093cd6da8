package engine

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/gguf"
)

// phi3Model is Phi-3 (and 3.5): the Llama block with a fused q/k/v
// projection (attn_qkv: the rows of q, then k, then v) and a fused
// gate/up projection (ffn_up: the rows of gate, then up), split at load
// into weights of their own; partial NeoX RoPE with LongRoPE
// (rope_factors_short/long: per-pair divisors, the short ones while a
// sequence's context is at most rope.scaling.original_context_length, and
// rope.scaling.attn_factor multiplying cos and sin). The reference ignores
// Phi-3's attention.sliding_window, and so do we.
type phi3Model struct {
	TokenEmbd    *Tensor     `gguf:"token_embd.weight" shape:"E,V" gen:"std=1"`
	FactorsShort *Tensor     `gguf:"rope_factors_short.weight,optional" shape:"R/2" gen:"always,divisors=8"`
	FactorsLong  *Tensor     `gguf:"rope_factors_long.weight,optional" shape:"R/2" gen:"always,divisors=40"`
	Blocks       []phi3Block `gguf:"blk"`
	OutputNorm   *Tensor     `gguf:"output_norm.weight" shape:"E"`
	Output       *Tensor     `gguf:"output.weight,optional" shape:"E,V" gen:"untied"`

	eps     float32
	origCtx int
	rope    Rope
	// ropes are rope with the short and the long factors, each kept so
	// that the attention can point at it.
	ropes [2]Rope
	attn  Attn
}

type phi3Block struct {
	AttnNorm *Tensor `gguf:"attn_norm.weight" shape:"E"`
	// QKV is q|k|v (what the generator writes), split into Q, K and V
	// at load; files may carry the three instead.
	QKV     *Tensor `gguf:"attn_qkv.weight,optional" shape:"E,q+2*kv" gen:"always"`
	Q       *Tensor `gguf:"attn_q.weight,optional" shape:"E,q"`
	K       *Tensor `gguf:"attn_k.weight,optional" shape:"E,kv"`
	V       *Tensor `gguf:"attn_v.weight,optional" shape:"E,kv"`
	Out     *Tensor `gguf:"attn_output.weight" shape:"q,E"`
	FFNNorm *Tensor `gguf:"ffn_norm.weight" shape:"E"`
	Up      *Tensor `gguf:"ffn_up.weight" shape:"E,2*F"` // gate|up, split at load
	Down    *Tensor `gguf:"ffn_down.weight" shape:"F,E"`
	Gate    *Tensor
	// QKVJoined and GateUp join Q|K|V and Gate|Up again for the fused
	// kernels (fuseRows; the file's fused tensors are split above so
	// that prefill multiplies by the parts).
	QKVJoined, GateUp *Tensor
}

func loadPhi3(f *gguf.File, o Options) (archModel, error) {
	m := &phi3Model{Blocks: make([]phi3Block, o.Layers)}
	if err := bindTensors(f, "", m); err != nil {
		return nil, err
	}
	if err := checkTensors(m, o); err != nil {
		return nil, err
	}
	if m.Output == nil {
		m.Output = m.TokenEmbd
	}
	q, kv, F := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim, o.FFN
	for i := range m.Blocks {
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		var err error
		if b.QKV != nil {
			if b.Q, err = rowRange(b.QKV, p+"attn_qkv.weight[q]", 0, q); err != nil {
				return nil, err
			}
			if b.K, err = rowRange(b.QKV, p+"attn_qkv.weight[k]", q, q+kv); err != nil {
				return nil, err
			}
			if b.V, err = rowRange(b.QKV, p+"attn_qkv.weight[v]", q+kv, q+2*kv); err != nil {
				return nil, err
			}
			b.QKV = nil
		}
		for _, t := range []struct {
			t    *Tensor
			name string
		}{{b.Q, "attn_q.weight"}, {b.K, "attn_k.weight"}, {b.V, "attn_v.weight"}} {
			if t.t == nil {
				return nil, fmt.Errorf("engine: tensor %s%s is missing; %s needs it (or the fused %sattn_qkv.weight)", p, t.name, o.Arch, p)
			}
		}
		up := b.Up
		if b.Gate, err = rowRange(up, p+"ffn_up.weight[gate]", 0, F); err != nil {
			return nil, err
		}
		if b.Up, err = rowRange(up, p+"ffn_up.weight[up]", F, 2*F); err != nil {
			return nil, err
		}
	}
	for i := range m.Blocks {
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		b.QKVJoined = fuseRows(p+"attn_qkv.weight", b.Q, b.K, b.V)
		b.GateUp = fuseRows(p+"ffn_up.weight", b.Gate, b.Up)
	}
	if (m.FactorsLong == nil) != (m.FactorsShort == nil) {
		return nil, fmt.Errorf("engine: %s has only one of rope_factors_long.weight and rope_factors_short.weight", o.Arch)
	}
	m.eps, m.origCtx = o.NormEps, o.RopeOrigCtx
	m.rope = o.rope(true, o.RopeBase, o.RopeScale)
	m.ropes = [2]Rope{m.rope, m.rope}
	m.ropes[0].Factors, m.ropes[1].Factors = m.FactorsShort, m.FactorsLong
	m.attn = Attn{Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Scale: float32(1 / math.Sqrt(float64(o.HeadDim)))}
	return m, nil
}

func (m *phi3Model) forward(g Graph) {
	// LongRoPE: the short factors while a sequence fits the original
	// context, as the reference decides by the context per sequence.
	rope := &m.ropes[0]
	if m.origCtx > 0 && g.CtxSize() > m.origCtx {
		rope = &m.ropes[1]
	}
	x := g.Embed(m.TokenEmbd)
	g.EmbedInputs(x)
	for i := range m.Blocks {
		g.Layer()
		m.Blocks[i].attention(g, x, m, rope, i)
		m.Blocks[i].feedForward(g, x, m)
	}
	h := g.RMSNorm(g.OutputRows(x), m.OutputNorm, m.eps)
	g.Hidden(h)
	g.Logits(m.Output, h, 0)
}

// attention adds the self-attention of the normed x to x.
func (b *phi3Block) attention(g Graph, x Act, m *phi3Model, rope *Rope, layer int) {
	h := g.RMSNorm(x, b.AttnNorm, m.eps)
	qkv := g.QKV(h, [3]*Tensor{b.Q, b.K, b.V}, [3]*Tensor{})
	a := m.attn
	a.Layer, a.Rope = layer, rope // q and k turn in the attention's cache write
	q, k, v := qkv[0], qkv[1], qkv[2]
	g.MatMulAdd(x, b.Out, g.Attention(q, k, v, a))
}

// feedForward adds the SwiGLU FFN (of the split gate|up) of the normed x
// to x.
func (b *phi3Block) feedForward(g Graph, x Act, m *phi3Model) {
	h := g.RMSNorm(x, b.FFNNorm, m.eps)
	g.MatMulAdd(x, b.Down, g.GLU(h, b.Gate, b.Up, false))
}
