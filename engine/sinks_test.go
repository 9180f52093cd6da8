package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// sinksModel is a generated Llama model whose attention also counts a
// sink logit per head (gpt-oss's attn_sinks.weight), for the GPU graph's
// attention sinks against the CPU reference's.
type sinksModel struct {
	Llama  llamaModel
	Blocks []sinksBlock
}

type sinksBlock struct{ Sinks *Tensor }

func (m *sinksModel) forward(g Graph) {
	l := &m.Llama
	x := g.Embed(l.TokenEmbd)
	for i := range l.Blocks {
		g.Layer()
		b := &l.Blocks[i]
		h := g.RMSNorm(x, b.AttnNorm, l.eps)
		qkv := g.QKV(h, [3]*Tensor{b.Q, b.K, b.V}, [3]*Tensor{b.QBias, b.KBias, b.VBias})
		a := l.attn
		a.Layer, a.Rope, a.Sinks = i, &l.rope, m.Blocks[i].Sinks
		g.MatMulAdd(x, b.Out, g.Attention(qkv[0], qkv[1], qkv[2], a))
		b.feedForward(g, x, l)
	}
	h := g.RMSNorm(g.OutputRows(x), l.OutputNorm, l.eps)
	g.Hidden(h)
	g.Logits(l.Output, h, 0)
}

// f32Tensor is a vector tensor of the values v.
func f32Tensor(name string, v []float32) *Tensor {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	return &Tensor{Name: name, Type: gguf.TypeF32, Dims: []uint64{uint64(len(v))}, Data: data}
}

// withSinks returns the weights of w (a Llama model of 4 heads) with the
// sink logits of each layer: far below, near and far above the scores.
func withSinks(t *testing.T, o Options, w *Weights) *Weights {
	t.Helper()
	l, ok := w.model.(*llamaModel)
	if !ok || o.Heads != 4 {
		t.Fatalf("withSinks: a %T of %d heads, want a llama model of 4", w.model, o.Heads)
	}
	m := &sinksModel{Llama: *l, Blocks: make([]sinksBlock, len(l.Blocks))}
	logits := [][]float32{{-3, 0.5, 2, 6}, {9, -20, 1, 0}}
	for i := range m.Blocks {
		m.Blocks[i].Sinks = f32Tensor(fmt.Sprintf("blk.%d.attn_sinks.weight", i), logits[i%len(logits)])
	}
	return &Weights{Arch: w.Arch, model: m, Tensors: collectTensors(m)}
}

// TestGPUAttentionSinks runs a model with attention sinks on the GPU graph
// and the CPU reference: a mixed batch and decode steps (the tiled and
// per-row kernels), then prompts of up to 1030 positions decoded with the
// split kernels forced on (the sink enters once over the splits) and
// without. The sinks must change the logits well past the tolerance, and
// a sinks tensor of the wrong size is refused on both paths.
func TestGPUAttentionSinks(t *testing.T) {
	dev := vktest.Open(t, vk.Options{})
	typ := gguf.TypeF32
	o, plain := openModel(t, genModel(t, modelgen.Options{Arch: "llama", Vocab: "spm", Type: typ, Embd: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7}))
	w := withSinks(t, o, plain)

	// The sinks matter: the reference's logits move.
	run := func(w *Weights) []float32 {
		cpu, err := NewCPUModel(o, w, 32, 3)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cpu.Forward(mixedBatch(o.Vocab))
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), out...)
	}
	if e := maxRelError(run(w), run(plain)); e < 20*tolerance(typ) {
		t.Fatalf("logits with and without sinks differ by %.3g, want a difference far past the tolerance %.3g", e, tolerance(typ))
	}

	t.Run("mixed", func(t *testing.T) {
		matchCPU(t, dev, o, w, GPUConfig{CtxSize: 32, Slots: 3, BatchSize: 16}, tolerance(typ))
	})
	t.Run("split", func(t *testing.T) {
		checkSplitDecode(t, dev, o, w, []int{1030, 3, 280}, tolerance(typ))
	})

	t.Run("bad-sinks", func(t *testing.T) {
		bad := withSinks(t, o, plain)
		s := bad.model.(*sinksModel).Blocks[1].Sinks
		s.Dims, s.Data = []uint64{3}, s.Data[:12]
		cpu, err := NewCPUModel(o, bad, 32, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cpu.Forward(mixedBatch(o.Vocab)); err == nil || !strings.Contains(err.Error(), "blk.1.attn_sinks.weight") {
			t.Errorf("CPU Forward with 3 sinks for 4 heads: %v, want an error naming blk.1.attn_sinks.weight", err)
		}
		gpu, err := NewGPUModel(dev, o, bad, GPUConfig{CtxSize: 32, Slots: 3, BatchSize: 16})
		if err == nil {
			_, err = gpu.Forward(mixedBatch(o.Vocab))
			gpu.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "blk.1.attn_sinks.weight") {
			t.Errorf("GPU model with 3 sinks for 4 heads: %v, want an error naming blk.1.attn_sinks.weight", err)
		}
	})
}
