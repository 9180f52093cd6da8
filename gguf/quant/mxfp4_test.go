package quant

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
)

// e2m1 is the OCP MX specification's FP4 (E2M1) value of each 4-bit code:
// sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0, with exponent 0
// subnormal (0 and 0.5).
var e2m1 = [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}

// mxfp4Block returns a block of exponent e whose element j (j < 16) has
// code j and element j+16 code 15-j, so that every code sits in both the
// low and the high nibble.
func mxfp4Block(e byte) []byte {
	b := make([]byte, 17)
	b[0] = e
	for j := 0; j < 16; j++ {
		b[1+j] = byte(j) | byte(15-j)<<4
	}
	return b
}

// TestDequantizeMXFP4Known decodes hand-built blocks at the ends of the
// exponent range and in its middle, element by element against values
// written out from the specification.
func TestDequantizeMXFP4Known(t *testing.T) {
	inf := float32(math.Inf(1))
	tests := []struct {
		e    byte
		want [16]float32 // codes 0..15
	}{
		// 2^(127-127) = 1: the E2M1 values themselves.
		{127, [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}},
		// 2^-127: 0.5 is 2^-128 (the bits 0x00200000), 6 is 3*2^-126;
		// everything here is subnormal.
		{0, [16]float32{0, 0x1p-128, 0x1p-127, 0x1.8p-127, 0x1p-126, 0x1.8p-126, 0x1p-125, 0x1.8p-125,
			0, -0x1p-128, -0x1p-127, -0x1.8p-127, -0x1p-126, -0x1.8p-126, -0x1p-125, -0x1.8p-125}},
		{1, [16]float32{0, 0x1p-127, 0x1p-126, 0x1.8p-126, 0x1p-125, 0x1.8p-125, 0x1p-124, 0x1.8p-124,
			0, -0x1p-127, -0x1p-126, -0x1.8p-126, -0x1p-125, -0x1.8p-125, -0x1p-124, -0x1.8p-124}},
		// 2^127: 2*2^127 and more overflow float32.
		{254, [16]float32{0, 0x1p126, 0x1p127, 0x1.8p127, inf, inf, inf, inf,
			0, -0x1p126, -0x1p127, -0x1.8p127, -inf, -inf, -inf, -inf}},
		// 2^128 (NaN in the specification; ggml scales by it like any
		// other exponent): only 0.5 stays finite.
		{255, [16]float32{0, 0x1p127, inf, inf, inf, inf, inf, inf, 0, -0x1p127, -inf, -inf, -inf, -inf, -inf, -inf}},
		{120, [16]float32{0, 0x1p-8, 0x1p-7, 0x1.8p-7, 0x1p-6, 0x1.8p-6, 0x1p-5, 0x1.8p-5,
			0, -0x1p-8, -0x1p-7, -0x1.8p-7, -0x1p-6, -0x1.8p-6, -0x1p-5, -0x1.8p-5}},
	}
	for _, tt := range tests {
		blk := mxfp4Block(tt.e)
		got := make([]float32, 32)
		if err := Dequantize(gguf.TypeMXFP4, blk, got); err != nil {
			t.Fatalf("Dequantize(MXFP4, e=%d) = %v", tt.e, err)
		}
		for j := 0; j < 16; j++ {
			for _, el := range []struct{ i, code int }{{j, j}, {j + 16, 15 - j}} {
				want := tt.want[el.code]
				// Code 8, the specification's -0, decodes to +0 as in ggml
				// (the doubled code book holds it as the integer 0).
				if math.Float32bits(got[el.i]) != math.Float32bits(want) {
					t.Errorf("Dequantize(MXFP4, e=%d)[%d] (code %d) = %g (%#08x), want %g (%#08x)",
						tt.e, el.i, el.code, got[el.i], math.Float32bits(got[el.i]), want, math.Float32bits(want))
				}
			}
		}
	}
}

// TestQuantizeMXFP4Known checks the reference quantizer's choices on
// hand-computed blocks: the exponent floor(log2(amax)) - 2 + 127, each
// element's nearest code with ties to the lower code, and zeros as code 0.
func TestQuantizeMXFP4Known(t *testing.T) {
	t.Run("representable", func(t *testing.T) {
		// The block of TestDequantizeMXFP4Known at e = 127 re-encodes to
		// itself, but for its -0 (code 8), which becomes code 0.
		x := make([]float32, 32)
		for j := 0; j < 16; j++ {
			x[j] = float32(e2m1[j])
			x[j+16] = float32(e2m1[15-j])
		}
		want := mxfp4Block(127)
		want[1+8] &^= 0x0f
		want[1+7] &^= 0xf0
		got, err := Quantize(gguf.TypeMXFP4, x)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Quantize(MXFP4, E2M1 values) = % x, want % x", got, want)
		}
	})
	t.Run("rounding", func(t *testing.T) {
		// amax 1: e = 0 - 2 + 127 = 125, half scale 2^-3, so x/0.125 is
		// rounded to the nearest of the doubled book 0,1,2,3,4,6,8,12.
		x := make([]float32, 32)
		x[0] = 1         // 8: code 6
		x[1] = 0.3       // 2.4: code 2
		x[2] = 0.3125    // 2.5, a tie of 2 and 3: code 2
		x[3] = -0.3125   // -2.5, a tie of -2 and -3: code 10
		x[4] = -0.01     // -0.08: zero, code 0 (not 8)
		x[5] = 0.9       // 7.2: 8 is nearer than 6: code 6
		x[6] = 0.875     // 7, a tie of 6 and 8: code 5
		x[16] = -1       // code 14
		x[17] = 0.0625   // 0.5, a tie of 0 and 1: code 0
		x[18] = -0.0625  // code 0
		x[19] = 0.1875   // 1.5, a tie of 1 and 2: code 1
		x[20] = -0.75    // -6: code 13
		x[31] = -0.68750 // -5.5, nearer -6: code 13
		want := []byte{125, 6 | 14<<4, 2 | 0<<4, 2 | 0<<4, 10 | 1<<4, 0 | 13<<4, 6, 5, 0, 0, 0, 0, 0, 0, 0, 0, 13 << 4}
		got, err := Quantize(gguf.TypeMXFP4, x)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Quantize(MXFP4, rounding block) = % x, want % x", got, want)
		}
	})
	exps := []struct {
		name string
		amax float32
		want byte
	}{
		{"zeros", 0, 0},
		{"one", 1, 125},
		{"six", 6, 127},
		{"hundred", 100, 131},
		// log2f(16*(1 - 2^-24)) rounds to 4 in float32 before the floor, so
		// the exponent is that of 16, not of 8.
		{"just below 16", math.Float32frombits(0x417fffff), 129},
		{"just above 16", math.Float32frombits(0x41800001), 129},
		// -126 - 2 + 127 = -1 wraps to 255 through the reference's
		// float-to-integer conversion on x86.
		{"2^-126", 0x1p-126, 255},
		// log2f of the largest float32 rounds up to 128.
		{"largest float32", math.MaxFloat32, 253},
	}
	for _, tt := range exps {
		t.Run("exponent "+tt.name, func(t *testing.T) {
			x := make([]float32, 32)
			x[9] = -tt.amax
			got, err := Quantize(gguf.TypeMXFP4, x)
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != tt.want {
				t.Errorf("Quantize(MXFP4, amax %g) exponent = %d, want %d", tt.amax, got[0], tt.want)
			}
		})
	}
}

// TestMXFP4Fixture checks the MXFP4 expert tensors that llama-quantize
// wrote into the gpt-oss fixture: every block decodes to finite values
// whose largest magnitude is 4 or 6 times 2^(e-127) (the exponent the
// reference quantizer derives from the block's maximum), no block uses code
// 8 (the quantizer maps zero to code 0), and quantizing the decoded values
// again reproduces every block byte for byte.
func TestMXFP4Fixture(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t, "archs-next"), "moe", "gpt-oss-gpt2-192x4-mxfp4.gguf")
	f := openGGUF(t, path)
	checked := 0
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Type != gguf.TypeMXFP4 {
			continue
		}
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		n := int(ti.NumElements())
		y := make([]float32, n)
		if err := Dequantize(gguf.TypeMXFP4, data, y); err != nil {
			t.Fatalf("Dequantize(MXFP4, %q) = %v", ti.Name, err)
		}
		for b := 0; b < n/32; b++ {
			blk := data[17*b : 17*b+17]
			scale := math.Ldexp(1, int(blk[0])-127)
			var amax float64
			for j, v := range y[32*b : 32*b+32] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s block %d element %d = %v, want finite", ti.Name, b, j, v)
				}
				amax = max(amax, math.Abs(float64(v)))
			}
			if amax != 4*scale && amax != 6*scale {
				t.Fatalf("%s block %d (% x): largest magnitude %g, want 4 or 6 times 2^(%d-127)", ti.Name, b, blk, amax, blk[0])
			}
			for _, q := range blk[1:] {
				if q&0xf == 8 || q>>4 == 8 {
					t.Fatalf("%s block %d (% x) uses code 8", ti.Name, b, blk)
				}
			}
		}
		got, err := Quantize(gguf.TypeMXFP4, y)
		if err != nil {
			t.Fatal(err)
		}
		for b := 0; b < n/32; b++ {
			if !bytes.Equal(got[17*b:17*b+17], data[17*b:17*b+17]) {
				t.Fatalf("Quantize(Dequantize(%s)) block %d = % x, want % x", ti.Name, b, got[17*b:17*b+17], data[17*b:17*b+17])
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("%s has no MXFP4 tensors", path)
	}
	t.Logf("%d MXFP4 tensors decode sanely and re-encode to their own bytes", checked)
}
