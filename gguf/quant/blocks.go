package quant

import (
	"encoding/binary"

	"github.com/vkllm/vkllm/gguf"
)

// Block layouts, as in ggml-common.h (all little-endian, f16 scales):
//
//	Q4_0   d, qs[16]                       32 elements, 18 bytes
//	Q4_1   d, m, qs[16]                    32 elements, 20 bytes
//	Q5_0   d, qh[4], qs[16]                32 elements, 22 bytes
//	Q5_1   d, m, qh[4], qs[16]             32 elements, 24 bytes
//	Q8_0   d, qs[32] (int8)                32 elements, 34 bytes
//	IQ4_NL d, qs[16]                       32 elements, 18 bytes
//	Q2_K   scales[16], qs[64], d, dmin     256 elements, 84 bytes
//	Q3_K   hmask[32], qs[64], scales[12], d 256 elements, 110 bytes
//	Q4_K   d, dmin, scales[12], qs[128]    256 elements, 144 bytes
//	Q5_K   d, dmin, scales[12], qh[32], qs[128] 256 elements, 176 bytes
//	Q6_K   ql[128], qh[64], scales[16] (int8), d 256 elements, 210 bytes
//	IQ4_XS d, scales_h (u16), scales_l[4], qs[128] 256 elements, 136 bytes
//	MXFP4  e (E8M0 byte), qs[16]           32 elements, 17 bytes (mxfp4.go)
//
// The 32-element formats store element j in the low nibble of qs[j] and
// element j+16 in the high nibble.

// kvaluesIQ4NL is the non-linear 4-bit code book of IQ4_NL and IQ4_XS
// (ggml's kvalues_iq4nl).
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// codecForQuant returns the codec of a block-quantized type.
func codecForQuant(t gguf.GGMLType) codec {
	switch t {
	case gguf.TypeQ4_0:
		return codec{dequantQ4_0, quantQ4_0}
	case gguf.TypeQ4_1:
		return codec{dequantQ4_1, quantQ4_1}
	case gguf.TypeQ5_0:
		return codec{dequantQ5_0, quantQ5_0}
	case gguf.TypeQ5_1:
		return codec{dequantQ5_1, quantQ5_1}
	case gguf.TypeQ8_0:
		return codec{dequantQ8_0, quantQ8_0}
	case gguf.TypeQ2_K:
		return codec{dequantQ2_K, quantQ2_K}
	case gguf.TypeQ3_K:
		return codec{dequantQ3_K, quantQ3_K}
	case gguf.TypeQ4_K:
		return codec{dequantQ4_K, quantQ4_K}
	case gguf.TypeQ5_K:
		return codec{dequantQ5_K, quantQ5_K}
	case gguf.TypeQ6_K:
		return codec{dequantQ6_K, quantQ6_K}
	case gguf.TypeIQ4_NL:
		return codec{dequantIQ4_NL, quantIQ4_NL}
	case gguf.TypeIQ4_XS:
		return codec{dequantIQ4_XS, quantIQ4_XS}
	case gguf.TypeMXFP4:
		return codec{dequantMXFP4, quantMXFP4}
	}
	return codec{}
}

// f16At reads the little-endian binary16 at b[0:2] as float32.
func f16At(b []byte) float32 { return FP16ToFP32(binary.LittleEndian.Uint16(b)) }

func dequantQ4_0(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b := src[:18:18]
		y := dst[:32:32]
		d := f16At(b)
		qs := b[2:18]
		for j := 0; j < 16; j++ {
			y[j] = float32(int(qs[j]&0xf)-8) * d
			y[j+16] = float32(int(qs[j]>>4)-8) * d
		}
		src, dst = src[18:], dst[32:]
	}
}

func dequantQ4_1(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b := src[:20:20]
		y := dst[:32:32]
		d, m := f16At(b), f16At(b[2:])
		qs := b[4:20]
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(qs[j]&0xf)*d) + m
			y[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
		src, dst = src[20:], dst[32:]
	}
}

func dequantQ5_0(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b := src[:22:22]
		y := dst[:32:32]
		d := f16At(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:22]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(int(qs[j]&0xf|h0)-16) * d
			y[j+16] = float32(int(qs[j]>>4|h1)-16) * d
		}
		src, dst = src[22:], dst[32:]
	}
}

func dequantQ5_1(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b := src[:24:24]
		y := dst[:32:32]
		d, m := f16At(b), f16At(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:24]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(float32(qs[j]&0xf|h0)*d) + m
			y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
		}
		src, dst = src[24:], dst[32:]
	}
}

func dequantQ8_0(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b := src[:34:34]
		y := dst[:32:32]
		d := f16At(b)
		qs := b[2:34]
		for j := range y {
			y[j] = float32(int8(qs[j])) * d
		}
		src, dst = src[34:], dst[32:]
	}
}

func dequantIQ4_NL(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b := src[:18:18]
		y := dst[:32:32]
		d := f16At(b)
		qs := b[2:18]
		for j := 0; j < 16; j++ {
			y[j] = d * float32(kvaluesIQ4NL[qs[j]&0xf])
			y[j+16] = d * float32(kvaluesIQ4NL[qs[j]>>4])
		}
		src, dst = src[18:], dst[32:]
	}
}

func dequantQ2_K(src []byte, dst []float32) {
	var dl, ml [16]float32
	for len(dst) >= 256 {
		b := src[:84:84]
		y := dst[:256:256]
		d, dmin := f16At(b[80:]), f16At(b[82:])
		for j, sc := range b[0:16] {
			dl[j] = float32(d * float32(sc&0xf))
			ml[j] = float32(dmin * float32(sc>>4))
		}
		// Element 128n + 32g + l is bits 2g..2g+1 of qs[32n+l]; each 16
		// elements have their own scale and min.
		for n := 0; n < 2; n++ {
			q := b[16+32*n : 16+32*n+32]
			out := y[128*n : 128*n+128]
			for l, qb := range q {
				s := 8*n + l/16
				out[l] = float32(dl[s]*float32(qb&3)) - ml[s]
				out[l+32] = float32(dl[s+2]*float32(qb>>2&3)) - ml[s+2]
				out[l+64] = float32(dl[s+4]*float32(qb>>4&3)) - ml[s+4]
				out[l+96] = float32(dl[s+6]*float32(qb>>6)) - ml[s+6]
			}
		}
		src, dst = src[84:], dst[256:]
	}
}

// unpackQ3KScales unpacks the twelve bytes of Q3_K's sixteen 6-bit scales:
// bytes 0-7 hold the low nibbles (scales 0-7 low, 8-15 high half), bytes
// 8-11 the high two bits (scale j at byte 8+j%4, bit 2*(j/4)).
func unpackQ3KScales(p []byte, sc *[16]int8) {
	for j := 0; j < 16; j++ {
		low := p[j%8] >> (4 * uint(j/8)) & 0xf
		high := p[8+j%4] >> (2 * uint(j/4)) & 3
		sc[j] = int8(low|high<<4) - 32
	}
}

func dequantQ3_K(src []byte, dst []float32) {
	var sc [16]int8
	var dl [16]float32
	for len(dst) >= 256 {
		b := src[:110:110]
		y := dst[:256:256]
		hmask := b[0:32:32]
		d := f16At(b[108:])
		unpackQ3KScales(b[96:108], &sc)
		for j, s := range sc {
			dl[j] = d * float32(s)
		}
		// Element 128n + 32g + l is bits 2g..2g+1 of qs[32n+l] minus 4
		// unless bit 4n+g of hmask[l] is set.
		for n := 0; n < 2; n++ {
			q := b[32+32*n : 32+32*n+32]
			out := y[128*n : 128*n+128]
			hs := uint(4 * n)
			for l, qb := range q {
				h := hmask[l] >> hs
				s := 8*n + l/16
				out[l] = dl[s] * float32(int(qb&3)-4+int(h&1)<<2)
				out[l+32] = dl[s+2] * float32(int(qb>>2&3)-4+int(h>>1&1)<<2)
				out[l+64] = dl[s+4] * float32(int(qb>>4&3)-4+int(h>>2&1)<<2)
				out[l+96] = dl[s+6] * float32(int(qb>>6)-4+int(h>>3&1)<<2)
			}
		}
		src, dst = src[110:], dst[256:]
	}
}

// scaleMinK4 returns the 6-bit scale and min of sub-block j (0..7) from the
// twelve packed bytes of Q4_K and Q5_K (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// chunkScalesK4 returns the scales and mins of the two 32-element
// sub-blocks of 64-element chunk n of a Q4_K or Q5_K block.
func chunkScalesK4(n int, d, dmin float32, scales []byte) (d1, m1, d2, m2 float32) {
	sc, m := scaleMinK4(2*n, scales)
	d1, m1 = float32(d*float32(sc)), float32(dmin*float32(m))
	sc, m = scaleMinK4(2*n+1, scales)
	d2, m2 = float32(d*float32(sc)), float32(dmin*float32(m))
	return d1, m1, d2, m2
}

func dequantQ4_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b := src[:144:144]
		y := dst[:256:256]
		d, dmin := f16At(b), f16At(b[2:])
		scales := b[4:16]
		for n := 0; n < 4; n++ {
			q := b[16+32*n : 16+32*n+32]
			d1, m1, d2, m2 := chunkScalesK4(n, d, dmin, scales)
			lo, hi := y[64*n:64*n+32], y[64*n+32:64*n+64]
			for l := 0; l < 32; l++ {
				lo[l] = float32(d1*float32(q[l]&0xf)) - m1
				hi[l] = float32(d2*float32(q[l]>>4)) - m2
			}
		}
		src, dst = src[144:], dst[256:]
	}
}

func dequantQ5_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b := src[:176:176]
		y := dst[:256:256]
		d, dmin := f16At(b), f16At(b[2:])
		scales := b[4:16]
		qh := b[16:48]
		for n := 0; n < 4; n++ {
			ql := b[48+32*n : 48+32*n+32]
			d1, m1, d2, m2 := chunkScalesK4(n, d, dmin, scales)
			lo, hi := y[64*n:64*n+32], y[64*n+32:64*n+64]
			// The fifth bits of chunk n are bits 2n and 2n+1 of qh.
			s1, s2 := uint(2*n), uint(2*n+1)
			for l := 0; l < 32; l++ {
				q1 := ql[l]&0xf | (qh[l]>>s1&1)<<4
				q2 := ql[l]>>4 | (qh[l]>>s2&1)<<4
				lo[l] = float32(d1*float32(q1)) - m1
				hi[l] = float32(d2*float32(q2)) - m2
			}
		}
		src, dst = src[176:], dst[256:]
	}
}

func dequantQ6_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b := src[:210:210]
		y := dst[:256:256]
		d := f16At(b[208:])
		for n := 0; n < 2; n++ {
			ql := b[64*n : 64*n+64]
			qh := b[128+32*n : 128+32*n+32]
			sc := b[192+8*n : 192+8*n+8]
			out := y[128*n : 128*n+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				out[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				out[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				out[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				out[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
		src, dst = src[210:], dst[256:]
	}
}

func dequantIQ4_XS(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b := src[:136:136]
		y := dst[:256:256]
		d := f16At(b)
		scalesH := binary.LittleEndian.Uint16(b[2:])
		scalesL := b[4:8]
		for ib := 0; ib < 8; ib++ {
			ls := int(scalesL[ib/2]>>(4*uint(ib%2))&0xf) | int(scalesH>>(2*uint(ib))&3)<<4
			dl := d * float32(ls-32)
			qs := b[8+16*ib : 8+16*ib+16]
			out := y[32*ib : 32*ib+32]
			for j := 0; j < 16; j++ {
				out[j] = dl * float32(kvaluesIQ4NL[qs[j]&0xf])
				out[j+16] = dl * float32(kvaluesIQ4NL[qs[j]>>4])
			}
		}
		src, dst = src[136:], dst[256:]
	}
}
