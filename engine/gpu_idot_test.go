package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/internal/sweep"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// intDotTol bounds the relative logit error (maxRelError) of the
// integer-dot matvec path against the CPU reference with f32 activations.
// Q8_1 rounds every activation of a 32-element block to a multiple of d =
// max|x|/127: an error uniform in +-d/2, whose standard deviation
// d/sqrt(12) is 0.2% to 0.6% of the block's spread for max|x| of 1 to 3
// standard deviations (the residual stream's outliers make it larger).
// That noise enters each of the 7 products of a layer and the output
// projection independently, and through 4 layers adds up to about sqrt(29)
// x 0.6%, some 3% of a logit's scale; measured: 1.7% on both fixtures
// (0.03% with the float kernels). The bound is the estimate; a wrong
// kernel (a lost min or scale) errs by tens of percent.
const intDotTol = 3e-2

// The CPU reference that rounds its activations to Q8_1 as the path does
// (CPUModel.q8Act) cannot be matched much closer than the f32 one: the
// rounding is discontinuous, and where the GPU's activations differ from
// the CPU's in the last bits (the float path's 3e-4 at the logits) an
// x/d near a half rounds the other way, so every layer rounds a different
// set of activations. What it does give is the size of the rounding's
// effect on these logits at each step (measured 1.1% to 1.7%), and the
// GPU's departure from the f32 reference must be no more than two such
// roundings plus the float path's tolerance: intDotRoundings.
const intDotRoundings = 2

// TestGPUIntDotMatchesCPU runs the fixture models with the integer-dot
// path forced (lavapipe reports shaderIntegerDotProduct but keeps the float
// kernels by default) through a mixed batch and decode steps, comparing
// the logits with the CPU reference's within intDotTol and within twice the
// difference that rounding the reference's activations to Q8_1 makes. The
// decode steps' q|k|v and gate|up products take the fused integer-dot
// kernels (the device's profile names them).
func TestGPUIntDotMatchesCPU(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dev := vktest.Open(t, vk.Options{})
	if !dev.Features().IntegerDot {
		t.Skipf("%s has no shaderIntegerDotProduct", dev.Info().Name)
	}
	dir := fixtures.Dir(t, "models")
	for ni, name := range []string{"llama-spm-256x4-q8_0", "llama-spm-256x4-q4_k_m"} {
		path := filepath.Join(dir, name+".gguf")
		if _, err := os.Stat(path); err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		// The device's matvec layout, and on CPU devices the GPUs' too
		// (with one compute unit: 4 rows per group of invocations; the
		// 16/8-bit storage views).
		for li, gpuMV := range []bool{false, true} {
			if gpuMV && dev.Info().Type != vk.TypeCPU {
				continue
			}
			if dev.Info().Type == vk.TypeCPU && !sweep.Pick(ni+1, li, 2) {
				// CI on a CPU device: Q8_0 in the GPUs' layout, Q4_K_M in
				// the device's own (make test-long: both in both).
				continue
			}
			sub, units := name, 0
			if gpuMV {
				sub, units = name+"/gpu-layout", 1
			}
			t.Run(sub, func(t *testing.T) {
				o, w := openModel(t, path)
				cpu, err := NewCPUModel(o, w, 32, 3)
				if err != nil {
					t.Fatal(err)
				}
				cpuQ8, err := NewCPUModel(o, w, 32, 3)
				if err != nil {
					t.Fatal(err)
				}
				cpuQ8.q8Act = true
				// Batches of at most 11 rows: every product takes the
				// matvec kernel, so the integer path.
				gpu, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: 32, Slots: 3, BatchSize: 16, intDot: true, gpuMatVec: gpuMV, ComputeUnits: units})
				if err != nil {
					t.Fatal(err)
				}
				defer gpu.Close()
				if !gpu.k.IntegerDot() || gpu.q8Bytes() == 0 {
					t.Fatalf("the integer-dot path is off (IntegerDot %v, scratch %d bytes)", gpu.k.IntegerDot(), gpu.q8Bytes())
				}
				var worst, worstQ8 float64
				// step runs b on the three models and returns the f32
				// reference's logits.
				step := func(what string, b Batch) []float32 {
					want, err := cpu.Forward(b)
					if err != nil {
						t.Fatal(err)
					}
					wantQ8, err := cpuQ8.Forward(b)
					if err != nil {
						t.Fatal(err)
					}
					got, err := gpu.Forward(b)
					if err != nil {
						t.Fatal(err)
					}
					e, rounding := maxRelError(got, want), maxRelError(wantQ8, want)
					if e > intDotTol || math.IsNaN(e) {
						t.Fatalf("%s: max relative logit error %.3g, want <= %.3g", what, e, intDotTol)
					}
					if tol := intDotRoundings*rounding + tolerance(gguf.TypeQ8_0); e > tol {
						t.Fatalf("%s: max relative logit error %.3g, want <= %.3g (the Q8_1 reference differs by %.3g)", what, e, tol, rounding)
					}
					worst, worstQ8 = max(worst, e), max(worstQ8, rounding)
					return want
				}
				if err := dev.Profile(); err != nil { // from here on
					t.Fatal(err)
				}
				want := step("mixed batch", mixedBatch(o.Vocab))
				next := argmaxF32(want[:o.Vocab])
				for i := range 6 {
					next = argmaxF32(step(fmt.Sprintf("decode step %d", i), decodeStep(next, i)))
				}
				t.Logf("max relative logit error %.3g (bound %.3g); the Q8_1 reference's %.3g", worst, intDotTol, worstQ8)
				fused := 0
				kernels, _ := dev.Profiled()
				for _, k := range kernels {
					if strings.HasPrefix(k.Name, "matvec_fused_") && strings.Contains(k.Name, "_q8_1_") {
						fused += k.Calls
					}
				}
				// Each decode step runs every weight fused at load (q|k|v
				// where the three share a type, gate|up) at least once.
				if want := 6 * len(gpu.g.fusedKinds); fused < want || want == 0 {
					t.Errorf("%d fused integer-dot dispatches, want at least %d (6 decode steps of %d fused weights)", fused, want, len(gpu.g.fusedKinds))
				}
			})
		}
	}
}
