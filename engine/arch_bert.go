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
	TokenEmbd *Tensor `gguf:"token_embd.weight" shape:"E,V" gen:"std=1"`
	// TokenTypes has a row per token type (read: row 0).
	TokenTypes *Tensor `gguf:"token_types.weight,optional" shape:"E,*2" gen:"always,std=0.1"`
	// Positions has a row per position, at least context_length.
	Positions    *Tensor     `gguf:"position_embd.weight" shape:"E,>=C" gen:"std=0.1"`
	EmbdNorm     *Tensor     `gguf:"token_embd_norm.weight" shape:"E"`
	EmbdNormBias *Tensor     `gguf:"token_embd_norm.bias" shape:"E"`
	Blocks       []bertBlock `gguf:"blk"`
	// The classification head of cross-encoders (pooling type rank);
	// loadBert checks ClsOut and ClsOutBias further for rank pooling.
	Cls        *Tensor `gguf:"cls.weight,optional" shape:"E,E" gen:"rerank"`
	ClsBias    *Tensor `gguf:"cls.bias,optional" shape:"E" gen:"rerank"`
	ClsOut     *Tensor `gguf:"cls.output.weight,optional" shape:"E,*" gen:"rerank"`
	ClsOutBias *Tensor `gguf:"cls.output.bias,optional" shape:"*1" gen:"rerank"`
	// Type0 is row 0 of TokenTypes (every token is of type 0).
	Type0 *Tensor

	eps  float32
	attn Attn
}

type bertBlock struct {
	Q               *Tensor `gguf:"attn_q.weight" shape:"E,E"`
	K               *Tensor `gguf:"attn_k.weight" shape:"E,kv"`
	V               *Tensor `gguf:"attn_v.weight" shape:"E,kv"`
	QBias           *Tensor `gguf:"attn_q.bias" shape:"E"`
	KBias           *Tensor `gguf:"attn_k.bias" shape:"kv"`
	VBias           *Tensor `gguf:"attn_v.bias" shape:"kv"`
	Out             *Tensor `gguf:"attn_output.weight" shape:"E,E"`
	OutBias         *Tensor `gguf:"attn_output.bias" shape:"E"`
	AttnOutNorm     *Tensor `gguf:"attn_output_norm.weight" shape:"E"`
	AttnOutNormBias *Tensor `gguf:"attn_output_norm.bias" shape:"E"`
	Up              *Tensor `gguf:"ffn_up.weight" shape:"E,F"`
	UpBias          *Tensor `gguf:"ffn_up.bias" shape:"F"`
	Down            *Tensor `gguf:"ffn_down.weight" shape:"F,E"`
	DownBias        *Tensor `gguf:"ffn_down.bias" shape:"E"`
	OutNorm         *Tensor `gguf:"layer_output_norm.weight" shape:"E"`
	OutNormBias     *Tensor `gguf:"layer_output_norm.bias" shape:"E"`
}

func loadBert(f *gguf.File, o Options) (archModel, error) {
	if causal, err := f.Bool(o.Arch + ".attention.causal"); err == nil && causal {
		return nil, fmt.Errorf("engine: %s.attention.causal is true; only bidirectional BERT encoders are supported", o.Arch)
	}
	m := &bertModel{Blocks: make([]bertBlock, o.Layers)}
	if err := bindTensors(f, "", m); err != nil {
		return nil, err
	}
	if err := checkTensors(m, o); err != nil {
		return nil, err
	}
	E := o.Embd
	if m.TokenTypes != nil {
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
