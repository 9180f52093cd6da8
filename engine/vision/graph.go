package vision

import (
	"math"

	"github.com/vkllm/vkllm/engine/ops"
)

// act is an activation of the encoder: rows x cols f32 values, row-major,
// held by the graph that made it (a handle, copied freely).
type act struct {
	ref        int
	rows, cols int
}

// graph is what a projector family's forward pass is written against. The
// GPU recorder (gpuGraph) and the CPU reference (cpuGraph) implement it.
// Ops returning an act make a new one; the others change their first
// argument in place. A bad shape is a broken invariant of the family code
// (the loader checked every tensor), so implementations keep the first
// error and later ops do nothing.
type graph interface {
	// image is the preprocessed input: [3][ImageSize*ImageSize].
	image() act
	// im2col unfolds x into patches ([Patches][C*P*P]).
	im2col(x act, p ops.Im2ColParams) act
	// linear returns x times w transposed, plus b (nil: none).
	linear(w, b *Tensor, x act) act
	// add adds a to dst (same shape).
	add(dst, a act)
	// addTensor adds t's first dst.rows rows to dst (position embeddings).
	addTensor(dst act, t *Tensor)
	// appendRow returns x with t (one row) appended.
	appendRow(x act, t *Tensor) act
	// rows returns rows [from, from+n) of x.
	rows(x act, from, n int) act
	// layerNorm returns LayerNorm(x)*w + b (b nil: none).
	layerNorm(x act, w, b *Tensor, eps float32) act
	// rmsNorm returns RMSNorm(x)*w.
	rmsNorm(x act, w *Tensor, eps float32) act
	// attention returns softmax(q kᵀ/sqrt(d)) v per head over all rows
	// (no mask, no cache), q, k, v [rows][heads*d].
	attention(q, k, v act, heads int) act
	// activate applies a in place.
	activate(x act, a Activation)
	// avgPool pools the token grid x.
	avgPool(x act, p ops.PoolParams) act
	// pixelShuffle merges the token grid x.
	pixelShuffle(x act, p ops.PoolParams) act
}

// vitBlock records one pre-norm transformer block: x += attn(LN1(x)),
// x += fc2(act(fc1(LN2(x)))).
func vitBlock(g graph, b *block, x act, p *Params) act {
	h := g.layerNorm(x, b.LN1, b.LN1B, p.Eps)
	q := g.linear(b.Q, b.QB, h)
	k := g.linear(b.K, b.KB, h)
	v := g.linear(b.V, b.VB, h)
	a := g.attention(q, k, v, p.Heads)
	g.add(x, g.linear(b.O, b.OB, a))
	h = g.layerNorm(x, b.LN2, b.LN2B, p.Eps)
	h = g.linear(b.Up, b.UpB, h)
	g.activate(h, p.Act)
	g.add(x, g.linear(b.Down, b.DownB, h))
	return x
}

// attnScale is the attention's 1/sqrt(head_dim).
func attnScale(p *Params) float32 { return float32(1 / math.Sqrt(float64(p.Embd/p.Heads))) }
