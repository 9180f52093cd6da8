package engine

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
)

// gptossModel is OpenAI's gpt-oss: pre-norm blocks whose attention has
// biases on q, k, v and the output, a learned sink logit per head in every
// softmax, and a sliding window on every other layer (0, 2, ...: the
// reference's pattern 2); post_attention_norm is the FFN's pre-norm, and
// the FFN is a mixture of experts with a biased router (the top experts
// of the raw logits, a softmax over those), biased experts and gpt-oss's
// clamped SwiGLU. RoPE is NeoX with YaRN scaling as the file says.
type gptossModel struct {
	TokenEmbd  *Tensor       `gguf:"token_embd.weight" shape:"E,V" gen:"std=1"`
	Blocks     []gptossBlock `gguf:"blk"`
	OutputNorm *Tensor       `gguf:"output_norm.weight" shape:"E"`
	Output     *Tensor       `gguf:"output.weight,optional" shape:"E,V" gen:"untied"`

	eps  float32
	rope Rope
}

type gptossBlock struct {
	AttnNorm *Tensor `gguf:"attn_norm.weight" shape:"E"`
	Q        *Tensor `gguf:"attn_q.weight" shape:"E,q"`
	QBias    *Tensor `gguf:"attn_q.bias" shape:"q"`
	K        *Tensor `gguf:"attn_k.weight" shape:"E,kv"`
	KBias    *Tensor `gguf:"attn_k.bias" shape:"kv"`
	V        *Tensor `gguf:"attn_v.weight" shape:"E,kvv"`
	VBias    *Tensor `gguf:"attn_v.bias" shape:"kvv"`
	Out      *Tensor `gguf:"attn_output.weight" shape:"qv,E"`
	OutBias  *Tensor `gguf:"attn_output.bias" shape:"E"`
	Sinks    *Tensor `gguf:"attn_sinks.weight" shape:"H" gen:"std=1"`
	PostNorm *Tensor `gguf:"post_attention_norm.weight" shape:"E"`
	Router   *Tensor `gguf:"ffn_gate_inp.weight" shape:"E,X"`
	RouterB  *Tensor `gguf:"ffn_gate_inp.bias" shape:"X"`
	GateExps *Tensor `gguf:"ffn_gate_exps.weight" shape:"E,FX,X"`
	GateExpB *Tensor `gguf:"ffn_gate_exps.bias" shape:"FX,X"`
	UpExps   *Tensor `gguf:"ffn_up_exps.weight" shape:"E,FX,X"`
	UpExpB   *Tensor `gguf:"ffn_up_exps.bias" shape:"FX,X"`
	DownExps *Tensor `gguf:"ffn_down_exps.weight" shape:"FX,E,X"`
	DownExpB *Tensor `gguf:"ffn_down_exps.bias" shape:"E,X"`
	// QKV and QKVBias join Q|K|V and their biases (fuseRows), GateUpExps
	// the gate and up experts (fuseExperts).
	QKV, QKVBias, GateUpExps *Tensor

	attn Attn
	moe  *MoE
}

func loadGptOss(f *gguf.File, o Options) (archModel, error) {
	m := &gptossModel{Blocks: make([]gptossBlock, o.Layers)}
	if err := bindTensors(f, "", m); err != nil {
		return nil, err
	}
	if o.Experts == 0 {
		return nil, fmt.Errorf("engine: gpt-oss needs %s.expert_count", o.Arch)
	}
	if err := checkTensors(m, o); err != nil {
		return nil, err
	}
	if m.Output == nil {
		m.Output = m.TokenEmbd
	}
	window, err := optInt(f, o.Arch+".attention.sliding_window", 128)
	if err != nil {
		return nil, err
	}
	scale := float32(1 / math.Sqrt(float64(o.HeadDim)))
	for i := range m.Blocks {
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		b.moe = &MoE{Router: b.Router, RouterBias: b.RouterB, Gate: b.GateExps, Up: b.UpExps, Down: b.DownExps,
			GateBias: b.GateExpB, UpBias: b.UpExpB, DownBias: b.DownExpB, Used: o.ExpertsUsed, Gating: ops.GatingSoftmaxWeight, OAI: true}
		if err := checkMoE(b.moe, o.Experts); err != nil {
			return nil, err
		}
		b.attn = Attn{Layer: i, Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Scale: scale, Sinks: b.Sinks}
		if i%2 == 0 {
			b.attn.Window = window
		}
		if err := b.attn.checkSinks(); err != nil {
			return nil, err
		}
		b.QKV = fuseRows(p+"attn_qkv.weight", b.Q, b.K, b.V)
		if b.QKV != nil {
			b.QKVBias = fuseRows(p+"attn_qkv.bias", b.QBias, b.KBias, b.VBias)
		}
		b.GateUpExps = fuseExperts(p+"ffn_gate_up_exps.weight", b.GateExps, b.UpExps)
	}
	m.eps = o.NormEps
	m.rope = o.rope(true, o.RopeBase, o.RopeScale)
	return m, nil
}

func (m *gptossModel) forward(g Graph) {
	x := g.Embed(m.TokenEmbd)
	g.EmbedInputs(x)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		g.Layer()
		h := g.RMSNorm(x, b.AttnNorm, m.eps)
		qkv := g.QKV(h, [3]*Tensor{b.Q, b.K, b.V}, [3]*Tensor{b.QBias, b.KBias, b.VBias})
		a := b.attn
		a.Rope = &m.rope // q and k turn in the attention's cache write
		g.MatMulAdd(x, b.Out, g.Attention(qkv[0], qkv[1], qkv[2], a))
		g.AddBias(x, b.OutBias)
		g.MoEAdd(x, g.RMSNorm(x, b.PostNorm, m.eps), b.moe)
	}
	h := g.RMSNorm(g.OutputRows(x), m.OutputNorm, m.eps)
	g.Hidden(h)
	g.Logits(m.Output, h, 0)
}
