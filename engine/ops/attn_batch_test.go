package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

// seqs returns the positions and ends of consecutive sequences of the
// given lengths.
func seqs(lens ...int) (pos, end []int32) {
	for _, n := range lens {
		e := int32(len(pos) + n)
		for i := range n {
			pos = append(pos, int32(i))
			end = append(end, e)
		}
	}
	return pos, end
}

func TestAttentionBatch(t *testing.T) {
	g := newRig(t)
	cases := []struct {
		name string
		p    BatchAttnParams
		lens []int
	}{
		{"one-token", BatchAttnParams{Heads: 2, KVHeads: 2, HeadDim: 16}, []int{1}},
		{"bert", BatchAttnParams{Heads: 8, KVHeads: 8, HeadDim: 32}, []int{12}},
		{"three-seqs-gqa", BatchAttnParams{Heads: 8, KVHeads: 2, HeadDim: 64}, []int{5, 1, 37}},
		{"odd-dim", BatchAttnParams{Heads: 3, KVHeads: 1, HeadDim: 40}, []int{3, 70}},
		{"dim256", BatchAttnParams{Heads: 2, KVHeads: 1, HeadDim: 256}, []int{9, 4}},
		{"long", BatchAttnParams{Heads: 4, KVHeads: 4, HeadDim: 32}, []int{300}},
	}
	defer func(wg uint32) { g.k.attnWG = wg }(g.k.attnWG)
	for _, wg := range []uint32{min(g.k.wg, cpuAttnWG), min(g.k.wg, 128)} {
		g.k.attnWG = wg
		for _, tc := range cases {
			// Without attention sinks, then with each of sinkSets.
			sets := append([]struct {
				name  string
				sinks []float32
			}{{"no-sinks", nil}}, sinkSets(tc.p.Heads)...)
			for _, set := range sets {
				t.Run(fmt.Sprintf("wg%d/%s/%s", wg, tc.name, set.name), func(t *testing.T) {
					both(t, g, func(t *testing.T) {
						p := tc.p
						pos, end := seqs(tc.lens...)
						p.Rows = len(pos)
						p.Scale = float32(1 / math.Sqrt(float64(p.HeadDim)))
						if set.sinks != nil {
							p.Sinks = g.upF32(set.sinks)
						}
						q := g.randn(p.Rows*p.Heads*p.HeadDim, 1)
						k := g.randn(p.Rows*p.KVHeads*p.HeadDim, 2)
						v := g.randn(p.Rows*p.KVHeads*p.HeadDim, 1)
						out := g.buf(4 * len(q))
						qr, kr, vr, pr, er := g.upF32(q), g.upF32(k), g.upF32(v), g.upI32(pos), g.upI32(end)
						g.run(func(c *vk.Cmd) error { return g.k.AttentionBatch(c, out, qr, kr, vr, pr, er, p) })
						want := make([]float32, len(q))
						if err := RefAttentionBatch(want, q, k, v, pos, end, set.sinks, p); err != nil {
							t.Fatal(err)
						}
						closeTo(t, "AttentionBatch", g.downF32(out, len(q)), want, 1e-4)
					})
				})
			}
		}
	}
}

// TestAttentionBatchIsolation checks that a sequence's output does not
// depend on the other sequences of the batch: the first sequence alone and
// beside a second give the same values.
func TestAttentionBatchIsolation(t *testing.T) {
	g := newRig(t)
	p := BatchAttnParams{Heads: 4, KVHeads: 2, HeadDim: 32, Scale: 0.2}
	pos, end := seqs(6, 9)
	p.Rows = len(pos)
	q, k, v := g.randn(p.Rows*p.Heads*p.HeadDim, 1), g.randn(p.Rows*p.KVHeads*p.HeadDim, 2), g.randn(p.Rows*p.KVHeads*p.HeadDim, 1)
	out := g.buf(4 * len(q))
	g.run(func(c *vk.Cmd) error {
		return g.k.AttentionBatch(c, out, g.upF32(q), g.upF32(k), g.upF32(v), g.upI32(pos), g.upI32(end), p)
	})
	both := g.downF32(out, len(q))
	p1 := p
	p1.Rows = 6
	n1 := 6 * p.Heads * p.HeadDim
	out1 := g.buf(4 * n1)
	g.run(func(c *vk.Cmd) error {
		return g.k.AttentionBatch(c, out1, g.upF32(q[:n1]), g.upF32(k[:6*p.KVHeads*p.HeadDim]), g.upF32(v[:6*p.KVHeads*p.HeadDim]),
			g.upI32(pos[:6]), g.upI32(end[:6]), p1)
	})
	alone := g.downF32(out1, n1)
	for i := range alone {
		if alone[i] != both[i] {
			t.Fatalf("AttentionBatch of sequence 0: value %d = %g beside another sequence, %g alone", i, both[i], alone[i])
		}
	}
}
