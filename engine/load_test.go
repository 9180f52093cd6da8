package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// rewrite copies the GGUF file at path with edit applied to its metadata
// and tensors, and returns the new file's path.
func rewrite(t *testing.T, path string, edit func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		w.MustSet(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if !edit(w, f, ti) {
			continue
		}
		data, _ := f.TensorData(ti)
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	edit(w, f, nil)
	out := filepath.Join(t.TempDir(), "edited.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadErrors(t *testing.T) {
	base := genModel(t, modelgen.Options{Arch: "qwen2", Embd: 64, Layers: 1})
	cases := []struct {
		name string
		edit func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool
		want string
	}{
		{"unsupported architecture", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			if ti == nil {
				w.MustSet("general.architecture", "mamba")
			}
			return true
		}, `unsupported architecture "mamba"`},
		{"missing tensor", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			return ti == nil || ti.Name != "blk.0.ffn_up.weight"
		}, "blk.0.ffn_up.weight is missing"},
		{"missing bias", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			return ti == nil || ti.Name != "blk.0.attn_k.bias"
		}, "blk.0.attn_k.bias"},
		{"bias of the wrong width", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			if ti != nil && ti.Name == "blk.0.attn_q.bias" {
				w.AddTensor(ti.Name, gguf.TypeF32, []uint64{32}, make([]byte, 4*32))
				return false
			}
			return true
		}, "blk.0.attn_q.bias has dims [32], want [64 1]"},
		{"matrix of the wrong shape", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			if ti != nil && ti.Name == "blk.0.ffn_down.weight" {
				w.AddTensor(ti.Name, gguf.TypeF32, []uint64{ti.Dims[1], ti.Dims[0]}, make([]byte, 4*ti.Dims[0]*ti.Dims[1]))
				return false
			}
			return true
		}, "blk.0.ffn_down.weight has dims [64 192], want [192 64]"},
		{"F16 norm", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			if ti != nil && ti.Name == "output_norm.weight" {
				w.AddTensor(ti.Name, gguf.TypeF16, ti.Dims, make([]byte, 2*ti.Dims[0]))
				return false
			}
			return true
		}, "vector output_norm.weight has type F16"},
		{"unimplemented rope scaling", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			if ti == nil {
				w.MustSet("qwen2.rope.scaling.type", "su")
			}
			return true
		}, `rope.scaling.type "su" is not supported`},
		{"yarn without its original context", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			if ti == nil {
				w.MustSet("qwen2.rope.scaling.type", "yarn")
			}
			return true
		}, "rope.scaling.original_context_length"},
		{"missing key", func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
			if ti == nil {
				w.MustSet("qwen2.block_count", "four")
			}
			return true
		}, `"qwen2.block_count" has type string`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := rewrite(t, base, c.edit)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			o, err := ReadOptions(f)
			if err == nil {
				_, err = LoadWeights(f, o)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("loading = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestUnsupportedTensorType(t *testing.T) {
	base := genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1})
	path := rewrite(t, base, func(w *gguf.Writer, f *gguf.File, ti *gguf.TensorInfo) bool {
		if ti != nil && ti.Name == "blk.0.attn_q.weight" {
			// 64x64 IQ2_XXS: 256-element blocks of 66 bytes.
			w.AddTensor(ti.Name, gguf.TypeIQ2_XXS, []uint64{256, 16}, make([]byte, 16*66))
			return false
		}
		return true
	})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, err := ReadOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWeights(f, o); err == nil || !strings.Contains(err.Error(), "IQ2_XXS") || !strings.Contains(err.Error(), "blk.0.attn_q.weight") {
		t.Fatalf("LoadWeights = %v, want an error naming IQ2_XXS and the tensor", err)
	}
}

func TestDoesNotFit(t *testing.T) {
	dev := vktest.Open(t, vk.Options{})
	o, w := openModel(t, genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1}))
	_, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: 60000, Slots: 1024, BatchSize: 8, KVMemory: 1 << 40})
	if err == nil || !strings.Contains(err.Error(), "needs") || !strings.Contains(err.Error(), "has") {
		t.Fatalf("NewGPUModel with a 1 TiB KV pool = %v, want an error saying what it needs and what the device has", err)
	}
}

// TestContextBeyondDevice asks a CPU device (lavapipe, whose driver ends a
// shader's loops after 65535 iterations) for a context longer than its
// attention kernels walk: an error at load naming the bound, not wrong
// attention past it. Other devices have no such bound.
func TestContextBeyondDevice(t *testing.T) {
	dev := vktest.Open(t, vk.Options{})
	o, w := openModel(t, genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1}))
	_, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: 70000, Slots: 1, BatchSize: 8})
	cpu := dev.Info().Type == vk.TypeCPU
	if got := err != nil && strings.Contains(err.Error(), "attends over at most 65000"); got != cpu {
		t.Fatalf("a 70000-position context on %s (CPU device %v): %v", dev.Info().Name, cpu, err)
	}
}

func TestBatchErrors(t *testing.T) {
	o, w := openModel(t, genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1}))
	cpu, err := NewCPUModel(o, w, 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []Batch{
		{},
		{Tokens: []int32{1}, Slots: []int32{0}, Pos: []int32{0}},
		{Tokens: []int32{-1}, Slots: []int32{0}, Pos: []int32{0}, Out: []RowOut{{Kind: OutLogits}}},
		{Tokens: []int32{1}, Slots: []int32{2}, Pos: []int32{0}, Out: []RowOut{{Kind: OutLogits}}},
		{Tokens: []int32{1}, Slots: []int32{0}, Pos: []int32{16}, Out: []RowOut{{Kind: OutLogits}}},
	} {
		if _, err := cpu.Forward(b); err == nil {
			t.Errorf("Forward(%+v) succeeded, want an error", b)
		}
	}
}

// TestSlotLengths checks that Model tracks each slot's sequence: a row may
// extend a slot by one position or rewrite it, never skip ahead onto
// positions another sequence left behind; Truncate rewinds; a rewritten
// prefix gives the logits of a fresh run.
func TestSlotLengths(t *testing.T) {
	path := genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1})
	m, err := Load(path, Config{CtxSize: 32, Parallel: 2, BatchSize: 16, Validation: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	want, err := m.Prefill(ctx, 0, 0, []int32{5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	if m.Blocks.Len(0) != 3 || m.Blocks.Len(1) != 0 {
		t.Fatalf("after a 3-token prefill of slot 0: lengths %d, %d, want 3, 0", m.Blocks.Len(0), m.Blocks.Len(1))
	}
	for _, b := range []Batch{
		seqBatch([]int32{1}, 0, 4),    // skips position 3
		seqBatch([]int32{1}, 1, 1),    // slot 1 is empty
		seqBatch([]int32{1, 2}, 1, 1), // starts past the end
	} {
		b.Out[b.Len()-1] = RowOut{Kind: OutLogits}
		if _, err := m.Forward(b); err == nil || !strings.Contains(err.Error(), "holds") {
			t.Errorf("Forward(slots %v, positions %v) = %v, want an error saying how many positions the slot holds", b.Slots, b.Pos, err)
		}
	}
	if err := m.Blocks.Truncate(0, 4); err == nil {
		t.Error("Truncate(0, 4) of a 3-position slot succeeded")
	}
	if err := m.Blocks.Truncate(0, 1); err != nil || m.Blocks.Len(0) != 1 {
		t.Fatalf("Truncate(0, 1) = %v, length %d", err, m.Blocks.Len(0))
	}
	if _, err := m.Forward(seqBatch([]int32{6}, 0, 2)); err == nil {
		t.Error("position 2 after truncating to 1 succeeded")
	}
	// Slot 0 holds [5]; feeding 6, 7 again must give the first run's logits.
	got, err := m.Prefill(ctx, 0, 1, []int32{6, 7})
	if err != nil {
		t.Fatal(err)
	}
	if e := maxRelError(got, want); e > 1e-5 {
		t.Errorf("logits after truncate and refill differ by %.3g", e)
	}
	// Rewriting position 0 ends the sequence there.
	if _, err := m.Prefill(ctx, 0, 0, []int32{9}); err != nil || m.Blocks.Len(0) != 1 {
		t.Fatalf("rewriting position 0: %v, length %d, want 1", err, m.Blocks.Len(0))
	}
}

// TestDeviceLocalFallback loads a model on a UMA device whose device-local
// memory is capped below the model's size (lavapipe standing in for an
// APU's carve-out): the load succeeds with part of the weights in
// host-visible fallback memory, Placement says which heap holds what, and
// the logits are those of the uncapped load.
func TestDeviceLocalFallback(t *testing.T) {
	path := genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2})
	tokens := []int32{5, 6, 7, 8}
	// One model at a time: each returns its logits and placement, closed.
	load := func(budget uint64) ([]float32, []HeapShare, vk.DeviceType) {
		m, err := Load(path, Config{CtxSize: 16, BatchSize: 8, Validation: true, DeviceLocalBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		}()
		logits, err := m.Prefill(context.Background(), 0, 0, tokens)
		if err != nil {
			t.Fatal(err)
		}
		return logits, m.GPU.Placement(), m.Device().Info().Type
	}
	want, shares, typ := load(0)
	if typ == vk.TypeDiscrete {
		t.Skip("a discrete device: device buffers do not fall back")
	}
	for _, h := range shares {
		if h.Fallback {
			t.Fatalf("without a budget: %v, want no fallback", h)
		}
	}
	const budget = 300 << 10 // token_embd (256 KiB) and a little
	got, shares, _ := load(budget)
	var local, fallback HeapShare
	for _, h := range shares {
		t.Logf("%v", h)
		s := &local
		if h.Fallback {
			s = &fallback
		}
		s.Weights += h.Weights
		s.KV += h.KV
		s.Scratch += h.Scratch
	}
	// Scratch holds host buffers too (inputs, logits), which the budget
	// does not count.
	if local.Weights == 0 || fallback.Weights == 0 || local.Weights+local.KV > budget {
		t.Errorf("with a %d-byte device-local budget: weights %d and KV %d device-local, weights %d fallback; want weights in both and at most the budget device-local",
			budget, local.Weights, local.KV, fallback.Weights)
	}
	if len(got) != len(want) {
		t.Fatalf("%d logits, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("logit %d = %g with fallback memory, %g without", i, got[i], want[i])
		}
	}
}

// TestWeightKind checks the labels matrix products carry in a profile.
func TestWeightKind(t *testing.T) {
	for in, want := range map[string]string{
		"blk.3.attn_q.weight":    "attn_q",
		"blk.12.ffn_down.weight": "ffn_down",
		"output.weight":          "output",
		"token_embd.weight":      "token_embd",
		"cls.output.weight":      "cls.output",
	} {
		if got := weightKind(in); got != want {
			t.Errorf("weightKind(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestArchTensors checks the tensor tags of every architecture: they
// parse, no name is declared twice at one level, and each need tag names
// an architecture that shares the struct.
func TestArchTensors(t *testing.T) {
	for _, arch := range Architectures() {
		t.Run(arch, func(t *testing.T) {
			decls, err := ArchTensors(arch)
			if err != nil {
				t.Fatal(err)
			}
			spec, _ := archFor(arch)
			seen := map[string]bool{}
			for _, d := range decls {
				key := d.Name
				if d.Block {
					key = "blk." + key
				}
				if seen[key] {
					t.Errorf("%s declared twice", key)
				}
				seen[key] = true
				for _, a := range strings.Split(d.Need, ",") {
					if other, err := archFor(a); a != "" && (err != nil || other.weights != spec.weights) {
						t.Errorf("%s: need tag names %q, which does not share %v", key, a, spec.weights)
					}
				}
			}
			if !seen["token_embd.weight"] {
				t.Error("no token_embd.weight")
			}
		})
	}
}
