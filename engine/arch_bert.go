package engine

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/gguf"
)

// bertModel is the BERT encoder (bge, e5, MiniLM and the cross-encoder
// rerankers built on it): token, token-type (always type 0, as the
// reference) and learned position embeddings summed and LayerNormed, then
// post-norm blocks with biases: bidirectional attention added to the block
// input and LayerNormed, a GELU FFN added to that and LayerNormed. It keeps
// no KV cache and gives hidden states, which Embed pools; a reranker's
// classification head (cls.*) scores the first token's (Classifier).
type bertModel struct {
	TokenEmbd    *Tensor     `gguf:"token_embd.weight"`
	TokenTypes   *Tensor     `gguf:"token_types.weight,optional"`
	Positions    *Tensor     `gguf:"position_embd.weight"`
	EmbdNorm     *Tensor     `gguf:"token_embd_norm.weight"`
	EmbdNormBias *Tensor     `gguf:"token_embd_norm.bias"`
	Blocks       []bertBlock `gguf:"blk"`
	// The classification head of cross-encoders (pooling type rank).
	Cls        *Tensor `gguf:"cls.weight,optional"`
	ClsBias    *Tensor `gguf:"cls.bias,optional"`
	ClsOut     *Tensor `gguf:"cls.output.weight,optional"`
	ClsOutBias *Tensor `gguf:"cls.output.bias,optional"`
	// Type0 is row 0 of TokenTypes (every token is of type 0).
	Type0 *Tensor

	eps  float32
	attn Attn
}

type bertBlock struct {
	Q               *Tensor `gguf:"attn_q.weight"`
	QBias           *Tensor `gguf:"attn_q.bias"`
	K               *Tensor `gguf:"attn_k.weight"`
	KBias           *Tensor `gguf:"attn_k.bias"`
	V               *Tensor `gguf:"attn_v.weight"`
	VBias           *Tensor `gguf:"attn_v.bias"`
	Out             *Tensor `gguf:"attn_output.weight"`
	OutBias         *Tensor `gguf:"attn_output.bias"`
	AttnOutNorm     *Tensor `gguf:"attn_output_norm.weight"`
	AttnOutNormBias *Tensor `gguf:"attn_output_norm.bias"`
	Up              *Tensor `gguf:"ffn_up.weight"`
	UpBias          *Tensor `gguf:"ffn_up.bias"`
	Down            *Tensor `gguf:"ffn_down.weight"`
	DownBias        *Tensor `gguf:"ffn_down.bias"`
	OutNorm         *Tensor `gguf:"layer_output_norm.weight"`
	OutNormBias     *Tensor `gguf:"layer_output_norm.bias"`
}

func loadBert(f *gguf.File, o Options) (archModel, error) {
	if causal, err := f.Bool(o.Arch + ".attention.causal"); err == nil && causal {
		return nil, fmt.Errorf("engine: %s.attention.causal is true; only bidirectional BERT encoders are supported", o.Arch)
	}
	m := &bertModel{Blocks: make([]bertBlock, o.Layers)}
	if err := bindTensors(f, "", m); err != nil {
		return nil, err
	}
	E, F := o.Embd, o.FFN
	want := []shape{{m.TokenEmbd, E, o.Vocab}, {m.EmbdNorm, E, 1}, {m.EmbdNormBias, E, 1}, {m.Cls, E, E}, {m.ClsBias, E, 1}}
	if m.Positions.Cols() != E || m.Positions.Rows() < o.CtxTrain {
		return nil, fmt.Errorf("engine: tensor %s has dims %v, want [%d %d] (%s.context_length positions)",
			m.Positions.Name, m.Positions.Dims, E, o.CtxTrain, o.Arch)
	}
	if m.TokenTypes != nil {
		if m.TokenTypes.Cols() != E {
			return nil, fmt.Errorf("engine: tensor %s has dims %v, want [%d types]", m.TokenTypes.Name, m.TokenTypes.Dims, E)
		}
		// Row 0 as an F32 vector (a bias added to every token).
		row, err := rowRange(m.TokenTypes, "token_types.weight[0]", 0, 1)
		if err != nil {
			return nil, err
		}
		vals, err := dequant(row)
		if err != nil {
			return nil, err
		}
		m.Type0 = &Tensor{Name: row.Name, Type: gguf.TypeF32, Dims: []uint64{uint64(E)}, Data: float32Bytes(vals)}
		m.TokenTypes = nil // only its row 0 is read
	}
	for i := range m.Blocks {
		b := &m.Blocks[i]
		want = append(want,
			shape{b.Q, E, E}, shape{b.QBias, E, 1}, shape{b.K, E, o.KVHeads * o.HeadDim}, shape{b.KBias, o.KVHeads * o.HeadDim, 1},
			shape{b.V, E, o.KVHeads * o.HeadDim}, shape{b.VBias, o.KVHeads * o.HeadDim, 1}, shape{b.Out, E, E}, shape{b.OutBias, E, 1},
			shape{b.AttnOutNorm, E, 1}, shape{b.AttnOutNormBias, E, 1}, shape{b.Up, E, F}, shape{b.UpBias, F, 1},
			shape{b.Down, F, E}, shape{b.DownBias, E, 1}, shape{b.OutNorm, E, 1}, shape{b.OutNormBias, E, 1})
	}
	if err := checkShapes(want); err != nil {
		return nil, err
	}
	if o.Heads*o.HeadDim != E {
		return nil, fmt.Errorf("engine: %s: %d heads of %d do not make the embedding width %d", o.Arch, o.Heads, o.HeadDim, E)
	}
	if o.Pooling == PoolRank {
		if m.ClsOut == nil || m.ClsOutBias == nil {
			return nil, fmt.Errorf("engine: %s.pooling_type is rank but tensor cls.output.weight or cls.output.bias is missing", o.Arch)
		}
		if m.ClsOutBias.Cols() != 1 || m.ClsOut.Cols() != E {
			return nil, fmt.Errorf("engine: tensors cls.output.weight %v and cls.output.bias %v: only a single score (one output row of %d) is supported", m.ClsOut.Dims, m.ClsOutBias.Dims, E)
		}
		if (m.Cls == nil) != (m.ClsBias == nil) {
			return nil, fmt.Errorf("engine: %s has only one of cls.weight and cls.bias", o.Arch)
		}
	}
	m.eps = o.NormEps
	m.attn = Attn{Kind: Bidirectional, Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Scale: float32(1 / math.Sqrt(float64(o.HeadDim)))}
	return m, nil
}

func (m *bertModel) forward(g Graph) {
	x := g.Embed(m.TokenEmbd)
	if m.Type0 != nil {
		g.AddBias(x, m.Type0)
	}
	g.Add(x, g.EmbedPositions(m.Positions))
	g.LayerNormInPlace(x, m.EmbdNorm, m.EmbdNormBias, m.eps)
	for i := range m.Blocks {
		g.Layer()
		m.Blocks[i].attention(g, x, m)
		m.Blocks[i].feedForward(g, x, m)
	}
	g.Hidden(g.OutputRows(x))
}

// attention adds the attention of x to x and LayerNorms the sum.
func (b *bertBlock) attention(g Graph, x Act, m *bertModel) {
	q, k, v := g.MatMul(b.Q, x), g.MatMul(b.K, x), g.MatMul(b.V, x)
	g.AddBias(q, b.QBias)
	g.AddBias(k, b.KBias)
	g.AddBias(v, b.VBias)
	g.MatMulAdd(x, b.Out, g.Attention(q, k, v, m.attn))
	g.AddBias(x, b.OutBias)
	g.LayerNormInPlace(x, b.AttnOutNorm, b.AttnOutNormBias, m.eps)
}

// feedForward adds the GELU FFN of x to x and LayerNorms the sum.
func (b *bertBlock) feedForward(g Graph, x Act, m *bertModel) {
	u := g.MatMul(b.Up, x)
	g.AddBias(u, b.UpBias)
	g.GELU(u)
	g.MatMulAdd(x, b.Down, u)
	g.AddBias(x, b.DownBias)
	g.LayerNormInPlace(x, b.OutNorm, b.OutNormBias, m.eps)
}

// classifier returns the model's classification head, nil when it has
// none.
func (m *bertModel) classifier() *classifierTensors {
	if m.ClsOut == nil {
		return nil
	}
	return &classifierTensors{Dense: m.Cls, DenseBias: m.ClsBias, Out: m.ClsOut, OutBias: m.ClsOutBias}
}
