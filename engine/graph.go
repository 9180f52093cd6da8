package engine

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
)

// Act is an activation of a forward pass: Rows x Cols f32 values, row-major,
// held by the Graph that made it. Acts are values; copying one does not copy
// its data. An Act made since the last Graph.Layer call is dead after the
// next one (its memory is reused), except those made before the first
// Layer call, which live for the whole pass.
type Act struct {
	ref        int // the graph's handle: a buffer (GPU) or an index (CPU)
	cap        int // bytes reserved for it (GPU: for a batch of BatchSize rows)
	Rows, Cols int
}

// Heads views a [rows][heads*d] activation as [rows*heads][d], the same
// values (for per-head norms).
func (a Act) Heads(heads int) Act {
	return Act{ref: a.ref, cap: a.cap, Rows: a.Rows * heads, Cols: a.Cols / heads}
}

// Rope says how RoPE rotates the heads of q or k in one layer. Angles are
// theta_i = pos * Scale * Base^(-2i/Dims) / Factors[i] for the pairs i <
// Dims/2; the values past Dims pass through. YaRN (ExtFactor != 0) mixes
// that angle with the unscaled one by a ramp over CorrDims, as the
// reference's rope_yarn.
type Rope struct {
	HeadDim int
	Dims    int  // rotated dimensions (partial rotary: fewer than HeadDim)
	NeoX    bool // pairs (i, i+Dims/2) rather than (2i, 2i+1)
	Base    float32
	Scale   float32 // position multiplier: 1/factor for linear scaling
	// Factors holds Dims/2 per-pair divisors of the frequencies (Llama 3's
	// rope_freqs, Phi-3's LongRoPE factors); nil means none.
	Factors *Tensor
	// AttnFactor multiplies cos and sin (LongRoPE and YaRN magnitude
	// scaling); 0 means 1.
	AttnFactor float32
	// ExtFactor and CorrDims are YaRN's extrapolation mix and ramp
	// (ExtFactor 0: no YaRN).
	ExtFactor float32
	CorrDims  [2]float32
}

// AttnKind says which keys a query sees.
type AttnKind int

const (
	// Causal attention (decoders) reads the layer's KV cache: a row at
	// position p of a slot sees positions 0..p of that slot (the last
	// Window of them when Window > 0), and the row's own k and v are
	// written to the cache first.
	Causal AttnKind = iota
	// Bidirectional attention (encoders) keeps no cache: a row sees every
	// row of its sequence in the batch (a batch holds each encoder
	// sequence whole, its rows consecutive at positions 0..n-1).
	Bidirectional
)

// Attn describes the attention of one layer.
type Attn struct {
	Kind                    AttnKind
	Layer                   int // the KV cache layer (Causal)
	Heads, KVHeads, HeadDim int
	Scale                   float32 // multiplies q.k
	Window                  int     // sliding window in positions (Causal); 0 means none
	// SoftCap > 0 turns each scaled score s into SoftCap*tanh(s/SoftCap)
	// (Gemma 2).
	SoftCap float32
	// Sinks, when not nil, holds one f32 attention-sink logit per query
	// head (Heads values; gpt-oss's attn_sinks.weight): head h's softmax
	// also counts Sinks[h] in its max and denominator, as is (after the
	// scores' Scale and SoftCap, neither applied to it), with no value,
	// so the head's weights over its keys sum to less than one.
	Sinks *Tensor
	// Rope, when not nil, rotates q and k by each row's position first
	// (Causal only): q in place, k only as it goes into the cache (the k
	// Act keeps its values; nothing may read it afterwards for the
	// rotated keys). The GPU does the rotations and both cache writes in
	// one dispatch.
	Rope *Rope
}

// checkSinks reports a Sinks tensor that is not one f32 logit per head.
func (a *Attn) checkSinks() error {
	if s := a.Sinks; s != nil && (s.Type != gguf.TypeF32 || len(s.Dims) != 1 || s.Cols() != a.Heads || len(s.Data) < 4*a.Heads) {
		return fmt.Errorf("engine: attention sinks %s: type %v, dims %v; want %d f32 values, one per head", s.Name, s.Type, s.Dims, a.Heads)
	}
	return nil
}

// Graph is what an architecture's forward pass is written against. Two
// implementations run it: the GPU recorder (gpuGraph, kernels recorded into
// one command buffer) and the CPU reference (cpuGraph, plain Go in f64).
// Ops that return an Act make a new one; the others change their first
// argument in place. Shapes are checked by the implementations; an error
// (a bad shape, a recording failure) is kept and returned by the forward
// pass, and later ops do nothing.
//
// Call order: the architecture embeds the batch, calls Layer before each
// block, then OutputRows on the final residual stream, and Hidden and/or
// Logits on the result. A Net reads its Input, calls Layer before each
// block, and returns its output, which its runner delivers with Hidden.
type Graph interface {
	// CtxSize is the number of positions of one sequence slot.
	CtxSize() int
	// Layer starts a block: the Acts made since the previous Layer call
	// are dead; those made before the first stay.
	Layer()
	// Embed returns w's rows of the batch's tokens ([rows][w.Cols]).
	Embed(w *Tensor) Act
	// EmbedInputs replaces the rows of x ([rows][Embd]) whose batch input
	// is an embedding (Batch.Embeds: image tokens) by it. Decoders call it
	// right after embedding (and scaling) the batch's tokens.
	EmbedInputs(x Act)
	// EmbedPositions returns w's rows of the batch's positions (learned
	// absolute position embeddings; a Net's positions are 0..Rows-1 of
	// its NetShape).
	EmbedPositions(w *Tensor) Act
	// MatMul returns x times w transposed: [x.Rows][w.Rows].
	MatMul(w *Tensor, x Act) Act
	// QKV returns x times each of w transposed ([x.Rows][w[i].Rows]), plus
	// the bias b[i] where it is not nil: the q, k and v projections of one
	// normed input. Where the three (and their biases) were fused at load
	// (fuseRows), decode-shaped batches take one dispatch.
	QKV(x Act, w, b [3]*Tensor) [3]Act
	// GLU returns act(x Gᵀ) * (x Uᵀ) ([x.Rows][gate.Rows]) for the gate G
	// and up U projections: SiLU (SwiGLU), or with gelu the tanh GELU
	// (GeGLU). Where gate and up were fused at load, decode-shaped batches
	// take one dispatch.
	GLU(x Act, gate, up *Tensor, gelu bool) Act
	// MoEAdd adds the mixture-of-experts FFN f of x to dst ([rows][Embd]
	// each; see MoE): only the experts each row's router picks are read.
	MoEAdd(dst, x Act, f *MoE)
	// MatMulAdd adds x times w transposed to dst (a residual connection).
	MatMulAdd(dst Act, w *Tensor, x Act)
	// Add adds a to dst (same shape).
	Add(dst, a Act)
	// AddBias adds the vector b (x.Cols values) to every row of x.
	AddBias(x Act, b *Tensor)
	// Scale multiplies x by s.
	Scale(x Act, s float32)
	// RMSNorm returns x normalized by the root mean square of each row,
	// times w (nil: 1).
	RMSNorm(x Act, w *Tensor, eps float32) Act
	// RMSNormInPlace is RMSNorm into x.
	RMSNormInPlace(x Act, w *Tensor, eps float32)
	// LayerNorm returns (x - mean) / sqrt(var + eps) * w + b per row.
	LayerNorm(x Act, w, b *Tensor, eps float32) Act
	// LayerNormInPlace is LayerNorm into x.
	LayerNormInPlace(x Act, w, b *Tensor, eps float32)
	// Attention returns softmax(Scale q kᵀ) v per head as a says, q, k and
	// v being [rows][heads*dim] ([rows][Heads*HeadDim] out).
	Attention(q, k, v Act, a Attn) Act
	// GELU applies the tanh-approximated GELU to x.
	GELU(x Act)
	// QuickGELU applies x*sigmoid(1.702x) to x (CLIP's activation).
	QuickGELU(x Act)
	// SiLU applies x*sigmoid(x) to x.
	SiLU(x Act)
	// Sigmoid applies 1/(1+exp(-x)) to x.
	Sigmoid(x Act)
	// Mul multiplies dst by a, element by element (same shape).
	Mul(dst, a Act)
	// MulRows multiplies each row of dst by s's value of that row (s:
	// [dst.Rows][1]).
	MulRows(dst, s Act)
	// SSMConv returns the causal depthwise convolution of x ([rows][C])
	// by the taps w (ssm_conv1d, [C][K]) over each row's K-1 previous
	// inputs of its sequence, then SiLU (ops.SSMConv): a hybrid model's
	// recurrent layer layer, whose convolution state of each slot of the
	// batch it continues and updates.
	SSMConv(x Act, w *Tensor, layer int) Act
	// DeltaNet returns the gated delta rule of d over the convolved
	// q|k|v rows qkv, with the rows' raw beta and alpha projections
	// ([rows][VHeads] each): [rows][VHeads*HeadV] (ops.GatedDeltaNet),
	// continuing and updating d's layer's SSM state of each slot.
	DeltaNet(qkv, beta, alpha Act, d *DeltaNet) Act
	// OutputRows returns the rows of x that asked for logits or hidden
	// states: the logits rows first, in batch order, then the hidden ones.
	OutputRows(x Act) Act
	// Hidden delivers the hidden-state rows of h (from OutputRows) as the
	// pass's hidden states (a Net's: the whole of its output).
	Hidden(h Act)
	// Logits delivers the logits rows of h (from OutputRows) times w
	// transposed as the pass's logits, soft-capped to
	// softcap*tanh(logit/softcap) when softcap > 0 (Gemma 2).
	Logits(w *Tensor, h Act, softcap float32)

	// The ops below are a Net's (net.go: a vision tower and projector),
	// whose pass has one fixed shape: the Acts they make are sized for
	// exactly their rows.

	// Input returns the pass's input values as a rows x cols activation
	// (an image's colour planes); a text model's pass has none.
	Input(rows, cols int) Act
	// Im2Col unfolds the image x (p.C planes of p.H x p.W) into its
	// p.P x p.P patches, [p.Patches()][p.PatchLen()]: a patch
	// embedding's convolution becomes a MatMul.
	Im2Col(x Act, p ops.Im2ColParams) Act
	// AvgPool averages each p.K x p.K square of the token grid x
	// ([p.H*p.W][p.C], row-major grid): [p.Tokens()][p.C].
	AvgPool(x Act, p ops.PoolParams) Act
	// PixelShuffle joins each p.K x p.K square of the token grid x
	// ([p.H*p.W][p.C]) into one row: [p.Tokens()][p.C*p.K*p.K].
	PixelShuffle(x Act, p ops.PoolParams) Act
	// AppendRows returns x with the rows of t (f32, x.Cols wide) after
	// its own.
	AppendRows(x Act, t *Tensor) Act
	// SliceRows returns rows [from, from+n) of x.
	SliceRows(x Act, from, n int) Act
}

// DeltaNet is one Gated DeltaNet layer of a hybrid model (Graph.DeltaNet).
type DeltaNet struct {
	Layer     int     // index among the recurrent layers (Recurrent.Layer)
	DtBias, A *Tensor // ssm_dt.bias and ssm_a: VHeads f32 values each
	// Params shapes the op; the graph fills in Slots.
	Params ops.DeltaNetParams
}

// archModel is one architecture's model: its weights as a struct tagged
// with their GGUF names and its hyper-parameters, with the forward pass.
type archModel interface {
	// forward records the whole pass of the graph's batch.
	forward(g Graph)
}

// qkvApart computes q, k and v as three products, each with its bias where
// it has one: QKV where the weights are not fused.
func qkvApart(g Graph, x Act, w, b [3]*Tensor) [3]Act {
	var out [3]Act
	for i := range w {
		out[i] = g.MatMul(w[i], x)
		if b[i] != nil {
			g.AddBias(out[i], b[i])
		}
	}
	return out
}
