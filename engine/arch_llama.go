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
	TokenEmbd  *Tensor `gguf:"token_embd.weight"`
	OutputNorm *Tensor `gguf:"output_norm.weight"`
	Output     *Tensor `gguf:"output.weight,optional"`
	// RopeFreqs divides the RoPE frequencies per dimension pair: Llama
	// 3.1-3.3 files carry their llama3 rope scaling so.
	RopeFreqs *Tensor      `gguf:"rope_freqs.weight,optional"`
	Blocks    []llamaBlock `gguf:"blk"`

	eps  float32
	rope Rope
	attn Attn
}

type llamaBlock struct {
	AttnNorm *Tensor `gguf:"attn_norm.weight"`
	Q        *Tensor `gguf:"attn_q.weight"`
	K        *Tensor `gguf:"attn_k.weight"`
	V        *Tensor `gguf:"attn_v.weight"`
	QBias    *Tensor `gguf:"attn_q.bias,optional"`
	KBias    *Tensor `gguf:"attn_k.bias,optional"`
	VBias    *Tensor `gguf:"attn_v.bias,optional"`
	QNorm    *Tensor `gguf:"attn_q_norm.weight,optional"`
	KNorm    *Tensor `gguf:"attn_k_norm.weight,optional"`
	Out      *Tensor `gguf:"attn_output.weight"`
	FFNNorm  *Tensor `gguf:"ffn_norm.weight"`
	Gate     *Tensor `gguf:"ffn_gate.weight,optional"`
	Up       *Tensor `gguf:"ffn_up.weight,optional"`
	Down     *Tensor `gguf:"ffn_down.weight,optional"`
	// The mixture-of-experts FFN (qwen3moe) in place of Gate, Up and
	// Down: the router and the experts' 3-D tensors.
	GateInp  *Tensor `gguf:"ffn_gate_inp.weight,optional"`
	GateExps *Tensor `gguf:"ffn_gate_exps.weight,optional"`
	UpExps   *Tensor `gguf:"ffn_up_exps.weight,optional"`
	DownExps *Tensor `gguf:"ffn_down_exps.weight,optional"`
	moe      *MoE
	// QKV, QKVBias and GateUp join Q|K|V, their biases and Gate|Up for
	// the fused kernels (fuseRows; nil where they do not fuse).
	QKV, QKVBias, GateUp *Tensor
}

func loadLlama(f *gguf.File, o Options) (archModel, error) {
	m := &llamaModel{Blocks: make([]llamaBlock, o.Layers)}
	if err := bindTensors(f, "", m); err != nil {
		return nil, err
	}
	if m.Output == nil {
		m.Output = m.TokenEmbd
	}
	E, q, kv := o.Embd, o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	want := []shape{{m.TokenEmbd, E, o.Vocab}, {m.OutputNorm, E, 1}, {m.Output, E, o.Vocab}, {m.RopeFreqs, o.RopeDim / 2, 1}}
	for i := range m.Blocks {
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		switch o.Arch {
		case "qwen2":
			if err := require(o.Arch, []string{p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"}, b.QBias, b.KBias, b.VBias); err != nil {
				return nil, err
			}
		case "qwen3", "qwen3moe":
			if err := require(o.Arch, []string{p + "attn_q_norm.weight", p + "attn_k_norm.weight"}, b.QNorm, b.KNorm); err != nil {
				return nil, err
			}
		}
		if o.Arch == "qwen3moe" {
			if err := require(o.Arch, []string{p + "ffn_gate_inp.weight", p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight", p + "ffn_down_exps.weight"},
				b.GateInp, b.GateExps, b.UpExps, b.DownExps); err != nil {
				return nil, err
			}
			b.moe = &MoE{Router: b.GateInp, Gate: b.GateExps, Up: b.UpExps, Down: b.DownExps, Used: o.ExpertsUsed, Gating: ops.GatingSoftmax, Norm: true}
			if err := checkMoE(b.moe, E, o.ExpertFFN, o.Experts); err != nil {
				return nil, err
			}
		} else if err := require(o.Arch, []string{p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight"}, b.Gate, b.Up, b.Down); err != nil {
			return nil, err
		}
		want = append(want,
			shape{b.AttnNorm, E, 1}, shape{b.Q, E, q}, shape{b.K, E, kv}, shape{b.V, E, o.KVHeads * o.HeadDimV},
			shape{b.QBias, q, 1}, shape{b.KBias, kv, 1}, shape{b.VBias, o.KVHeads * o.HeadDimV, 1},
			shape{b.QNorm, o.HeadDim, 1}, shape{b.KNorm, o.HeadDim, 1}, shape{b.Out, o.Heads * o.HeadDimV, E},
			shape{b.FFNNorm, E, 1}, shape{b.Gate, E, o.FFN}, shape{b.Up, E, o.FFN}, shape{b.Down, o.FFN, E})
	}
	if err := checkShapes(want); err != nil {
		return nil, err
	}
	for i := range m.Blocks {
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		b.QKV = fuseRows(p+"attn_qkv.weight", b.Q, b.K, b.V)
		if b.QKV != nil {
			b.QKVBias = fuseRows(p+"attn_qkv.bias", b.QBias, b.KBias, b.VBias)
		}
		b.GateUp = fuseRows(p+"ffn_gate_up.weight", b.Gate, b.Up)
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
