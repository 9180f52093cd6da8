package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// TestSplitAttentionDecode runs real models' decode with the GPUs' split
// attention (flash decoding) forced on whatever device this is, lavapipe
// included: three sequences, the longest worth several splits, decoded
// together (rows of very different lengths) and alone, against the CPU
// reference, and against the same model without splits (the default on
// CPU devices). The fixture llama has plain causal attention; the
// generated gemma2 soft-caps its scores and has sliding-window layers
// whose rows see 520 keys (two splits counted from the window's start).
// The split steps allocate nothing.
func TestSplitAttentionDecode(t *testing.T) {
	dev := vktest.Open(t, vk.Options{})
	cases := []struct {
		name string
		path func(t *testing.T) string
		typ  gguf.GGMLType
		lens []int // prompt lengths of slots 0, 1, 2
	}{
		{"llama-spm-256x4-q8_0", func(t *testing.T) string {
			return filepath.Join(fixtures.Dir(t, "models"), "llama-spm-256x4-q8_0.gguf")
		}, gguf.TypeQ8_0, []int{1100, 5, 300}},
		{"gemma2-window520", func(t *testing.T) string {
			return genModel(t, modelgen.Options{Arch: "gemma2", Type: gguf.TypeF32, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Window: 520, Seed: 5})
		}, gguf.TypeF32, []int{1030, 3, 280}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, w := openModel(t, tc.path(t))
			checkSplitDecode(t, dev, o, w, tc.lens, tolerance(tc.typ))
		})
	}
}

// checkSplitDecode prefills slots 0, 1, 2 with prompts of lens positions
// and decodes them, comparing split attention with the CPU reference (to
// tol) and the unsplit kernels.
func checkSplitDecode(t *testing.T, dev *vk.Device, o Options, w *Weights, lens []int, tol float64) {
	const ctx, units = 1280, 64
	cpu, err := NewCPUModel(o, w, ctx, len(lens))
	if err != nil {
		t.Fatal(err)
	}
	split, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: ctx, Slots: len(lens), BatchSize: 64, ComputeUnits: units})
	if err != nil {
		t.Fatal(err)
	}
	defer split.Close()
	plain, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: ctx, Slots: len(lens), BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	// The decode batch must split, the longest row several times, and
	// only where asked.
	p := ops.AttnParams{Rows: len(lens), Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Causal: true, Keys: lens[0] + 1,
		Cache: ops.KVParams{Slots: len(lens), NCtx: ctx, KVDim: o.KVHeads * o.HeadDim, Pages: 1}}
	got := split.k.AttentionSplits(p)
	if got < 4 || split.attnScratch == nil {
		t.Fatalf("AttentionSplits(%d rows, %d keys) with %d units = %d (scratch %v), want at least 4 splits", p.Rows, p.Keys, units, got, split.attnScratch != nil)
	}
	t.Logf("%d heads, %d kv heads: the decode batch takes %d splits, %d bytes of scratch reserved", o.Heads, o.KVHeads, got, split.attnScratch.Size())
	if dev.Info().Type == vk.TypeCPU {
		if got := plain.k.AttentionSplits(p); got != 1 || plain.attnScratch != nil {
			t.Fatalf("AttentionSplits(%d rows, %d keys) on a CPU device by default = %d (scratch %v), want 1 and none", p.Rows, p.Keys, got, plain.attnScratch != nil)
		}
	}

	forward := func(what string, b Batch) []float32 {
		t.Helper()
		want, err := cpu.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		var outs [2][]float32
		for i, m := range []*GPUModel{split, plain} {
			if outs[i], err = m.Forward(b); err != nil {
				t.Fatal(err)
			}
			if e := maxRelError(outs[i], want); e > tol || math.IsNaN(e) {
				t.Fatalf("%s (splits %v): max relative logit error %.3g, want <= %.3g", what, i == 0, e, tol)
			}
		}
		// Both GPU paths read the same f16 cache: only the order of the
		// sums differs.
		if e := maxRelError(outs[0], outs[1]); e > 1e-4 || math.IsNaN(e) {
			t.Fatalf("%s: split and unsplit logits differ by %.3g, want <= 1e-4", what, e)
		}
		return want
	}

	// The prompts, in chunks of the batch size (the last, short chunks
	// take the split path too).
	next := make([]int32, len(lens))
	for s, n := range lens {
		for c0 := 0; c0 < n; c0 += 64 {
			var b Batch
			for i := c0; i < min(n, c0+64); i++ {
				b.Tokens = append(b.Tokens, int32((i*131+s*17+3)%o.Vocab))
				b.Slots = append(b.Slots, int32(s))
				b.Pos = append(b.Pos, int32(i))
				b.Out = append(b.Out, logitsIf(i == n-1))
			}
			if want := forward(fmt.Sprintf("slot %d prompt chunk at %d", s, c0), b); len(want) > 0 {
				next[s] = argmaxF32(want)
			}
		}
	}
	pos := append([]int(nil), lens...)
	// Decode steps of all three slots together, then of the longest alone.
	for step := range 3 {
		b := Batch{}
		for s := range lens {
			b.Tokens = append(b.Tokens, next[s])
			b.Slots = append(b.Slots, int32(s))
			b.Pos = append(b.Pos, int32(pos[s]))
			b.Out = append(b.Out, logitsIf(true))
			pos[s]++
		}
		want := forward(fmt.Sprintf("decode step %d (positions %v)", step, b.Pos), b)
		for s := range lens {
			next[s] = argmaxF32(want[s*o.Vocab : (s+1)*o.Vocab])
		}
	}
	b := Batch{Tokens: []int32{next[0]}, Slots: []int32{0}, Pos: []int32{int32(pos[0])}, Out: []RowOut{{Kind: OutLogits}}}
	next[0] = argmaxF32(forward(fmt.Sprintf("decode of slot 0 alone at %d", pos[0]), b))
	pos[0]++

	// The split path allocates nothing per step once its pipelines exist.
	var out Output
	b = Batch{Tokens: make([]int32, len(lens)), Slots: []int32{0, 1, 2}, Pos: make([]int32, len(lens)), Out: []RowOut{{Kind: OutLogits}, {Kind: OutLogits}, {Kind: OutLogits}}}
	allocs := testing.AllocsPerRun(3, func() {
		for s := range lens {
			b.Tokens[s], b.Pos[s] = next[s], int32(pos[s])
			pos[s]++
		}
		if err := split.ForwardInto(b, &out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a split decode step of %d rows: %v allocations, want 0", len(lens), allocs)
	}
}
