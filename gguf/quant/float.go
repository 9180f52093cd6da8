package quant

import "math"

// FP16ToFP32 converts an IEEE 754 binary16 value to float32 exactly
// (subnormals, infinities and NaN payloads included).
func FP16ToFP32(h uint16) float32 {
	if e := h & 0x7c00; e != 0 && e != 0x7c00 {
		// Normal numbers, the common case, kept small enough to inline:
		// rebias the exponent by 127-15.
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + (127-15)<<23))
	}
	return fp16SpecialToFP32(h)
}

// fp16SpecialToFP32 converts the binary16 zeros, subnormals, infinities
// and NaNs.
func fp16SpecialToFP32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	mant := uint32(h & 0x3ff)
	if h&0x7c00 == 0x7c00 {
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	if mant == 0 {
		return math.Float32frombits(sign)
	}
	// A binary16 subnormal is mant * 2^-24; normalise it.
	e := uint32(127 - 15 + 1)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// FP32ToFP16 converts f to IEEE 754 binary16 with round-to-nearest-even, as
// the F16C instruction ggml uses on x86 does: values past the binary16 range
// become infinities, tiny values become subnormals or zero, and a NaN stays a
// quiet NaN keeping the top bits of its payload.
func FP32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Result is a binary16 subnormal m*2^-24 (or zero, or rounds up
		// to the smallest normal, which the carry encodes correctly).
		if e < -10 {
			return sign // below half the smallest subnormal
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is the correct rounding, up to infinity
	}
	return sign | uint16(h)
}

// BF16ToFP32 converts a bfloat16 value to float32 exactly.
func BF16ToFP32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// FP32ToBF16 converts f to bfloat16 the way ggml does: round-to-nearest-even
// on the top 16 bits, with NaN forced quiet (subnormals are kept).
func FP32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
