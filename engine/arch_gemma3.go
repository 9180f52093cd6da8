package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/gguf"
)

// gemmaModel is Gemma 3: the input embedding scaled by sqrt(embd), per-head
// q/k RMSNorm, RMSNorm after the attention and after the FFN (before each
// residual add), a GeGLU FFN (tanh-GELU(gate) * up), and sliding-window
// layers: all but every pattern-th layer see only the last window
// positions and rotate with their own RoPE base, unscaled; the global
// layers take the file's RoPE base and scaling. Norm weights are stored
// with Gemma's +1 already added. The output reuses token_embd.weight.
// Gemma 2 (arch_gemma2.go) is the same block without the q/k norms, with
// soft-capped attention scores and logits.
type gemmaModel struct {
	TokenEmbd  *Tensor      `gguf:"token_embd.weight" shape:"E,V" gen:"std=1"`
	Blocks     []gemmaBlock `gguf:"blk"`
	OutputNorm *Tensor      `gguf:"output_norm.weight" shape:"E"`
	Output     *Tensor      `gguf:"output.weight,optional" shape:"E,V" gen:"untied"`

	eps      float32
	embScale float32
	ropes    []Rope  // per layer
	attns    []Attn  // per layer
	softcap  float32 // final logit soft-capping (Gemma 2); 0: none
}

type gemmaBlock struct {
	AttnNorm     *Tensor `gguf:"attn_norm.weight" shape:"E"`
	Q            *Tensor `gguf:"attn_q.weight" shape:"E,q"`
	K            *Tensor `gguf:"attn_k.weight" shape:"E,kv"`
	V            *Tensor `gguf:"attn_v.weight" shape:"E,kvv"`
	QNorm        *Tensor `gguf:"attn_q_norm.weight,optional" shape:"D" need:"gemma3"`
	KNorm        *Tensor `gguf:"attn_k_norm.weight,optional" shape:"D" need:"gemma3"`
	Out          *Tensor `gguf:"attn_output.weight" shape:"qv,E"`
	PostAttnNorm *Tensor `gguf:"post_attention_norm.weight" shape:"E"`
	PostFFNNorm  *Tensor `gguf:"post_ffw_norm.weight" shape:"E"`
	FFNNorm      *Tensor `gguf:"ffn_norm.weight" shape:"E"`
	Gate         *Tensor `gguf:"ffn_gate.weight" shape:"E,F"`
	Up           *Tensor `gguf:"ffn_up.weight" shape:"E,F"`
	Down         *Tensor `gguf:"ffn_down.weight" shape:"F,E"`
	// QKV and GateUp join Q|K|V and Gate|Up for the fused kernels
	// (fuseRows; nil where they do not fuse).
	QKV, GateUp *Tensor
}

// optInt reads an optional integer key (def when absent).
func optInt(f *gguf.File, key string, def int) (int, error) {
	v, err := f.Int(key)
	switch {
	case errors.Is(err, gguf.ErrKeyNotFound):
		return def, nil
	case err != nil:
		return 0, err
	case v < 0 || v > 1<<30:
		return 0, fmt.Errorf("engine: %s = %d is out of range", key, v)
	}
	return int(v), nil
}

// bindGemma binds and checks the tensors of a Gemma 2 or 3 file.
func bindGemma(f *gguf.File, o Options) (*gemmaModel, error) {
	m := &gemmaModel{Blocks: make([]gemmaBlock, o.Layers)}
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
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		b.QKV = fuseRows(p+"attn_qkv.weight", b.Q, b.K, b.V)
		b.GateUp = fuseRows(p+"ffn_gate_up.weight", b.Gate, b.Up)
	}
	m.eps = o.NormEps
	m.embScale = float32(math.Sqrt(float64(o.Embd)))
	return m, nil
}

func loadGemma3(f *gguf.File, o Options) (archModel, error) {
	m, err := bindGemma(f, o)
	if err != nil {
		return nil, err
	}
	p := o.Arch + "."
	// As the reference: no window without attention.sliding_window,
	// pattern 6 and local base 10000 when their keys are absent.
	window, err := optInt(f, p+"attention.sliding_window", 0)
	if err != nil {
		return nil, err
	}
	pattern, err := optInt(f, p+"attention.sliding_window_pattern", 6)
	if err != nil {
		return nil, err
	}
	baseSWA := float32(10000)
	if v, err := f.Float(p + "rope.freq_base_swa"); err == nil {
		baseSWA = float32(v)
	}
	// Gemma 3 27B (62 layers) scales queries by 1/sqrt(embd/heads), the
	// others by 1/sqrt(head_dim), as the reference.
	scale := float32(1 / math.Sqrt(float64(o.HeadDim)))
	if o.Layers == 62 {
		scale = float32(1 / math.Sqrt(float64(o.Embd/o.Heads)))
	}
	for l := range o.Layers {
		local := window > 0 && (pattern == 0 || l%pattern < pattern-1)
		a := Attn{Layer: l, Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Scale: scale}
		r := o.rope(true, o.RopeBase, o.RopeScale)
		if local {
			a.Window = window
			r = o.rope(true, baseSWA, 1)
		}
		m.attns, m.ropes = append(m.attns, a), append(m.ropes, r)
	}
	return m, nil
}

func (m *gemmaModel) forward(g Graph) {
	x := g.Embed(m.TokenEmbd)
	g.Scale(x, m.embScale)
	g.EmbedInputs(x) // image embeddings are not scaled
	for i := range m.Blocks {
		g.Layer()
		m.Blocks[i].attention(g, x, m, i)
		m.Blocks[i].feedForward(g, x, m)
	}
	h := g.RMSNorm(g.OutputRows(x), m.OutputNorm, m.eps)
	g.Hidden(h)
	g.Logits(m.Output, h, m.softcap)
}

// attention adds the post-normed self-attention of the normed x to x.
func (b *gemmaBlock) attention(g Graph, x Act, m *gemmaModel, layer int) {
	a := m.attns[layer]
	h := g.RMSNorm(x, b.AttnNorm, m.eps)
	qkv := g.QKV(h, [3]*Tensor{b.Q, b.K, b.V}, [3]*Tensor{})
	q, k, v := qkv[0], qkv[1], qkv[2]
	if b.QNorm != nil {
		g.RMSNormInPlace(q.Heads(a.Heads), b.QNorm, m.eps)
		g.RMSNormInPlace(k.Heads(a.KVHeads), b.KNorm, m.eps)
	}
	a.Rope = &m.ropes[layer] // q and k turn in the attention's cache write
	o := g.MatMul(b.Out, g.Attention(q, k, v, a))
	g.RMSNormInPlace(o, b.PostAttnNorm, m.eps)
	g.Add(x, o)
}

// feedForward adds the post-normed GeGLU FFN of the normed x to x.
func (b *gemmaBlock) feedForward(g Graph, x Act, m *gemmaModel) {
	h := g.RMSNorm(x, b.FFNNorm, m.eps)
	o := g.MatMul(b.Down, g.GLU(h, b.Gate, b.Up, true))
	g.RMSNormInPlace(o, b.PostFFNNorm, m.eps)
	g.Add(x, o)
}
