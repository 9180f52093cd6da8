package engine

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
)

// llamaModel is the Llama decoder (Llama 2 and 3.x, Mistral, TinyLlama,
// SmolLM, ...) and the two that differ from it only in their attention
// inputs: Qwen 2 (q/k/v biases, NeoX RoPE) and Qwen 3 (per-head q/k
// RMSNorm, NeoX RoPE), and Qwen3-MoE, Qwen 3 with a mixture-of-experts FFN
// (softmax gating, the picked weights renormalised). Pre-norm blocks: RMSNorm, attention added to the
// residual stream, RMSNorm, SwiGLU FFN added to it; the output reuses
// token_embd.weight when output.weight is absent.
type llamaModel struct {
	TokenEmbd *Tensor `gguf:"token_embd.weight" shape:"E,V" gen:"std=1"`
	// RopeFreqs divides the RoPE frequencies per dimension pair: Llama
	// 3.1-3.3 files carry their llama3 rope scaling so.
	RopeFreqs  *Tensor      `gguf:"rope_freqs.weight,optional" shape:"R/2" gen:"rope_freqs,divisors=8"`
	Blocks     []llamaBlock `gguf:"blk"`
	OutputNorm *Tensor      `gguf:"output_norm.weight" shape:"E"`
	Output     *Tensor      `gguf:"output.weight,optional" shape:"E,V" gen:"untied"`

	eps  float32
	rope Rope
	attn Attn
}

type llamaBlock struct {
	AttnNorm *Tensor `gguf:"attn_norm.weight" shape:"E"`
	Q        *Tensor `gguf:"attn_q.weight" shape:"E,q"`
	K        *Tensor `gguf:"attn_k.weight" shape:"E,kv"`
	V        *Tensor `gguf:"attn_v.weight" shape:"E,kvv"`
	QBias    *Tensor `gguf:"attn_q.bias,optional" shape:"q" need:"qwen2"`
	KBias    *Tensor `gguf:"attn_k.bias,optional" shape:"kv" need:"qwen2"`
	VBias    *Tensor `gguf:"attn_v.bias,optional" shape:"kvv" need:"qwen2"`
	QNorm    *Tensor `gguf:"attn_q_norm.weight,optional" shape:"D" need:"qwen3"`
	KNorm    *Tensor `gguf:"attn_k_norm.weight,optional" shape:"D" need:"qwen3"`
	Out      *Tensor `gguf:"attn_output.weight" shape:"qv,E"`
	FFNNorm  *Tensor `gguf:"ffn_norm.weight" shape:"E"`
	Gate     *Tensor `gguf:"ffn_gate.weight,optional" shape:"E,F" need:"llama,qwen2,qwen3"`
	Up       *Tensor `gguf:"ffn_up.weight,optional" shape:"E,F" need:"llama,qwen2,qwen3"`
	Down     *Tensor `gguf:"ffn_down.weight,optional" shape:"F,E" need:"llama,qwen2,qwen3"`
	// The mixture-of-experts FFN (qwen3moe) in place of Gate, Up and
	// Down: the router and the experts' 3-D tensors.
	GateInp  *Tensor `gguf:"ffn_gate_inp.weight,optional" shape:"E,X" need:"qwen3moe"`
	GateExps *Tensor `gguf:"ffn_gate_exps.weight,optional" shape:"E,FX,X" need:"qwen3moe"`
	UpExps   *Tensor `gguf:"ffn_up_exps.weight,optional" shape:"E,FX,X" need:"qwen3moe"`
	DownExps *Tensor `gguf:"ffn_down_exps.weight,optional" shape:"FX,E,X" need:"qwen3moe"`
	moe      *MoE
	// QKV, QKVBias and GateUp join Q|K|V, their biases and Gate|Up for
	// the fused kernels (fuseRows; nil where they do not fuse), and
	// GateUpExps the gate and up experts (fuseExperts).
	QKV, QKVBias, GateUp, GateUpExps *Tensor
}

func loadLlama(f *gguf.File, o Options) (archModel, error) {
	m := &llamaModel{Blocks: make([]llamaBlock, o.Layers)}
	if err := bindTensors(f, "", m); err != nil {
		return nil, err
	}
	if err := checkTensors(m, o); err != nil {
		return nil, err
	}
	if m.Output == nil {
		m.Output = m.TokenEmbd
	}
	for i := range m.Blocks {
		if b := &m.Blocks[i]; b.GateExps != nil {
			b.moe = &MoE{Router: b.GateInp, Gate: b.GateExps, Up: b.UpExps, Down: b.DownExps, Used: o.ExpertsUsed, Gating: ops.GatingSoftmax, Norm: true}
			if err := checkMoE(b.moe, o.Experts); err != nil {
				return nil, err
			}
		}
	}
	for i := range m.Blocks {
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		b.QKV = fuseRows(p+"attn_qkv.weight", b.Q, b.K, b.V)
		if b.QKV != nil {
			b.QKVBias = fuseRows(p+"attn_qkv.bias", b.QBias, b.KBias, b.VBias)
		}
		b.GateUp = fuseRows(p+"ffn_gate_up.weight", b.Gate, b.Up)
		b.GateUpExps = fuseExperts(p+"ffn_gate_up_exps.weight", b.GateExps, b.UpExps)
	}
	m.eps = o.NormEps
	m.rope = o.rope(o.Arch != "llama", o.RopeBase, o.RopeScale)
	m.rope.Factors = m.RopeFreqs
	m.attn = Attn{Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Scale: float32(1 / math.Sqrt(float64(o.HeadDim)))}
	return m, nil
}

func (m *llamaModel) forward(g Graph) {
	x := g.Embed(m.TokenEmbd)
	g.EmbedInputs(x)
	for i := range m.Blocks {
		g.Layer()
		m.Blocks[i].attention(g, x, m, i)
		m.Blocks[i].feedForward(g, x, m)
	}
	h := g.RMSNorm(g.OutputRows(x), m.OutputNorm, m.eps)
	g.Hidden(h)
	g.Logits(m.Output, h, 0)
}

// attention adds the self-attention of the normed x to x.
func (b *llamaBlock) attention(g Graph, x Act, m *llamaModel, layer int) {
	h := g.RMSNorm(x, b.AttnNorm, m.eps)
	qkv := g.QKV(h, [3]*Tensor{b.Q, b.K, b.V}, [3]*Tensor{b.QBias, b.KBias, b.VBias})
	q, k, v := qkv[0], qkv[1], qkv[2]
	if b.QNorm != nil {
		g.RMSNormInPlace(q.Heads(m.attn.Heads), b.QNorm, m.eps)
	}
	if b.KNorm != nil {
		g.RMSNormInPlace(k.Heads(m.attn.KVHeads), b.KNorm, m.eps)
	}
	a := m.attn
	a.Layer, a.Rope = layer, &m.rope // q and k turn in the attention's cache write
	g.MatMulAdd(x, b.Out, g.Attention(q, k, v, a))
}

// feedForward adds the SwiGLU FFN (or the mixture of experts) of the normed
// x to x.
func (b *llamaBlock) feedForward(g Graph, x Act, m *llamaModel) {
	h := g.RMSNorm(x, b.FFNNorm, m.eps)
	if b.moe != nil {
		g.MoEAdd(x, h, b.moe)
		return
	}
	g.MatMulAdd(x, b.Down, g.GLU(h, b.Gate, b.Up, false))
}
