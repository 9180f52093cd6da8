package vision

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/testseed"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

func genProjector(t *testing.T, o modelgen.ProjectorOptions) *Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proj.gguf")
	if err := modelgen.WriteProjector(path, o); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// relErr is max |a-b| / (max |b| + tiny).
func relErr(a, b []float32) float64 {
	var d, s float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = math.Max(s, math.Abs(float64(b[i])))
	}
	return d / (s + 1e-12)
}

// TestGeneratedGPUMatchesCPU runs every family's encoder on the GPU and on
// the CPU reference over generated projectors and seeded random inputs.
func TestGeneratedGPUMatchesCPU(t *testing.T) {
	dev := vktest.Open(t, vk.Options{})
	rng := testseed.Rand(t, 0)
	for _, tc := range []struct {
		name   string
		o      modelgen.ProjectorOptions
		tokens int // independent of the code: from the family's definition
	}{
		{"mlp", modelgen.ProjectorOptions{Type: "mlp", Blocks: 3, Seed: 1}, 16}, // (32/8)^2 patches: patch 0 dropped, class token kept
		{"mlp-gelu-q8", modelgen.ProjectorOptions{Type: "mlp", GELU: true, Type2D: gguf.TypeQ8_0, Seed: 2}, 16},
		{"gemma3", modelgen.ProjectorOptions{Type: "gemma3", Merge: 2, TextEmbd: 96, Seed: 3}, 16}, // (32/4/2)^2
		{"gemma3-pool4", modelgen.ProjectorOptions{Type: "gemma3", Merge: 4, ImageSize: 48, Seed: 4}, 9},
		{"idefics3", modelgen.ProjectorOptions{Type: "idefics3", Merge: 2, Seed: 5}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := genProjector(t, tc.o)
			if m.Tokens() != tc.tokens {
				t.Errorf("Tokens() = %d, want %d", m.Tokens(), tc.tokens)
			}
			u, err := NewGPU(dev, m, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer u.Close()
			S := m.P.ImageSize
			for round := range 2 {
				in := make([]float32, 3*S*S)
				for i := range in {
					in[i] = float32(rng.NormFloat64())
				}
				got, err := u.Encode(in)
				if err != nil {
					t.Fatal(err)
				}
				want, err := m.EncodeCPU(in)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != tc.tokens*m.P.OutEmbd {
					t.Fatalf("Encode gave %d values, want %d x %d", len(got), tc.tokens, m.P.OutEmbd)
				}
				// f32 kernels against float64 sums over a few hundred terms
				// per value, through norms and softmax, the same f16/Q8_0
				// weights: measured at most 3e-7 of the scale.
				e := relErr(got, want)
				t.Logf("round %d: relative error %.2g", round, e)
				if e > 1e-5 || math.IsNaN(e) {
					t.Errorf("round %d: GPU vs CPU reference: relative error %.3g", round, e)
				}
			}
			vktest.Check(t, dev)
		})
	}
}

// TestLegacyFFNNames: a LLaVA file that stores fc1 as ffn_down and fc2 as
// ffn_up (the legacy converter) gives the same embeddings as one with the
// standard names and the same weights.
func TestLegacyFFNNames(t *testing.T) {
	std := genProjector(t, modelgen.ProjectorOptions{Type: "mlp", Blocks: 3, Seed: 9})
	legacy := genProjector(t, modelgen.ProjectorOptions{Type: "mlp", Blocks: 3, Seed: 9, LegacyFFN: true})
	S := std.P.ImageSize
	in := make([]float32, 3*S*S)
	rng := testseed.Rand(t, 1)
	for i := range in {
		in[i] = float32(rng.NormFloat64())
	}
	a, err := std.EncodeCPU(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := legacy.EncodeCPU(in)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("legacy names give other embeddings (relative difference %.3g)", relErr(b, a))
	}
}

// TestOpenErrors: files that are not usable projectors are errors naming
// the key or tensor.
func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(w *gguf.Writer)
		want string
	}{
		{"unknown type", func(w *gguf.Writer) { w.MustSet("clip.projector_type", "resampler") }, `"resampler" is not supported`},
		{"no vision", func(w *gguf.Writer) { w.MustSet("clip.has_vision_encoder", false) }, "no vision encoder"},
		{"bad patch", func(w *gguf.Writer) { w.MustSet("clip.vision.patch_size", uint32(5)) }, "not a multiple"},
		{"stacked features", func(w *gguf.Writer) { w.MustSet("clip.vision.feature_layer", []int32{1, 2}) }, "stacked feature layers"},
		{"pinpoints", func(w *gguf.Writer) { w.MustSet("clip.vision.image_grid_pinpoints", []int32{336, 672}) }, "any-resolution"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := modelgen.GenerateProjector(modelgen.ProjectorOptions{Type: "mlp"})
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(w)
			path := filepath.Join(t.TempDir(), "p.gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			m, err := Open(path)
			if err == nil {
				m.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("Open(missing) = %v, want an error naming the file", err)
	}
}
