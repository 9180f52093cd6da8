package quant

import (
	"math"
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

// TestFP16RoundTripAll checks every binary16 value survives a round trip
// through float32 (NaNs come back quiet with the same sign and payload top).
func TestFP16RoundTripAll(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := FP16ToFP32(h)
		want := h
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want = h | 0x200
		}
		if got := FP32ToFP16(f); got != want {
			t.Fatalf("FP32ToFP16(FP16ToFP32(%#04x) = %v) = %#04x, want %#04x", h, f, got, want)
		}
	}
}

// TestFP16Values checks conversions against values computed independently
// with float64 arithmetic.
func TestFP16Values(t *testing.T) {
	tests := []struct {
		h uint16
		f float64
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x7bff, 65504},
		{0x0001, math.Ldexp(1, -24)},
		{0x03ff, math.Ldexp(1023, -24)},
		{0x0400, math.Ldexp(1, -14)},
		{0x3555, 0.333251953125},
		{0x7c00, math.Inf(1)},
		{0xfc00, math.Inf(-1)},
	}
	for _, tt := range tests {
		if got := FP16ToFP32(tt.h); float64(got) != tt.f {
			t.Errorf("FP16ToFP32(%#04x) = %v, want %v", tt.h, got, tt.f)
		}
	}
	if got := FP16ToFP32(0x8000); math.Float32bits(got) != 0x80000000 {
		t.Errorf("FP16ToFP32(0x8000) = %v, want -0", got)
	}
	if got := FP16ToFP32(0x7e00); !math.IsNaN(float64(got)) {
		t.Errorf("FP16ToFP32(0x7e00) = %v, want NaN", got)
	}
}

// TestFP32ToFP16Rounding checks round-to-nearest-even at halfway points,
// overflow and underflow.
func TestFP32ToFP16Rounding(t *testing.T) {
	tests := []struct {
		name string
		f    float64
		want uint16
	}{
		{"tie to even down", 1 + math.Ldexp(1, -11), 0x3c00},
		{"tie to even up", 1 + 3*math.Ldexp(1, -11), 0x3c02},
		{"above tie", 1 + math.Ldexp(1, -11) + math.Ldexp(1, -20), 0x3c01},
		{"largest finite", 65519, 0x7bff},
		{"overflow tie", 65520, 0x7c00},
		{"huge", 1e10, 0x7c00},
		{"negative huge", -1e10, 0xfc00},
		{"half min subnormal", math.Ldexp(1, -25), 0x0000},
		{"above half min subnormal", math.Ldexp(1.0001, -25), 0x0001},
		{"subnormal tie to even", math.Ldexp(3, -25), 0x0002},
		{"round up to normal", math.Ldexp(2047, -25), 0x0400},
		{"tiny", 1e-30, 0x0000},
		{"negative tiny", -1e-30, 0x8000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FP32ToFP16(float32(tt.f)); got != tt.want {
				t.Errorf("FP32ToFP16(%v) = %#04x, want %#04x", tt.f, got, tt.want)
			}
		})
	}
}

// TestBF16 checks bfloat16 conversions, including ggml's rounding and NaN
// handling.
func TestBF16(t *testing.T) {
	tests := []struct {
		name string
		in   uint32
		want uint16
	}{
		{"one", 0x3f800000, 0x3f80},
		{"tie to even down", 0x3f808000, 0x3f80},
		{"tie to even up", 0x3f818000, 0x3f82},
		{"above tie", 0x3f808001, 0x3f81},
		{"max rounds to inf", 0x7f7fffff, 0x7f80},
		{"inf", 0x7f800000, 0x7f80},
		{"signalling NaN quieted", 0x7f800001, 0x7fc0},
		{"negative NaN", 0xff810000, 0xffc1},
		{"subnormal kept", 0x00010000, 0x0001},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FP32ToBF16(math.Float32frombits(tt.in)); got != tt.want {
				t.Errorf("FP32ToBF16(%#08x) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		if got := math.Float32bits(BF16ToFP32(h)); got != uint32(h)<<16 {
			t.Fatalf("BF16ToFP32(%#04x) = %#08x, want %#08x", h, got, uint32(h)<<16)
		}
	}
}

// TestFP16ToFP32AllValues checks FP16ToFP32 and Dequantize(F16) on every
// binary16 value against the definition of the format.
func TestFP16ToFP32AllValues(t *testing.T) {
	src := make([]byte, 2<<16)
	for i := 0; i < 1<<16; i++ {
		src[2*i], src[2*i+1] = byte(i), byte(i>>8)
	}
	dq := make([]float32, 1<<16)
	if err := Dequantize(gguf.TypeF16, src, dq); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		exp, mant := int(h>>10&0x1f), h&0x3ff
		var want uint32
		switch {
		case exp == 0x1f:
			want = 0x7f800000 | uint32(mant)<<13
		case exp == 0:
			want = math.Float32bits(float32(math.Ldexp(float64(mant), -24)))
		default:
			want = math.Float32bits(float32(math.Ldexp(float64(1024+int(mant)), exp-25)))
		}
		want |= uint32(h&0x8000) << 16
		if got := math.Float32bits(FP16ToFP32(h)); got != want {
			t.Fatalf("FP16ToFP32(%#04x) = %#08x, want %#08x", h, got, want)
		}
		if got := math.Float32bits(dq[i]); got != want {
			t.Fatalf("Dequantize(F16, %#04x) = %#08x, want %#08x", h, got, want)
		}
	}
}
