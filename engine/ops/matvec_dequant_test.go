package ops

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/gguf"
)

// This file is the tests' own dequantizer, written in the loop form of
// ggml's dequantize_row_* (ggml-quants.c), independent of the per-element
// index arithmetic in shaders/quant.glsl and of gguf/quant;
// TestDequantizeMatchesQuant holds it bit-identical to gguf/quant.Dequantize
// (which MatMulRef and GetRowsRef use).

// dqHalf reads a little-endian f16.
func dqHalf(b []byte) float32 { return dqHalfToFloat(binary.LittleEndian.Uint16(b)) }

// dqHalfToFloat converts f16 bits to float32 exactly.
func dqHalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int(h>>10) & 31
	man := uint32(h & 1023)
	switch {
	case exp == 0:
		v := float32(man) / 1024 / 16384
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | man<<13)
}

// dqIQ4NL is ggml's kvalues_iq4nl code book.
var dqIQ4NL = [16]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// dqMXFP4 is ggml's kvalues_mxfp4, the E2M1 values doubled.
var dqMXFP4 = [16]float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// dqScaleMinK4 unpacks the 6-bit scale and min j of a Q4_K/Q5_K block
// (ggml's get_scale_min_k4).
func dqScaleMinK4(j int, q []byte) (float32, float32) {
	if j < 4 {
		return float32(q[j] & 63), float32(q[j+4] & 63)
	}
	return float32(q[j+4]&0xF | (q[j-4]>>6)<<4), float32(q[j+4]>>4 | (q[j]>>6)<<4)
}

// dequantizeRow expands the blocks in x of type t into y (len(y) elements,
// a whole number of blocks).
func dequantizeRow(t gguf.GGMLType, x []byte, y []float32) error {
	bs, ts := t.BlockSize(), t.TypeSize()
	if bs == 0 || len(y)%bs != 0 || len(x) < len(y)/bs*ts {
		return fmt.Errorf("ops: dequantize %v: %d bytes for %d elements", t, len(x), len(y))
	}
	for b := 0; b < len(y)/bs; b++ {
		blk := x[b*ts : (b+1)*ts]
		out := y[b*bs : (b+1)*bs]
		switch t {
		case gguf.TypeF32:
			out[0] = math.Float32frombits(binary.LittleEndian.Uint32(blk))
		case gguf.TypeF16:
			out[0] = dqHalf(blk)
		case gguf.TypeBF16:
			out[0] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(blk)) << 16)
		case gguf.TypeQ4_0, gguf.TypeIQ4_NL:
			d, qs := dqHalf(blk), blk[2:]
			for j := 0; j < 16; j++ {
				if t == gguf.TypeQ4_0 {
					out[j] = d * float32(int(qs[j]&0xF)-8)
					out[j+16] = d * float32(int(qs[j]>>4)-8)
				} else {
					out[j] = d * dqIQ4NL[qs[j]&0xF]
					out[j+16] = d * dqIQ4NL[qs[j]>>4]
				}
			}
		case gguf.TypeMXFP4:
			// E8M0 exponent e, halved for the doubled book: 2^(e-128).
			d, qs := float32(math.Ldexp(1, int(blk[0])-128)), blk[1:]
			for j := 0; j < 16; j++ {
				out[j] = dqMXFP4[qs[j]&0xF] * d
				out[j+16] = dqMXFP4[qs[j]>>4] * d
			}
		case gguf.TypeQ4_1:
			d, m, qs := dqHalf(blk), dqHalf(blk[2:]), blk[4:]
			for j := 0; j < 16; j++ {
				out[j] = float32(qs[j]&0xF)*d + m
				out[j+16] = float32(qs[j]>>4)*d + m
			}
		case gguf.TypeQ5_0, gguf.TypeQ5_1:
			d, m, rest := dqHalf(blk), float32(0), blk[2:]
			if t == gguf.TypeQ5_1 {
				m, rest = dqHalf(blk[2:]), blk[4:]
			}
			qh := binary.LittleEndian.Uint32(rest)
			qs := rest[4:]
			for j := 0; j < 16; j++ {
				x0 := int(qs[j]&0xF) | int((qh>>j)<<4)&0x10
				x1 := int(qs[j]>>4) | int(qh>>(j+12))&0x10
				if t == gguf.TypeQ5_0 {
					out[j] = float32(x0-16) * d
					out[j+16] = float32(x1-16) * d
				} else {
					out[j] = float32(x0)*d + m
					out[j+16] = float32(x1)*d + m
				}
			}
		case gguf.TypeQ8_0:
			d := dqHalf(blk)
			for j := 0; j < 32; j++ {
				out[j] = d * float32(int8(blk[2+j]))
			}
		case gguf.TypeQ2_K:
			sc, q := blk[:16], blk[16:80]
			d, dmin := dqHalf(blk[80:]), dqHalf(blk[82:])
			i, is := 0, 0
			for n := 0; n < 256; n += 128 {
				for shift := 0; shift < 8; shift += 2 {
					for half := 0; half < 2; half++ {
						s := sc[is]
						is++
						dl, ml := d*float32(s&0xF), dmin*float32(s>>4)
						for l := 0; l < 16; l++ {
							out[i] = dl*float32((q[l+16*half]>>shift)&3) - ml
							i++
						}
					}
				}
				q = q[32:]
			}
		case gguf.TypeQ3_K:
			hm, q, sb := blk[:32], blk[32:96], blk[96:108]
			d := dqHalf(blk[108:])
			var aux [4]uint32
			for i := 0; i < 3; i++ {
				aux[i] = binary.LittleEndian.Uint32(sb[4*i:])
			}
			const km1, km2 = 0x03030303, 0x0f0f0f0f
			tmp := aux[2]
			aux[2] = (aux[0]>>4)&km2 | ((tmp>>4)&km1)<<4
			aux[3] = (aux[1]>>4)&km2 | ((tmp>>6)&km1)<<4
			aux[0] = aux[0]&km2 | ((tmp>>0)&km1)<<4
			aux[1] = aux[1]&km2 | ((tmp>>2)&km1)<<4
			var scales [16]int8
			for i := range scales {
				scales[i] = int8(aux[i/4] >> (8 * (i % 4)))
			}
			i, is, m := 0, 0, byte(1)
			for n := 0; n < 256; n += 128 {
				for shift := 0; shift < 8; shift += 2 {
					for half := 0; half < 2; half++ {
						dl := d * float32(int(scales[is])-32)
						is++
						for l := 16 * half; l < 16*half+16; l++ {
							v := int((q[l] >> shift) & 3)
							if hm[l]&m == 0 {
								v -= 4
							}
							out[i] = dl * float32(v)
							i++
						}
					}
					m <<= 1
				}
				q = q[32:]
			}
		case gguf.TypeQ4_K, gguf.TypeQ5_K:
			d, dmin, sc := dqHalf(blk), dqHalf(blk[2:]), blk[4:16]
			var qh, ql []byte
			if t == gguf.TypeQ4_K {
				ql = blk[16:]
			} else {
				qh, ql = blk[16:48], blk[48:]
			}
			i, is := 0, 0
			u1, u2 := byte(1), byte(2)
			for j := 0; j < 256; j += 64 {
				s1, m1 := dqScaleMinK4(is, sc)
				s2, m2 := dqScaleMinK4(is+1, sc)
				for l := 0; l < 32; l++ {
					v := float32(ql[l] & 0xF)
					if qh != nil && qh[l]&u1 != 0 {
						v += 16
					}
					out[i+l] = d*s1*v - dmin*m1
					v = float32(ql[l] >> 4)
					if qh != nil && qh[l]&u2 != 0 {
						v += 16
					}
					out[i+32+l] = d*s2*v - dmin*m2
				}
				i += 64
				ql = ql[32:]
				is += 2
				u1 <<= 2
				u2 <<= 2
			}
		case gguf.TypeQ6_K:
			ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
			d := dqHalf(blk[208:])
			for n := 0; n < 256; n += 128 {
				for l := 0; l < 32; l++ {
					is := l / 16
					q1 := int(ql[l]&0xF|((qh[l]>>0)&3)<<4) - 32
					q2 := int(ql[l+32]&0xF|((qh[l]>>2)&3)<<4) - 32
					q3 := int(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
					q4 := int(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
					out[n+l] = d * float32(int8(sc[is])) * float32(q1)
					out[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
					out[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
					out[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
				}
				ql, qh, sc = ql[64:], qh[32:], sc[8:]
			}
		case gguf.TypeIQ4_XS:
			d := dqHalf(blk)
			sh := binary.LittleEndian.Uint16(blk[2:])
			sl, qs := blk[4:8], blk[8:]
			for ib := 0; ib < 8; ib++ {
				ls := int((sl[ib/2]>>(4*(ib%2)))&0xF) | int((sh>>(2*ib))&3)<<4
				dl := d * float32(ls-32)
				for j := 0; j < 16; j++ {
					out[32*ib+j] = dl * dqIQ4NL[qs[j]&0xF]
					out[32*ib+j+16] = dl * dqIQ4NL[qs[j]>>4]
				}
				qs = qs[16:]
			}
		default:
			return fmt.Errorf("ops: dequantize: type %v not supported", t)
		}
	}
	return nil
}
