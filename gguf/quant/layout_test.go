package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

// This file checks Dequantize against per-element formulas written from the
// block layouts in ggml-common.h, independently of the block loops in
// blocks.go: element i of a block is located and scaled by its own index
// arithmetic in float64. The f16 scales are drawn with short mantissas so
// that every float32 product and difference in the reference order is
// exact, which makes float64 a bit-exact oracle.

// nibble returns the low (hi == false) or high nibble of b.
func nibble(b byte, hi bool) int {
	if hi {
		return int(b >> 4)
	}
	return int(b & 0xf)
}

// layoutCase describes one format: where its f16 fields are and the value
// of element i of a block.
type layoutCase struct {
	typ     gguf.GGMLType
	halfs   []int // byte offsets of f16 fields
	element func(b []byte, i int) float64
}

func f16f(b []byte, off int) float64 { return float64(FP16ToFP32(binary.LittleEndian.Uint16(b[off:]))) }

// kScale returns the 6-bit scale (m == false) or min of sub-block j in the
// 12 packed bytes p of Q4_K/Q5_K: j < 4 uses the low 6 bits of bytes j and
// j+4; j >= 4 takes the nibbles of byte j+4 and the top two bits of bytes
// j-4 (scale) and j (min).
func kScale(p []byte, j int, m bool) int {
	if j < 4 {
		if m {
			return int(p[j+4] & 63)
		}
		return int(p[j] & 63)
	}
	if m {
		return int(p[j+4]>>4) | int(p[j]>>6)<<4
	}
	return int(p[j+4]&0xf) | int(p[j-4]>>6)<<4
}

var layoutCases = []layoutCase{
	{gguf.TypeQ4_0, []int{0}, func(b []byte, i int) float64 {
		return f16f(b, 0) * float64(nibble(b[2+i%16], i >= 16)-8)
	}},
	{gguf.TypeQ4_1, []int{0, 2}, func(b []byte, i int) float64 {
		return f16f(b, 0)*float64(nibble(b[4+i%16], i >= 16)) + f16f(b, 2)
	}},
	{gguf.TypeQ5_0, []int{0}, func(b []byte, i int) float64 {
		h := int(binary.LittleEndian.Uint32(b[2:])>>i) & 1
		return f16f(b, 0) * float64(nibble(b[6+i%16], i >= 16)|h<<4-16)
	}},
	{gguf.TypeQ5_1, []int{0, 2}, func(b []byte, i int) float64 {
		h := int(binary.LittleEndian.Uint32(b[4:])>>i) & 1
		return f16f(b, 0)*float64(nibble(b[8+i%16], i >= 16)|h<<4) + f16f(b, 2)
	}},
	{gguf.TypeQ8_0, []int{0}, func(b []byte, i int) float64 {
		return f16f(b, 0) * float64(int8(b[2+i]))
	}},
	{gguf.TypeIQ4_NL, []int{0}, func(b []byte, i int) float64 {
		return f16f(b, 0) * float64(kvaluesIQ4NL[nibble(b[2+i%16], i >= 16)])
	}},
	// MXFP4 has no f16 field: every exponent byte, 0 (subnormal scales)
	// and 255 (scales of 2^127, whose large codes overflow to infinity)
	// among them, is exact in float64 and rounds to float32 as the
	// reference's one multiply does.
	{gguf.TypeMXFP4, nil, func(b []byte, i int) float64 {
		return e2m1[nibble(b[1+i%16], i >= 16)] * math.Ldexp(1, int(b[0])-127)
	}},
	{gguf.TypeQ2_K, []int{80, 82}, func(b []byte, i int) float64 {
		h, r := i/128, i%128
		q := int(b[16+32*h+r%32]>>(2*(r/32))) & 3
		sc := b[i/16]
		return f16f(b, 80)*float64(sc&0xf)*float64(q) - f16f(b, 82)*float64(sc>>4)
	}},
	{gguf.TypeQ3_K, []int{108}, func(b []byte, i int) float64 {
		h, r := i/128, i%128
		q := int(b[32+32*h+r%32]>>(2*(r/32))) & 3
		if b[i%32]>>(i/32)&1 == 0 {
			q -= 4
		}
		s := i / 16
		sc := nibble(b[96+s%8], s >= 8) | int(b[96+8+s%4]>>(2*(s/4))&3)<<4
		return f16f(b, 108) * float64(sc-32) * float64(q)
	}},
	{gguf.TypeQ4_K, []int{0, 2}, func(b []byte, i int) float64 {
		c, r := i/64, i%64
		q := nibble(b[16+32*c+r%32], r >= 32)
		j := i / 32
		return f16f(b, 0)*float64(kScale(b[4:16], j, false))*float64(q) - f16f(b, 2)*float64(kScale(b[4:16], j, true))
	}},
	{gguf.TypeQ5_K, []int{0, 2}, func(b []byte, i int) float64 {
		c, r := i/64, i%64
		q := nibble(b[48+32*c+r%32], r >= 32) | int(b[16+r%32]>>(i/32)&1)<<4
		j := i / 32
		return f16f(b, 0)*float64(kScale(b[4:16], j, false))*float64(q) - f16f(b, 2)*float64(kScale(b[4:16], j, true))
	}},
	{gguf.TypeQ6_K, []int{208}, func(b []byte, i int) float64 {
		h, r := i/128, i%128
		g, l := r/32, r%32
		lo := nibble(b[64*h+l+32*(g%2)], g >= 2)
		hi := int(b[128+32*h+l]>>(2*g)) & 3
		return f16f(b, 208) * float64(int8(b[192+i/16])) * float64(lo|hi<<4-32)
	}},
	{gguf.TypeIQ4_XS, []int{0}, func(b []byte, i int) float64 {
		ib, l := i/32, i%32
		ls := nibble(b[4+ib/2], ib%2 == 1) | int(binary.LittleEndian.Uint16(b[2:])>>(2*ib)&3)<<4
		return f16f(b, 0) * float64(ls-32) * float64(kvaluesIQ4NL[nibble(b[8+16*ib+l%16], l >= 16)])
	}},
}

// shortHalf returns a random binary16 value in ±[2^-5, 2^4) with only three
// mantissa bits.
func shortHalf(r *rand.Rand) uint16 {
	sign := uint16(r.IntN(2)) << 15
	exp := uint16(10 + r.IntN(9))
	mant := uint16(r.IntN(8)) << 7
	return sign | exp<<10 | mant
}

func TestDequantizeLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range layoutCases {
		t.Run(tc.typ.String(), func(t *testing.T) {
			bs, ts := tc.typ.BlockSize(), tc.typ.TypeSize()
			const nblocks = 16
			src := make([]byte, nblocks*ts)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			for blk := 0; blk < nblocks; blk++ {
				for _, off := range tc.halfs {
					binary.LittleEndian.PutUint16(src[blk*ts+off:], shortHalf(r))
				}
			}
			got := make([]float32, nblocks*bs)
			if err := Dequantize(tc.typ, src, got); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				blk := src[i/bs*ts : (i/bs+1)*ts]
				want := float32(tc.element(blk, i%bs))
				if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] == 0 && want == 0) {
					t.Fatalf("Dequantize(%v)[%d] = %v, want %v (block % x)", tc.typ, i, got[i], want, blk)
				}
			}
		})
	}
}
