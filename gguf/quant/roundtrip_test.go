package quant

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/gguf"
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
	{gguf.TypeQ3_K, "q3_k", 0.165, 0.165, 0.150},
	{gguf.TypeQ2_K, "q2_k", 0.33, 0.33, 0.296},
}

// TestRoundTripFixture quantizes the fixture's F32 ffn_down weights with
// every format, checks the error bound, and reports how many blocks come
// out byte-identical to the reference quantizer's output.
func TestRoundTripFixture(t *testing.T) {
	dir := fixturesDir(t)
	srcFile := openGGUF(t, filepath.Join(dir, "source-f32.gguf"))
	const name = "blk.0.ffn_down.weight"
	x := f32Tensor(t, srcFile, name)
	for _, tc := range quantCases {
		t.Run(tc.typ.String(), func(t *testing.T) {
			q, y := roundTrip(t, tc.typ, x)
			e := relRMS(y, x)
			t.Logf("%v: relative RMS error %.5f (reference %.4f, bound %.4f)", tc.typ, e, tc.reference, tc.fixture)
			if e > tc.fixture {
				t.Errorf("relRMS(Dequantize(Quantize(%v, %s))) = %.5f, want <= %.4f", tc.typ, name, e, tc.fixture)
			}
			if tc.file == "" {
				return
			}
			ref := openGGUF(t, filepath.Join(dir, "quant-"+tc.file+".gguf"))
			_, want := tensorBytes(t, ref, name)
			if len(want) != len(q) {
				t.Fatalf("Quantize(%v, %s) = %d bytes, reference has %d", tc.typ, name, len(q), len(want))
			}
			ts := tc.typ.TypeSize()
			same := 0
			for i := 0; i < len(q); i += ts {
				if bytes.Equal(q[i:i+ts], want[i:i+ts]) {
					same++
				}
			}
			t.Logf("%v: %d of %d blocks byte-identical to the reference quantizer", tc.typ, same, len(q)/ts)
		})
	}
}
