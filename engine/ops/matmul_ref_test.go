package ops

import (
	"math"
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

func TestMatMulRef(t *testing.T) {
	// W = [[1 2 3 4] [-1 0 0.5 2]], x columns [1 1 1 1] and [0 1 0 -2].
	w := make([]byte, 0, 32)
	for _, v := range []float32{1, 2, 3, 4, -1, 0, 0.5, 2} {
		w = append(w, byte(math.Float32bits(v)), byte(math.Float32bits(v)>>8), byte(math.Float32bits(v)>>16), byte(math.Float32bits(v)>>24))
	}
	x := []float32{1, 1, 1, 1, 0, 1, 0, -2}
	y := make([]float32, 4)
	if err := MatMulRef(gguf.TypeF32, w, 2, 4, x, 2, y); err != nil {
		t.Fatal(err)
	}
	want := []float32{10, 1.5, 2 - 8, -4}
	for i := range want {
		if y[i] != want[i] {
			t.Errorf("MatMulRef(F32 2x4, 2 columns) y[%d] = %g, want %g", i, y[i], want[i])
		}
	}
	ids := []int32{1, -1, 0}
	dst := make([]float32, 12)
	if err := GetRowsRef(gguf.TypeF32, w, 2, 4, ids, dst); err != nil {
		t.Fatal(err)
	}
	wantRows := []float32{-1, 0, 0.5, 2, 0, 0, 0, 0, 1, 2, 3, 4}
	for i := range wantRows {
		if dst[i] != wantRows[i] {
			t.Errorf("GetRowsRef(F32, ids %v)[%d] = %g, want %g", ids, i, dst[i], wantRows[i])
		}
	}
	errCases := []struct {
		name string
		err  error
	}{
		{"short weight", MatMulRef(gguf.TypeF32, w[:31], 2, 4, x, 2, y)},
		{"short x", MatMulRef(gguf.TypeF32, w, 2, 4, x[:7], 2, y)},
		{"short y", MatMulRef(gguf.TypeF32, w, 2, 4, x, 2, y[:3])},
		{"partial block", MatMulRef(gguf.TypeQ4_0, w, 1, 16, x, 1, y)},
		{"unsupported type", MatMulRef(gguf.TypeIQ2_XXS, make([]byte, 66), 1, 256, make([]float32, 256), 1, y)},
		{"short dst", GetRowsRef(gguf.TypeF32, w, 2, 4, ids, dst[:11])},
	}
	for _, c := range errCases {
		if c.err == nil {
			t.Errorf("%s: succeeded, want an error", c.name)
		}
	}
}

// TestDequantizeRowKnownBlocks decodes hand-built blocks whose values
// follow from the block layouts in ggml-common.h.
func TestDequantizeRowKnownBlocks(t *testing.T) {
	var half05, half025, half2 uint16 = 0x3800, 0x3400, 0x4000 // 0.5, 0.25, 2
	q4 := func(d uint16, extra []byte) []byte {
		b := append([]byte{byte(d), byte(d >> 8)}, extra...)
		for j := 0; j < 16; j++ {
			b = append(b, byte(j)|byte(15-j)<<4)
		}
		return b
	}
	nib := func(j int) float32 { // element j of the q4 pattern: j, then 15-(j-16)
		if j < 16 {
			return float32(j)
		}
		return float32(15 - (j - 16))
	}
	q8 := []byte{byte(half025), byte(half025 >> 8)}
	for j := 0; j < 32; j++ {
		q8 = append(q8, byte(int8(j-16)))
	}
	q5 := append([]byte{byte(half05), byte(half05 >> 8)}, 0x00, 0x00, 0xFF, 0xFF) // high bit set for elements 16..31
	for j := 0; j < 16; j++ {
		q5 = append(q5, byte(j)|byte(15-j)<<4)
	}
	// MXFP4: exponent 129 is a scale of 4, halved to 2 for the doubled
	// E2M1 book.
	mx := q4(0, nil)[1:]
	mx[0] = 129
	tests := []struct {
		typ   gguf.GGMLType
		block []byte
		want  func(j int) float32
	}{
		{gguf.TypeMXFP4, mx, func(j int) float32 { return 2 * dqMXFP4[int(nib(j))] }},
		{gguf.TypeQ4_0, q4(half05, nil), func(j int) float32 { return 0.5 * (nib(j) - 8) }},
		{gguf.TypeQ4_1, q4(half05, []byte{byte(half2), byte(half2 >> 8)}), func(j int) float32 { return 0.5*nib(j) + 2 }},
		{gguf.TypeIQ4_NL, q4(half2, nil), func(j int) float32 { return 2 * dqIQ4NL[int(nib(j))] }},
		{gguf.TypeQ8_0, q8, func(j int) float32 { return 0.25 * float32(j-16) }},
		{gguf.TypeQ5_0, q5, func(j int) float32 {
			if j < 16 {
				return 0.5 * (nib(j) - 16)
			}
			return 0.5 * (nib(j) + 16 - 16)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			if len(tt.block) != tt.typ.TypeSize() {
				t.Fatalf("BUG: %d-byte block, want %d", len(tt.block), tt.typ.TypeSize())
			}
			got := make([]float32, 32)
			if err := dequantizeRow(tt.typ, tt.block, got); err != nil {
				t.Fatal(err)
			}
			for j, g := range got {
				if w := tt.want(j); g != w {
					t.Errorf("dequantizeRow(%v)[%d] = %g, want %g", tt.typ, j, g, w)
				}
			}
		})
	}
}

// TestHalfToFloat checks every f16 bit pattern against the definition
// (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
func TestHalfToFloat(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		s, e, m := h>>15, (h>>10)&31, h&1023
		got := dqHalfToFloat(uint16(h))
		var want float64
		switch {
		case e == 31 && m == 0:
			want = math.Inf(1)
		case e == 31:
			if !math.IsNaN(float64(got)) {
				t.Fatalf("dqHalfToFloat(%#04x) = %g, want NaN", h, got)
			}
			continue
		case e == 0:
			want = math.Ldexp(float64(m)/1024, -14)
		default:
			want = math.Ldexp(1+float64(m)/1024, e-15)
		}
		if s == 1 {
			want = -want
		}
		if float64(got) != want {
			t.Fatalf("dqHalfToFloat(%#04x) = %g, want %g", h, got, want)
		}
	}
}
