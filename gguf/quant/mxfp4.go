package quant

import (
	"math"
)

// MXFP4 (the OCP microscaling format, block_mxfp4 in ggml-common.h) stores
// 32 elements in 17 bytes: an E8M0 exponent byte e, then 16 bytes of 4-bit
// E2M1 codes, element j in the low nibble of byte 1+j and element j+16 in
// the high nibble. ggml keeps the E2M1 values doubled as small integers
// (kvalues_mxfp4) and halves the scale instead (ggml_e8m0_to_fp32_half), so
// element i is kvaluesMXFP4[code] * 2^(e-128).

// kvaluesMXFP4 is the E2M1 code book times two (ggml's kvalues_mxfp4):
// codes 0-7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and codes 8-15 their negatives.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0ToFP32Half returns half the value of the E8M0 exponent byte e, that
// is 2^(e-128), as ggml's ggml_e8m0_to_fp32_half computes it: e of 0 and 1
// give the subnormals 2^-128 and 2^-127, and e of 255 (NaN in the OCP
// specification) gives 2^127 like any other exponent.
func e8m0ToFP32Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantMXFP4(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b := src[:17:17]
		y := dst[:32:32]
		d := e8m0ToFP32Half(b[0])
		qs := b[1:17]
		for j := 0; j < 16; j++ {
			y[j] = float32(kvaluesMXFP4[qs[j]&0xf]) * d
			y[j+16] = float32(kvaluesMXFP4[qs[j]>>4]) * d
		}
		src, dst = src[17:], dst[32:]
	}
}

// bestIndexMXFP4 returns the code whose value kvaluesMXFP4[i]*d is nearest
// to x, the lowest code on ties (so zero is code 0, never 8), as ggml's
// best_index_mxfp4 does.
func bestIndexMXFP4(x, d float32) uint8 {
	best := 0
	bestErr := abs32(float32(float32(kvaluesMXFP4[0])*d) - x)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(kvaluesMXFP4[i])*d) - x); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

// exponentMXFP4 returns the E8M0 byte ggml's quantize_row_mxfp4_ref picks
// for a block of largest magnitude amax: floor(log2(amax)) - 2 + 127, so
// that amax/2^(e-127) lies in [4, 8) and the largest magnitude rounds to
// the E2M1 value 4 or 6.
// Out-of-range results wrap to a byte as the reference's float-to-uint8_t
// conversion does on x86 (through a 32-bit integer; values outside int32,
// such as an infinite amax, give 0).
func exponentMXFP4(amax float32) uint8 {
	if !(amax > 0) {
		return 0
	}
	// log2f rounds to float32 before the floor: just below a power of two
	// the rounded logarithm is that power's exponent.
	l := float32(math.Log2(float64(amax)))
	v := float32(float32(float32(math.Floor(float64(l)))-2) + 127)
	if !(v >= math.MinInt32 && v < math.MaxInt32) {
		return 0
	}
	return uint8(int32(v))
}

func quantMXFP4(src []float32, dst []byte) {
	for len(src) >= 32 {
		x := src[:32:32]
		b := dst[:17:17]
		var amax float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax = a
			}
		}
		e := exponentMXFP4(amax)
		d := e8m0ToFP32Half(e)
		b[0] = e
		for j := 0; j < 16; j++ {
			b[1+j] = bestIndexMXFP4(x[j], d) | bestIndexMXFP4(x[j+16], d)<<4
		}
		src, dst = src[32:], dst[17:]
	}
}
