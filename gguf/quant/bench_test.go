package quant

import (
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

// BenchmarkDequantize reports throughput in MB/s of decoded float32 output
// (4 bytes per element) for a 1 Mi-element tensor; the encoded input is
// smaller by the format's compression ratio.
func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	x := gaussian(n, 1)
	for _, typ := range dequantTypes {
		b.Run(typ.String(), func(b *testing.B) {
			q, err := Quantize(typ, x)
			if err != nil {
				b.Fatal(err)
			}
			y := make([]float32, n)
			b.SetBytes(4 * n)
			b.ResetTimer()
			for b.Loop() {
				if err := Dequantize(typ, q, y); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize reports throughput in MB/s of float32 input.
func BenchmarkQuantize(b *testing.B) {
	const n = 1 << 16
	x := gaussian(n, 1)
	for _, typ := range []gguf.GGMLType{gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeIQ4_XS} {
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if _, err := Quantize(typ, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
