package engine

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
)

// qwen35Model is Qwen3.5, a hybrid: most layers are Gated DeltaNet linear
// attention, which keeps a fixed-size recurrent state per sequence (a
// convolution state and an SSM state; Options.Recurrent), and every
// full_attention_interval-th layer is full attention with q/k RMSNorm,
// partial NeoX RoPE (rope.dimension_sections: text tokens take their
// position in every section, so the rotation is plain NeoX over
// rope.dimension_count dimensions) and an output gate: attn_q yields each
// head's query and gate, and the attention's output is multiplied by
// sigmoid(gate). Every layer is pre-norm; post_attention_norm is the
// SwiGLU FFN's pre-norm. Layers past block_count (nextn_predict_layers,
// multi-token prediction) are not read.
type qwen35Model struct {
	TokenEmbd  *Tensor       `gguf:"token_embd.weight" shape:"E,V" gen:"std=1"`
	Blocks     []qwen35Block `gguf:"blk"`
	OutputNorm *Tensor       `gguf:"output_norm.weight" shape:"E"`
	Output     *Tensor       `gguf:"output.weight,optional" shape:"E,V" gen:"untied"`

	// RopeSections holds the frequency divisors of the rotated pairs that
	// encode text positions in interleaved M-RoPE (imropeFactors).
	RopeSections *Tensor

	eps  float32
	rope Rope
}

type qwen35Block struct {
	AttnNorm *Tensor `gguf:"attn_norm.weight" shape:"E"`
	PostNorm *Tensor `gguf:"post_attention_norm.weight" shape:"E"`
	Gate     *Tensor `gguf:"ffn_gate.weight,optional" shape:"E,F" need:"qwen35"`
	Up       *Tensor `gguf:"ffn_up.weight,optional" shape:"E,F" need:"qwen35"`
	Down     *Tensor `gguf:"ffn_down.weight,optional" shape:"F,E" need:"qwen35"`
	// qwen35moe's FFN in place of Gate, Up and Down: routed experts
	// (softmax gating, the picked weights renormalised) and a shared
	// expert scaled by sigmoid(GateInpShexp · x) per token.
	GateInp      *Tensor `gguf:"ffn_gate_inp.weight,optional" shape:"E,X" need:"qwen35moe"`
	GateExps     *Tensor `gguf:"ffn_gate_exps.weight,optional" shape:"E,FX,X" need:"qwen35moe"`
	UpExps       *Tensor `gguf:"ffn_up_exps.weight,optional" shape:"E,FX,X" need:"qwen35moe"`
	DownExps     *Tensor `gguf:"ffn_down_exps.weight,optional" shape:"FX,E,X" need:"qwen35moe"`
	GateInpShexp *Tensor `gguf:"ffn_gate_inp_shexp.weight,optional" shape:"E" need:"qwen35moe"`
	GateShexp    *Tensor `gguf:"ffn_gate_shexp.weight,optional" shape:"E,FS" need:"qwen35moe"`
	UpShexp      *Tensor `gguf:"ffn_up_shexp.weight,optional" shape:"E,FS" need:"qwen35moe"`
	DownShexp    *Tensor `gguf:"ffn_down_shexp.weight,optional" shape:"FS,E" need:"qwen35moe"`
	// The full-attention layers': attn_q holds each head's query and
	// then its gate (QGate, split at load into Q and OutGate).
	QGate *Tensor `gguf:"attn_q.weight,optional" shape:"E,2*q" gen:"attention"`
	K     *Tensor `gguf:"attn_k.weight,optional" shape:"E,kv" gen:"attention"`
	V     *Tensor `gguf:"attn_v.weight,optional" shape:"E,kvv" gen:"attention"`
	QNorm *Tensor `gguf:"attn_q_norm.weight,optional" shape:"D" gen:"attention"`
	KNorm *Tensor `gguf:"attn_k_norm.weight,optional" shape:"D" gen:"attention"`
	Out   *Tensor `gguf:"attn_output.weight,optional" shape:"qv,E" gen:"attention"`
	// The Gated DeltaNet layers'.
	QKVMix  *Tensor `gguf:"attn_qkv.weight,optional" shape:"E,SC" gen:"recurrent"`
	Z       *Tensor `gguf:"attn_gate.weight,optional" shape:"E,SV" gen:"recurrent"`
	Conv    *Tensor `gguf:"ssm_conv1d.weight,optional" shape:"SK,SC" gen:"recurrent"`
	DtBias  *Tensor `gguf:"ssm_dt.bias,optional" shape:"SH" gen:"recurrent"`
	A       *Tensor `gguf:"ssm_a,optional" shape:"SH" gen:"recurrent"`
	Beta    *Tensor `gguf:"ssm_beta.weight,optional" shape:"E,SH" gen:"recurrent"`
	Alpha   *Tensor `gguf:"ssm_alpha.weight,optional" shape:"E,SH" gen:"recurrent"`
	SSMNorm *Tensor `gguf:"ssm_norm.weight,optional" shape:"SD" gen:"recurrent"`
	SSMOut  *Tensor `gguf:"ssm_out.weight,optional" shape:"SV,E" gen:"recurrent"`
	// Q and OutGate are QGate's rows apart; GateUp joins Gate|Up and
	// GateUpShexp the shared expert's (fuseRows), GateUpExps the gate and
	// up experts (fuseExperts); ShexpGate is GateInpShexp as a matrix of
	// one row.
	Q, OutGate, GateUp, GateUpShexp, GateUpExps, ShexpGate *Tensor

	attn Attn
	dn   *DeltaNet
	moe  *MoE
}

func loadQwen35(f *gguf.File, o Options) (archModel, error) {
	r := o.Recurrent
	if r == nil {
		return nil, fmt.Errorf("engine: %s needs its ssm.* keys", o.Arch)
	}
	m := &qwen35Model{Blocks: make([]qwen35Block, o.Layers)}
	if err := bindTensors(f, "", m); err != nil {
		return nil, err
	}
	if err := checkTensors(m, o); err != nil {
		return nil, err
	}
	if m.Output == nil {
		m.Output = m.TokenEmbd
	}
	scale := float32(1 / math.Sqrt(float64(o.HeadDim)))
	kvLayer := 0
	for i := range m.Blocks {
		b, p := &m.Blocks[i], fmt.Sprintf("blk.%d.", i)
		// The tensors of the layer's kind (the gen tags recurrent and
		// attention mark them) must all be there.
		kind, need := "attention", []namedTensor{{b.QGate, "attn_q.weight"}, {b.K, "attn_k.weight"}, {b.V, "attn_v.weight"},
			{b.QNorm, "attn_q_norm.weight"}, {b.KNorm, "attn_k_norm.weight"}, {b.Out, "attn_output.weight"}}
		if r.Layer[i] >= 0 {
			kind, need = "linear-attention", []namedTensor{{b.QKVMix, "attn_qkv.weight"}, {b.Z, "attn_gate.weight"}, {b.Conv, "ssm_conv1d.weight"},
				{b.DtBias, "ssm_dt.bias"}, {b.A, "ssm_a"}, {b.Beta, "ssm_beta.weight"}, {b.Alpha, "ssm_alpha.weight"}, {b.SSMNorm, "ssm_norm.weight"}, {b.SSMOut, "ssm_out.weight"}}
		}
		for _, t := range need {
			if t.t == nil {
				return nil, fmt.Errorf("engine: tensor %s%s is missing; %s's %s layer %d needs it", p, t.name, o.Arch, kind, i)
			}
		}
		if l := r.Layer[i]; l >= 0 {
			if b.Conv.Type != gguf.TypeF32 {
				return nil, fmt.Errorf("engine: tensor %s has type %v; the convolution's taps must be F32", b.Conv.Name, b.Conv.Type)
			}
			b.dn = &DeltaNet{Layer: l, DtBias: b.DtBias, A: b.A, Params: ops.DeltaNetParams{
				KHeads: r.KHeads, VHeads: r.VHeads, HeadK: r.HeadK, HeadV: r.HeadV, Eps: o.NormEps}}
		} else {
			var err error
			if b.Q, b.OutGate, err = splitHeads(b.QGate, o.Heads, p+"attn_q.weight", p+"attn_q_gate.weight"); err != nil {
				return nil, err
			}
			b.QGate = nil // uploaded as its two halves
			b.attn = Attn{Layer: kvLayer, Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Scale: scale}
			kvLayer++
		}
		b.GateUp = fuseRows(p+"ffn_gate_up.weight", b.Gate, b.Up)
		if b.GateExps != nil {
			if o.Experts == 0 {
				return nil, fmt.Errorf("engine: %s needs %s.expert_count", o.Arch, o.Arch)
			}
			b.moe = &MoE{Router: b.GateInp, Gate: b.GateExps, Up: b.UpExps, Down: b.DownExps, Used: o.ExpertsUsed, Gating: ops.GatingSoftmax, Norm: true}
			if err := checkMoE(b.moe, o.Experts); err != nil {
				return nil, err
			}
			b.GateUpExps = fuseExperts(p+"ffn_gate_up_exps.weight", b.GateExps, b.UpExps)
			b.GateUpShexp = fuseRows(p+"ffn_gate_up_shexp.weight", b.GateShexp, b.UpShexp)
			b.ShexpGate = &Tensor{Name: p + "ffn_gate_inp_shexp.weight", Type: b.GateInpShexp.Type, Dims: []uint64{b.GateInpShexp.Dims[0], 1}, Data: b.GateInpShexp.Data}
			b.GateInpShexp = nil // read as ShexpGate
		}
	}
	if v, err := f.Float(o.Arch + ".expert_weights_scale"); err == nil && v != 0 && v != 1 {
		return nil, fmt.Errorf("engine: %s.expert_weights_scale %g is not supported (1 is)", o.Arch, v)
	}
	m.eps = o.NormEps
	m.rope = o.rope(true, o.RopeBase, o.RopeScale)
	sections, err := f.Int32s(o.Arch + ".rope.dimension_sections")
	if err != nil {
		return nil, err
	}
	if m.RopeSections, err = imropeFactors(sections, o.RopeDim); err != nil {
		return nil, fmt.Errorf("engine: %s.rope.dimension_sections: %w", o.Arch, err)
	}
	m.rope.Factors = m.RopeSections
	return m, nil
}

// namedTensor is a tensor field and its name in a block (for errors naming
// a missing one).
type namedTensor struct {
	t    *Tensor
	name string
}

// splitHeads splits the matrix t, whose rows hold per head a first and a
// second part of equal height (heads of them), into two matrices of the
// first and of the second parts, named a and b.
func splitHeads(t *Tensor, heads int, a, b string) (*Tensor, *Tensor, error) {
	rowBytes, err := t.Type.RowSize(uint64(t.Cols()))
	if err != nil {
		return nil, nil, fmt.Errorf("engine: tensor %s: %w", t.Name, err)
	}
	if t.Rows()%(2*heads) != 0 || uint64(len(t.Data)) < rowBytes*uint64(t.Rows()) {
		return nil, nil, fmt.Errorf("engine: tensor %s: %d rows do not split into %d heads of two parts", t.Name, t.Rows(), heads)
	}
	d := t.Rows() / (2 * heads) // rows per part
	part := uint64(d) * rowBytes
	first, second := make([]byte, 0, uint64(heads)*part), make([]byte, 0, uint64(heads)*part)
	for h := range uint64(heads) {
		at := 2 * h * part
		first = append(first, t.Data[at:at+part]...)
		second = append(second, t.Data[at+part:at+2*part]...)
	}
	dims := []uint64{t.Dims[0], uint64(heads * d)}
	return &Tensor{Name: a, Type: t.Type, Dims: dims, Data: first}, &Tensor{Name: b, Type: t.Type, Dims: dims, Data: second}, nil
}

func (m *qwen35Model) forward(g Graph) {
	x := g.Embed(m.TokenEmbd)
	g.EmbedInputs(x)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		g.Layer()
		h := g.RMSNorm(x, b.AttnNorm, m.eps)
		if b.dn != nil {
			b.linearAttention(g, x, h, m.eps)
		} else {
			b.attention(g, x, h, m)
		}
		b.feedForward(g, x, g.RMSNorm(x, b.PostNorm, m.eps))
	}
	h := g.RMSNorm(g.OutputRows(x), m.OutputNorm, m.eps)
	g.Hidden(h)
	g.Logits(m.Output, h, 0)
}

// feedForward adds the FFN of the normed h to x: SwiGLU (qwen35), or the
// routed experts plus the gated shared expert (qwen35moe).
func (b *qwen35Block) feedForward(g Graph, x, h Act) {
	if b.moe == nil {
		g.MatMulAdd(x, b.Down, g.GLU(h, b.Gate, b.Up, false))
		return
	}
	g.MoEAdd(x, h, b.moe)
	shared := g.GLU(h, b.GateShexp, b.UpShexp, false)
	gate := g.MatMul(b.ShexpGate, h)
	g.Sigmoid(gate)
	g.MulRows(shared, gate) // before the down projection: the same, scaled per row
	g.MatMulAdd(x, b.DownShexp, shared)
}

// attention adds the gated full attention of the normed h to x.
func (b *qwen35Block) attention(g Graph, x, h Act, m *qwen35Model) {
	q, gate := g.MatMul(b.Q, h), g.MatMul(b.OutGate, h)
	k, v := g.MatMul(b.K, h), g.MatMul(b.V, h)
	g.RMSNormInPlace(q.Heads(b.attn.Heads), b.QNorm, m.eps)
	g.RMSNormInPlace(k.Heads(b.attn.KVHeads), b.KNorm, m.eps)
	a := b.attn
	a.Rope = &m.rope
	o := g.Attention(q, k, v, a)
	g.Sigmoid(gate)
	g.Mul(o, gate)
	g.MatMulAdd(x, b.Out, o)
}

// linearAttention adds the Gated DeltaNet of the normed h to x: the mixed
// q|k|v projection convolved over the sequence's last inputs, the gated
// delta rule over the slot's state, RMSNorm per head gated by SiLU(z), and
// the output projection.
func (b *qwen35Block) linearAttention(g Graph, x, h Act, eps float32) {
	mixed := g.MatMul(b.QKVMix, h)
	z := g.MatMul(b.Z, h)
	beta, alpha := g.MatMul(b.Beta, h), g.MatMul(b.Alpha, h)
	conv := g.SSMConv(mixed, b.Conv, b.dn.Layer)
	o := g.DeltaNet(conv, beta, alpha, b.dn)
	g.RMSNormInPlace(o.Heads(b.dn.Params.VHeads), b.SSMNorm, eps)
	g.SiLU(z)
	g.Mul(o, z)
	g.MatMulAdd(x, b.SSMOut, o)
}

// imropeFactors returns, as an F32 vector of frequency divisors (Rope.Factors),
// how interleaved multi-section RoPE (the reference's IMROPE) rotates text:
// each of the dims/2 pairs takes one of four position components by its
// sector (pair index modulo the sections' sum): sector s goes to the
// first component when s%3 == 0 and s < 3*sections[0], the second when
// s%3 == 1 and s < 3*sections[1], the third when s%3 == 2 and s < 3*sections[2],
// else the fourth. A text token's first three components are its position
// and its fourth is 0, so the pairs of the fourth do not turn: their
// divisor is +Inf (angle 0), the others' 1.
func imropeFactors(sections []int32, dims int) (*Tensor, error) {
	if len(sections) != 4 {
		return nil, fmt.Errorf("%d sections, want 4", len(sections))
	}
	sum := 0
	for _, v := range sections {
		if v < 0 || v > 1<<16 {
			return nil, fmt.Errorf("section of %d pairs", v)
		}
		sum += int(v)
	}
	if sum == 0 {
		return nil, fmt.Errorf("sections %v hold no pairs", sections)
	}
	data := make([]byte, 4*(dims/2))
	for i := range dims / 2 {
		s := i % sum
		f := float32(math.Inf(1))
		if (s%3 == 0 && s < 3*int(sections[0])) || (s%3 == 1 && s < 3*int(sections[1])) || (s%3 == 2 && s < 3*int(sections[2])) {
			f = 1
		}
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
	}
	return &Tensor{Name: "rope_sections", Type: gguf.TypeF32, Dims: []uint64{uint64(dims / 2)}, Data: data}, nil
}
