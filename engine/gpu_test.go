package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/tokenizer"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/internal/sweep"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// openModel loads the weights of a GGUF file for both paths.
func openModel(t testing.TB, path string) (Options, *Weights) {
	t.Helper()
	_, o, w := openFile(t, path)
	return o, w
}

// openFile is openModel that also returns the open file (closed when the
// test ends).
func openFile(t testing.TB, path string) (*gguf.File, Options, *Weights) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	o, err := ReadOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	w, err := LoadWeights(f, o)
	if err != nil {
		t.Fatal(err)
	}
	return f, o, w
}

// Parallel tests. The package's heaviest tests (those that compile many
// pipeline variants: lavapipe runs LLVM once per variant, at its first
// dispatch, on the calling thread) call t.Parallel, each on a device of
// its own, so that a cold run (CI's empty shader cache) keeps both cores
// busy; go test runs at most GOMAXPROCS of them at once, after the
// package's serial tests.

func genModel(t *testing.T, opts modelgen.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := modelgen.WriteFile(path, opts); err != nil {
		t.Fatal(err)
	}
	return path
}

// tolerance is the bound on the relative logit error between the GPU and
// the CPU reference: the GPU keeps the KV cache in f16 and accumulates in
// f32 in another order; both read the same quantized weights.
func tolerance(t gguf.GGMLType) float64 {
	switch t {
	case gguf.TypeF32:
		return 2e-3
	default:
		return 5e-3
	}
}

// TestGPUMatchesCPU runs a mixed batch (a prompt chunk of one slot and
// decode rows of two others), then decode steps, on the GPU and the CPU
// reference, for every architecture and weight format.
func TestGPUMatchesCPU(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dev := vktest.Open(t, vk.Options{})
	archs := []struct {
		arch, vocab string
		tied        bool
		ropeFreqs   bool
	}{{"llama", "spm", false, false}, {"qwen2", "bpe", true, false}, {"qwen3", "bpe", false, false},
		{"llama", "bpe", true, true}, {"gemma2", "spm", true, false}, {"gemma3", "spm", true, false}, {"phi3", "spm", false, false},
		{"qwen3moe", "bpe", false, false}, {"gpt-oss", "bpe", false, false}, {"qwen35", "spm", false, false}, {"qwen35moe", "bpe", false, false}}
	types := []gguf.GGMLType{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1,
		gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeMXFP4}
	few := []gguf.GGMLType{gguf.TypeF32, gguf.TypeQ8_0, gguf.TypeQ4_K}
	for ai, a := range archs {
		for _, typ := range types {
			if j := slices.Index(few, typ); (a.arch != "llama" || a.ropeFreqs) && (j < 0 || !sweep.Pick(ai, j, len(few))) &&
				!((a.arch == "qwen3moe" || a.arch == "qwen35") && sweep.Long()) {
				// Every format on llama and (make test-long) qwen3moe, whose
				// experts run in matvec_id kernels of their own, and
				// qwen35, whose recurrent layers do too; on the
				// others F32, Q8_0 and Q4_K (make test-long), or one of
				// them, rotating (CI).
				continue
			}
			if a.arch == "llama" && !a.ropeFreqs && !sweep.Long() && (typ == gguf.TypeQ4_K || typ == gguf.TypeQ6_K) {
				// CI: of the K-quants (some 20 s of kernel compiles each
				// on a cold cache) llama runs Q5_K; Q4_K runs on qwen3
				// and gemma3 here, Q4_K and Q6_K in TestParityGPU's
				// q4_k_m model and TestGPUMatVecLayout.
				continue
			}
			name := a.arch
			if a.ropeFreqs {
				name += "-rope_freqs"
			}
			t.Run(fmt.Sprintf("%s/%v", name, typ), func(t *testing.T) {
				embd := 64
				if typ.BlockSize() == 256 {
					embd = 256
				}
				path := genModel(t, modelgen.Options{Arch: a.arch, Vocab: a.vocab, Type: typ, Embd: embd, Layers: 2, Heads: 4, KVHeads: 2, Tied: a.tied,
					RopeFreqs: a.ropeFreqs, Seed: 7})
				o, w := openModel(t, path)
				got := matchCPU(t, dev, o, w, GPUConfig{CtxSize: 32, Slots: 3, BatchSize: 16}, tolerance(typ))
				if a.arch == "gemma2" {
					// modelgen's final cap 5 bends logits that reach about 20.
					top := 0.0
					for _, v := range got {
						top = math.Max(top, math.Abs(float64(v)))
					}
					if top > 5 || top < 4 {
						t.Fatalf("gemma2: largest |logit| %.3f, want soft-capped to at most 5 (and near it)", top)
					}
				}
			})
		}
	}
}

// matchCPU runs mixedBatch, then four decode steps on slot 1 feeding the
// CPU's argmax, on a GPU model of cfg and the CPU reference, failing where
// the logits differ by more than tol (maxRelError). It returns the GPU's
// logits of the mixed batch.
func matchCPU(t *testing.T, dev *vk.Device, o Options, w *Weights, cfg GPUConfig, tol float64) []float32 {
	t.Helper()
	cpu, err := NewCPUModel(o, w, cfg.CtxSize, cfg.Slots)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := NewGPUModel(dev, o, w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	batch := mixedBatch(o.Vocab)
	want, err := cpu.Forward(batch)
	if err != nil {
		t.Fatal(err)
	}
	first, err := gpu.Forward(batch)
	if err != nil {
		t.Fatal(err)
	}
	first = append([]float32(nil), first...)
	if e := maxRelError(first, want); e > tol || math.IsNaN(e) {
		t.Fatalf("mixed batch: max relative logit error %.3g, want <= %.3g", e, tol)
	}
	next := argmaxF32(want[:o.Vocab])
	for step := range 4 {
		b := decodeStep(next, step)
		want, err := cpu.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gpu.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		if e := maxRelError(got, want); e > tol || math.IsNaN(e) {
			t.Fatalf("decode step %d: max relative logit error %.3g, want <= %.3g", step, e, tol)
		}
		next = argmaxF32(want)
	}
	return first
}

// TestGPUMatVecLayout runs generated llama models through the GPU matvec
// layout (GPUConfig.gpuMatVec: rows per group, the 16- and 8-bit storage
// views, the required subgroup size) whatever the device, against the CPU
// reference: with one compute unit every product takes 4 rows per group
// of invocations, with 64 most of these small models' products take 1.
func TestGPUMatVecLayout(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dev := vktest.Open(t, vk.Options{})
	for ti, typ := range []gguf.GGMLType{gguf.TypeF16, gguf.TypeQ4_0, gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K} {
		for ui, units := range []int{1, 64} {
			if !sweep.Pick(ti, ui, 2) {
				continue // CI: one unit count per format, alternating; make test-long runs both
			}
			t.Run(fmt.Sprintf("%v/units%d", typ, units), func(t *testing.T) {
				embd := 64
				if typ.BlockSize() == 256 {
					embd = 256
				}
				path := genModel(t, modelgen.Options{Arch: "llama", Vocab: "spm", Type: typ, Embd: embd, Layers: 2, Heads: 4, KVHeads: 2, Seed: 7})
				o, w := openModel(t, path)
				matchCPU(t, dev, o, w, GPUConfig{CtxSize: 32, Slots: 3, BatchSize: 16, ComputeUnits: units, gpuMatVec: true}, tolerance(typ))
			})
		}
	}
}

// mixedBatch is the GPU tests' first batch over a vocabulary of vocab
// tokens: a 9-token prompt on slot 1 (logits for its last row) and one
// token each on slots 0 and 2.
func mixedBatch(vocab int) Batch {
	batch := Batch{}
	for i := range 9 {
		batch.Tokens = append(batch.Tokens, int32((i*37+5)%vocab))
		batch.Slots = append(batch.Slots, 1)
		batch.Pos = append(batch.Pos, int32(i))
		batch.Out = append(batch.Out, logitsIf(i == 8))
	}
	for i, slot := range []int32{0, 2} {
		batch.Tokens = append(batch.Tokens, int32(11+i))
		batch.Slots = append(batch.Slots, slot)
		batch.Pos = append(batch.Pos, 0)
		batch.Out = append(batch.Out, logitsIf(true))
	}
	return batch
}

// decodeStep is decode step step (from 0) on slot 1 after mixedBatch,
// feeding token tok.
func decodeStep(tok int32, step int) Batch {
	return Batch{Tokens: []int32{tok}, Slots: []int32{1}, Pos: []int32{int32(9 + step)}, Out: []RowOut{{Kind: OutLogits}}}
}

func argmaxF32(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// TestGreedyIdentical decodes 32 tokens greedily on both paths from F32 and
// F16 models and requires the same tokens.
func TestGreedyIdentical(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dev := vktest.Open(t, vk.Options{})
	for _, typ := range []gguf.GGMLType{gguf.TypeF32, gguf.TypeF16} {
		for _, arch := range []string{"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen3moe", "gpt-oss"} {
			t.Run(fmt.Sprintf("%s/%v", arch, typ), func(t *testing.T) {
				path := genModel(t, modelgen.Options{Arch: arch, Type: typ, Embd: 64, Layers: 2, Seed: 3})
				o, w := openModel(t, path)
				cpu, err := NewCPUModel(o, w, 48, 1)
				if err != nil {
					t.Fatal(err)
				}
				gpu, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: 48, Slots: 1, BatchSize: 8})
				if err != nil {
					t.Fatal(err)
				}
				defer gpu.Close()
				prompt := []int32{1, 50, 60, 70}
				var cpuToks, gpuToks []int32
				for _, path := range []struct {
					fw  forwarder
					out *[]int32
				}{{cpu, &cpuToks}, {gpu, &gpuToks}} {
					b := Batch{}
					for i, tok := range prompt {
						b.Tokens = append(b.Tokens, tok)
						b.Slots = append(b.Slots, 0)
						b.Pos = append(b.Pos, int32(i))
						b.Out = append(b.Out, logitsIf(i == len(prompt)-1))
					}
					for step := range 32 {
						logits, err := path.fw.Forward(b)
						if err != nil {
							t.Fatal(err)
						}
						next := argmaxF32(logits)
						*path.out = append(*path.out, next)
						b = Batch{Tokens: []int32{next}, Slots: []int32{0}, Pos: []int32{int32(len(prompt) + step)}, Out: []RowOut{{Kind: OutLogits}}}
					}
				}
				for i := range cpuToks {
					if cpuToks[i] != gpuToks[i] {
						t.Fatalf("greedy token %d: GPU %d, CPU %d (GPU %v, CPU %v)", i, gpuToks[i], cpuToks[i], gpuToks, cpuToks)
					}
				}
			})
		}
	}
}

func TestParityGPU(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	for _, m := range loadParityModels(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dev := vktest.Open(t, vk.Options{})
			gpu, err := NewGPUModel(dev, m.opts, m.w, GPUConfig{CtxSize: 128, Slots: 2, BatchSize: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer gpu.Close()
			checkPromptTokens(t, m)
			checkTeacherForced(t, m, gpu, 1)
			if m.greedy {
				checkGreedy(t, m, gpu, 0)
			}
			checkPerplexity(t, m, gpu)
		})
	}
}

// checkPerplexity compares our perplexity over the fixture text with the
// reference's.
func checkPerplexity(t *testing.T, m parityModel, gpu *GPUModel) {
	pr := m.ref.Perplexity
	if pr.Text == "" {
		return
	}
	text, err := os.ReadFile(filepath.Join(fixtures.Dir(t, "models"), pr.Text))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(m.file)
	if err != nil {
		t.Fatal(err)
	}
	model := &Model{File: m.file, Opts: m.opts, Tok: tok, GPU: gpu, Blocks: newBlocks(gpu.kv, gpu.Config().Slots)}
	if gpu.Config().CtxSize < pr.Ctx {
		t.Fatalf("GPU context %d < perplexity window %d", gpu.Config().CtxSize, pr.Ctx)
	}
	res, err := Perplexity(context.Background(), model, string(text), pr.Ctx, pr.Chunks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rel := math.Abs(res.PPL-pr.PPL) / pr.PPL; rel > m.pplTol {
		t.Errorf("perplexity = %.4f, want %.4f within %.1f%% (off by %.3f%%)", res.PPL, pr.PPL, 100*m.pplTol, 100*rel)
	}
	t.Logf("perplexity %.4f +/- %.4f (reference %.4f +/- %.4f)", res.PPL, res.Err, pr.PPL, pr.Err)
}

// checkPromptTokens requires our tokenizer to give the reference's prompt
// tokens.
func checkPromptTokens(t *testing.T, m parityModel) {
	tok, err := tokenizer.New(m.file)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range m.ref.Greedy {
		got, err := tok.Encode(g.Prompt, true, false)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(g.PromptTokens) {
			t.Errorf("Encode(%q) = %v, want %v", g.Prompt, got, g.PromptTokens)
		}
	}
}
