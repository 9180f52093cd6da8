package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// TestKeptGraphs runs the same prefill and decode batches through a model
// that keeps its recorded passes and one that records every pass: the
// logits are bit-identical, the decode steps reuse their graphs, and a
// graph made stale (a bound buffer closed on the device) is recorded again.
func TestKeptGraphs(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dev := vktest.Open(t, vk.Options{})
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			o, w := openModel(t, genModel(t, modelgen.Options{Arch: arch, Type: gguf.TypeF16, Embd: 64, Layers: 2, Seed: 11}))
			cfg := GPUConfig{CtxSize: 600, Slots: 3, BatchSize: 16}
			kept, err := NewGPUModel(dev, o, w, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer kept.Close()
			cfg.KeepGraphs = PathOff
			plain, err := NewGPUModel(dev, o, w, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()

			step := func(what string, b Batch) []float32 {
				t.Helper()
				want, err := plain.Forward(b)
				if err != nil {
					t.Fatal(err)
				}
				got, err := kept.Forward(b)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %d logits kept, %d recorded", what, len(got), len(want))
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: logit %d = %g from the kept graph, %g recorded anew", what, i, got[i], want[i])
					}
				}
				return want
			}
			lens := []int{40, 7, 300}
			next := make([]int32, len(lens))
			for s, n := range lens {
				for c0 := 0; c0 < n; c0 += 16 {
					var b Batch
					for i := c0; i < min(n, c0+16); i++ {
						b.Tokens = append(b.Tokens, int32((i*37+s*11+1)%o.Vocab))
						b.Slots = append(b.Slots, int32(s))
						b.Pos = append(b.Pos, int32(i))
						b.Out = append(b.Out, logitsIf(i == n-1))
					}
					if l := step(fmt.Sprintf("slot %d chunk at %d", s, c0), b); len(l) > 0 {
						next[s] = argmaxF32(l)
					}
				}
			}
			reused0, _ := kept.KeptGraphs()
			pos := append([]int(nil), lens...)
			decode := func(slots []int, steps int) {
				for range steps {
					var b Batch
					for _, s := range slots {
						b.Tokens = append(b.Tokens, next[s])
						b.Slots = append(b.Slots, int32(s))
						b.Pos = append(b.Pos, int32(pos[s]))
						b.Out = append(b.Out, logitsIf(true))
						pos[s]++
					}
					l := step(fmt.Sprintf("decode of slots %v at %v", slots, b.Pos), b)
					for i, s := range slots {
						next[s] = argmaxF32(l[i*o.Vocab : (i+1)*o.Vocab])
					}
				}
			}
			decode([]int{0, 1, 2}, 6)
			decode([]int{0, 2}, 3)
			reused, n := kept.KeptGraphs()
			// 5 of the 6 three-row steps and 2 of the 3 two-row steps
			// reuse a graph (the longest row stays under 512 keys).
			if got := reused - reused0; got != 7 {
				t.Errorf("decode steps submitted from kept graphs: %d, want 7 (%d graphs kept)", got, n)
			}
			if r, _ := plain.KeptGraphs(); r != 0 {
				t.Errorf("with keeping off, %d passes reused a graph, want 0", r)
			}
			// Closing a buffer a kernel bound makes every kept graph stale:
			// the next step records its graph again, with the same result.
			b, err := dev.NewBuffer(256, vk.HostBuffer)
			if err != nil {
				t.Fatal(err)
			}
			c, err := dev.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if err := kept.k.Fill(c, b.All(), 64, 1); err != nil {
				t.Fatal(err)
			}
			if err := c.Submit(); err != nil {
				t.Fatal(err)
			}
			b.Close()
			decode([]int{0, 1, 2}, 1)
			if r, _ := kept.KeptGraphs(); r != reused {
				t.Errorf("the step after a buffer was closed reused a stale graph (%d reuses, want %d)", r, reused)
			}
			decode([]int{0, 1, 2}, 2)
			if r, _ := kept.KeptGraphs(); r != reused+2 {
				t.Errorf("after recording again: %d reuses, want %d", r, reused+2)
			}
			// Past 512 keys the longest row needs a new key bucket.
			decode([]int{2}, 220)
			vktest.Check(t, dev)
		})
	}
}

// BenchmarkDecodeStep times decode steps of 1 and 8 rows of the fixture
// model with kept graphs and with every pass recorded: the difference is
// the recording's cost per step.
//
//	go test ./engine -run '^$' -bench DecodeStep -benchtime 200x
func BenchmarkDecodeStep(b *testing.B) {
	dev, err := vk.Open(vk.Options{})
	if err != nil {
		b.Skipf("no Vulkan device: %v", err)
	}
	defer dev.Close()
	o, w := openModel(b, filepath.Join(fixtures.Dir(b, "models"), "llama-spm-256x4-q8_0.gguf"))
	for _, rows := range []int{1, 8} {
		for _, keep := range []bool{true, false} {
			b.Run(fmt.Sprintf("rows=%d/kept=%v", rows, keep), func(b *testing.B) {
				cfg := GPUConfig{CtxSize: 4096, Slots: rows, BatchSize: 16, KeepGraphs: PathOff}
				if keep {
					cfg.KeepGraphs = PathOn
				}
				m, err := NewGPUModel(dev, o, w, cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				var out Output
				batch := Batch{Tokens: make([]int32, rows), Slots: make([]int32, rows), Pos: make([]int32, rows), Out: make([]RowOut, rows)}
				for i := range rows {
					batch.Slots[i], batch.Out[i], batch.Tokens[i] = int32(i), RowOut{Kind: OutLogits}, int32(1+i)
				}
				b.ResetTimer()
				for i := range b.N {
					for r := range rows {
						batch.Pos[r] = int32(i % 4000)
					}
					if err := m.ForwardInto(batch, &out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
