package engine

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/engine/tokenizer"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/internal/sweep"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// kvPerplexityTol bounds how much a quantized KV cache may move the
// perplexity from the f16 cache's: the 0.5% (q8_0) and 3% (q4_0),
// which hold on the three llama-spm, the qwen3, qwen3moe and gemma3 fixtures
// (measured: q8_0 -0.05..+0.37%, q4_0 -2.2..+2.8%). kvMeasuredTol widens them for four
// fixtures where they were measured larger (qwen2 q4_0 +5.3%, q8_0 +0.13%; llama3rf
// q8_0 -0.74% and q4_0 +17.5%, phi3 q8_0 -1.07% and q4_0 +6.9%, gpt-oss below): random
// models whose perplexity (millions, above their vocabularies) comes from
// confidently wrong predictions, which small changes of the attention
// scores move a lot; the kernels match the gguf/quant reference exactly
// (engine/ops TestAttentionQuant) and the f64 CPU model with the same
// quantization within 1e-2 (TestKVQuantMatchesCPU), so the rest is the
// formats' own error. The README lists the numbers.
var kvPerplexityTol = map[ops.KVType]float64{ops.KVQ8_0: 0.005, ops.KVQ4_0: 0.03}

var kvMeasuredTol = map[string]map[ops.KVType]float64{
	"qwen2-gpt2-256x4-q8_0":    {ops.KVQ4_0: 0.06},
	"llama3rf-gpt2-256x4-q8_0": {ops.KVQ8_0: 0.01, ops.KVQ4_0: 0.2},
	"phi3-256x4-f16":           {ops.KVQ8_0: 0.015, ops.KVQ4_0: 0.08},
	// gpt-oss (q8_0 -3.2%, q4_0 +2.2%): even the f16 cache's rounding
	// moves it 2.7% from the CPU reference's f32 cache (the reference's
	// own f16 perplexity is the GPU's within 0.13%), while the q8_0 and
	// q4_0 caches give the CPU reference's perplexity with the same
	// quantization within 0.02%.
	"gpt-oss-gpt2-192x4-mxfp4": {ops.KVQ8_0: 0.04, ops.KVQ4_0: 0.04},
}

// TestKVQuantPerplexity scores the fixture text of every parity model
// whose keys and values come in blocks of 32 with f16, q8_0 and q4_0 KV
// caches (keys and values alike).
func TestKVQuantPerplexity(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dev := vktest.Open(t, vk.Options{})
	tested := 0
	for _, m := range loadParityModels(t) {
		pr := m.ref.Perplexity
		if pr.Text == "" || !ops.KVBlocked(ops.KVQ8_0, m.opts.KVHeads*m.opts.HeadDim) {
			continue
		}
		tested++
		if !sweep.Pick(tested, 0, 2) {
			// CI scores every other model, make test-long all of them;
			// the quantized caches' kernels are checked on every shape
			// in engine/ops (TestAttentionQuant, TestKVWriteQuant) and
			// a whole model against the CPU by TestKVQuantMatchesCPU.
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(fixtures.Dir(t, "models"), pr.Text))
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokenizer.New(m.file)
			if err != nil {
				t.Fatal(err)
			}
			ppl := map[ops.KVType]float64{}
			for _, typ := range ops.KVTypes {
				gpu, err := NewGPUModel(dev, m.opts, m.w, GPUConfig{CtxSize: 128, Slots: 1, BatchSize: 64, TypeK: typ, TypeV: typ})
				if err != nil {
					t.Fatal(err)
				}
				model := &Model{File: m.file, Opts: m.opts, Tok: tok, GPU: gpu, Blocks: newBlocks(gpu.kv, 1)}
				res, err := Perplexity(context.Background(), model, string(text), pr.Ctx, pr.Chunks, nil)
				gpu.Close()
				if err != nil {
					t.Fatal(err)
				}
				ppl[typ] = res.PPL
			}
			for typ, tol := range kvPerplexityTol {
				if mt, ok := kvMeasuredTol[m.name][typ]; ok {
					tol = mt
				}
				rel := (ppl[typ] - ppl[ops.KVF16]) / ppl[ops.KVF16]
				t.Logf("%v KV: perplexity %.4f, f16 %.4f (%+.3f%%)", typ, ppl[typ], ppl[ops.KVF16], 100*rel)
				if math.Abs(rel) > tol || math.IsNaN(rel) {
					t.Errorf("%v KV: perplexity %.4f, f16's %.4f: off by %.3f%%, want within %.1f%%", typ, ppl[typ], ppl[ops.KVF16], 100*rel, 100*tol)
				}
			}
		})
	}
	if tested == 0 {
		t.Fatal("no parity model has keys and values in blocks of 32")
	}
}

// TestKVQuantMatchesCPU runs prompts and greedy steps with quantized caches
// under Config.Verify: every forward pass's logits must match the CPU
// reference (which quantizes what it caches alike) within 1e-2, and the
// scheduler's paths (prefix sharing with copy-on-write) run over them.
func TestKVQuantMatchesCPU(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	path := filepath.Join(fixtures.Dir(t, "models"), "llama-spm-256x4-q8_0.gguf")
	for _, pair := range [][2]ops.KVType{{ops.KVQ8_0, ops.KVQ8_0}, {ops.KVQ4_0, ops.KVQ4_0}, {ops.KVQ8_0, ops.KVQ4_0}} {
		t.Run(pair[0].String()+"_"+pair[1].String(), func(t *testing.T) {
			m, err := Load(path, Config{CtxSize: 64, Parallel: 2, BatchSize: 32, Verify: true, CacheTypeK: pair[0], CacheTypeV: pair[1]})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			prompt := testPrompt(m, 1, 37)
			if _, err := m.Prefill(context.Background(), 0, 0, prompt); err != nil {
				t.Fatal(err)
			}
			// Slot 1 shares slot 0's pages, then both write past them (the
			// partial third page is copied first).
			if err := m.Blocks.CopyPrefix(1, 0, 35); err != nil {
				t.Fatal(err)
			}
			for i := range 6 {
				for s := range 2 {
					if _, err := m.Step(s, m.Blocks.Len(s), int32(5+i+s)); err != nil {
						t.Fatalf("slot %d step %d: %v", s, i, err)
					}
				}
			}
		})
	}
}
