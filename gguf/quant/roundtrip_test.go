package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
)

// relRMS returns sqrt(sum((got-want)²) / sum(want²)), in float64.
func relRMS(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// roundTrip quantizes x as t and decodes it again.
func roundTrip(t testing.TB, typ gguf.GGMLType, x []float32) ([]byte, []float32) {
	t.Helper()
	q, err := Quantize(typ, x)
	if err != nil {
		t.Fatalf("Quantize(%v, %d elements) = %v", typ, len(x), err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatalf("Dequantize(%v, %d bytes) = %v", typ, len(q), err)
	}
	return q, y
}

// quantCases lists every quantizable format with the relative RMS error
// bound our quantizer must meet on the fixture's ffn_down weights
// (reference error from fixtures/quant/README.md, plus a margin) and on
// Gaussian random data.
var quantCases = []struct {
	typ       gguf.GGMLType
	file      string
	fixture   float64 // bound on source-f32.gguf blk.0.ffn_down.weight
	gaussian  float64 // bound on N(0,1) data
	reference float64 // the reference quantizer's error on the fixture
}{
	{gguf.TypeF32, "", 0, 0, 0},
	{gguf.TypeF16, "f16", 0.0003, 0.0003, 0.0002},
	{gguf.TypeBF16, "bf16", 0.002, 0.002, 0.0016},
	{gguf.TypeQ8_0, "q8_0", 0.006, 0.006, 0.0053},
	{gguf.TypeQ6_K, "q6_k", 0.020, 0.020, 0.018},
	{gguf.TypeQ5_K, "q5_k", 0.040, 0.040, 0.036},
	{gguf.TypeQ5_1, "q5_1", 0.042, 0.042, 0.038},
	{gguf.TypeQ5_0, "q5_0", 0.047, 0.047, 0.043},
	{gguf.TypeQ4_K, "q4_k", 0.078, 0.078, 0.071},
	{gguf.TypeIQ4_NL, "iq4_nl", 0.083, 0.083, 0.076},
	{gguf.TypeIQ4_XS, "iq4_xs", 0.083, 0.083, 0.076},
	{gguf.TypeQ4_1, "q4_1", 0.086, 0.086, 0.078},
	{gguf.TypeQ4_0, "q4_0", 0.095, 0.095, 0.086},
	{gguf.TypeMXFP4, "", 0.125, 0.125, 0}, // no reference file: measured 0.116
	{gguf.TypeQ3_K, "q3_k", 0.165, 0.165, 0.150},
	{gguf.TypeQ2_K, "q2_k", 0.33, 0.33, 0.296},
}

// TestRoundTripFixture quantizes the fixture's F32 ffn_down weights with
// every format and checks the relative RMS error bound.
func TestRoundTripFixture(t *testing.T) {
	dir := fixtures.Dir(t, "quant")
	srcFile := openGGUF(t, filepath.Join(dir, "source-f32.gguf"))
	const name = "blk.0.ffn_down.weight"
	x := f32Tensor(t, srcFile, name)
	for _, tc := range quantCases {
		t.Run(tc.typ.String(), func(t *testing.T) {
			_, y := roundTrip(t, tc.typ, x)
			e := relRMS(y, x)
			t.Logf("%v: relative RMS error %.5f (reference %.4f, bound %.4f)", tc.typ, e, tc.reference, tc.fixture)
			if e > tc.fixture {
				t.Errorf("relRMS(Dequantize(Quantize(%v, %s))) = %.5f, want <= %.4f", tc.typ, name, e, tc.fixture)
			}
		})
	}
}

// TestQuantizeMatchesReference quantizes every 2-D weight of
// source-f32.gguf and compares the bytes with the reference quantizer's
// output in quant-<type>.gguf (made without an importance matrix).
func TestQuantizeMatchesReference(t *testing.T) {
	dir := fixtures.Dir(t, "quant")
	srcFile := openGGUF(t, filepath.Join(dir, "source-f32.gguf"))
	for _, tc := range quantCases {
		if tc.file == "" {
			continue
		}
		t.Run(tc.typ.String(), func(t *testing.T) {
			ref := openGGUF(t, filepath.Join(dir, "quant-"+tc.file+".gguf"))
			checked := 0
			for i := range ref.Tensors {
				ti := &ref.Tensors[i]
				if ti.Type != tc.typ {
					continue
				}
				want, err := ref.TensorData(ti)
				if err != nil {
					t.Fatal(err)
				}
				x := f32Tensor(t, srcFile, ti.Name)
				got, err := Quantize(tc.typ, x)
				if err != nil {
					t.Fatalf("Quantize(%v, %q) = %v", tc.typ, ti.Name, err)
				}
				if len(got) != len(want) {
					t.Fatalf("Quantize(%v, %q) = %d bytes, want %d", tc.typ, ti.Name, len(got), len(want))
				}
				ts := tc.typ.TypeSize()
				differ, first := 0, -1
				for off := 0; off < len(got); off += ts {
					if !bytes.Equal(got[off:off+ts], want[off:off+ts]) {
						if first < 0 {
							first = off / ts
						}
						differ++
					}
				}
				if differ > 0 {
					b := first * ts
					t.Errorf("Quantize(%v, %q): %d of %d blocks differ from the reference; block %d = % x, want % x",
						tc.typ, ti.Name, differ, len(got)/ts, first, got[b:b+ts], want[b:b+ts])
				}
				checked++
			}
			if checked == 0 {
				t.Fatalf("quant-%s.gguf has no %v tensors", tc.file, tc.typ)
			}
		})
	}
}

// gaussian returns n samples of N(0, 1) from a fixed seed.
func gaussian(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestRoundTripRandom checks the error bound on Gaussian data and exact or
// sensible results on special inputs, for every quantizable format.
func TestRoundTripRandom(t *testing.T) {
	const n = 64 * 256
	x := gaussian(n, 42)
	for _, tc := range quantCases {
		t.Run(tc.typ.String(), func(t *testing.T) {
			if !CanQuantize(tc.typ) || !CanDequantize(tc.typ) {
				t.Fatalf("CanQuantize(%v), CanDequantize(%v) = false, want true", tc.typ, tc.typ)
			}
			_, y := roundTrip(t, tc.typ, x)
			e := relRMS(y, x)
			t.Logf("%v: relative RMS error %.5f on N(0,1) (bound %.4f)", tc.typ, e, tc.gaussian)
			if e > tc.gaussian {
				t.Errorf("relRMS(Dequantize(Quantize(%v, N(0,1)))) = %.5f, want <= %.4f", tc.typ, e, tc.gaussian)
			}

			// Zeros decode to zeros.
			zeros := make([]float32, 512)
			_, y = roundTrip(t, tc.typ, zeros)
			for i, v := range y {
				if v != 0 {
					t.Fatalf("Dequantize(Quantize(%v, zeros))[%d] = %v, want 0", tc.typ, i, v)
				}
			}

			// A block whose values are all exactly representable small
			// integers times a power of two keeps its scale: decoding
			// stays within the format's step.
			steps := make([]float32, 512)
			for i := range steps {
				steps[i] = float32(i%16-8) / 4
			}
			_, y = roundTrip(t, tc.typ, steps)
			if e := relRMS(y, steps); e > tc.gaussian {
				t.Errorf("relRMS(Dequantize(Quantize(%v, ramp))) = %.5f, want <= %.4f", tc.typ, e, tc.gaussian)
			}

			// Scaling the input scales the error with it.
			scaled := make([]float32, len(x))
			for i, v := range x[:len(scaled)] {
				scaled[i] = v * 1e-3
			}
			_, y = roundTrip(t, tc.typ, scaled)
			if e := relRMS(y, scaled); e > tc.gaussian*1.1 {
				t.Errorf("relRMS(Dequantize(Quantize(%v, 1e-3*N(0,1)))) = %.5f, want <= %.4f", tc.typ, e, tc.gaussian*1.1)
			}
		})
	}
}
