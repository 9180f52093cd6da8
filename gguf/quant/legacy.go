package quant

import (
	"encoding/binary"
	"math"
)

// The 32-element quantizers follow llama.cpp's quantize_row_*_ref: one
// scale (and for the _1 types a minimum) per block, round to nearest, and
// the same float32 operations so that the bytes match the reference's.

// absMax returns the element of x with the largest magnitude (the first
// one on ties) and that magnitude.
func absMax(x []float32) (maxv, amax float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); amax < a {
			amax, maxv = a, v
		}
	}
	return maxv, amax
}

// minMax returns the smallest and largest element of x.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// inverse returns 1/d, or 0 for d == 0.
func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// truncClamp converts v+bias to an integer truncating toward zero, as C's
// (int8_t) cast does for the in-range values the quantizers produce, and
// clamps it to [0, hi] (NaN input gives 0).
func truncClamp(v float32, hi int) int {
	if !(v >= 0) {
		return 0
	}
	if v >= float32(hi) {
		return hi
	}
	return int(v)
}

func quantQ4_0(src []float32, dst []byte) {
	for len(src) >= 32 {
		x := src[:32:32]
		b := dst[:18:18]
		maxv, _ := absMax(x)
		d := maxv / -8
		id := inverse(d)
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		for j := 0; j < 16; j++ {
			q0 := truncClamp(float32(x[j]*id)+8.5, 15)
			q1 := truncClamp(float32(x[j+16]*id)+8.5, 15)
			b[2+j] = byte(q0) | byte(q1)<<4
		}
		src, dst = src[32:], dst[18:]
	}
}

func quantQ4_1(src []float32, dst []byte) {
	for len(src) >= 32 {
		x := src[:32:32]
		b := dst[:20:20]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		id := inverse(d)
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		binary.LittleEndian.PutUint16(b[2:], FP32ToFP16(lo))
		for j := 0; j < 16; j++ {
			q0 := truncClamp(float32((x[j]-lo)*id)+0.5, 15)
			q1 := truncClamp(float32((x[j+16]-lo)*id)+0.5, 15)
			b[4+j] = byte(q0) | byte(q1)<<4
		}
		src, dst = src[32:], dst[20:]
	}
}

func quantQ5_0(src []float32, dst []byte) {
	for len(src) >= 32 {
		x := src[:32:32]
		b := dst[:22:22]
		maxv, _ := absMax(x)
		d := maxv / -16
		id := inverse(d)
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		var qh uint32
		for j := 0; j < 16; j++ {
			q0 := truncClamp(float32(x[j]*id)+16.5, 31)
			q1 := truncClamp(float32(x[j+16]*id)+16.5, 31)
			b[6+j] = byte(q0&0xf) | byte(q1&0xf)<<4
			qh |= uint32(q0>>4) << j
			qh |= uint32(q1>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
		src, dst = src[32:], dst[22:]
	}
}

func quantQ5_1(src []float32, dst []byte) {
	for len(src) >= 32 {
		x := src[:32:32]
		b := dst[:24:24]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		id := inverse(d)
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		binary.LittleEndian.PutUint16(b[2:], FP32ToFP16(lo))
		var qh uint32
		for j := 0; j < 16; j++ {
			q0 := truncClamp(float32((x[j]-lo)*id)+0.5, 31)
			q1 := truncClamp(float32((x[j+16]-lo)*id)+0.5, 31)
			b[8+j] = byte(q0&0xf) | byte(q1&0xf)<<4
			qh |= uint32(q0>>4) << j
			qh |= uint32(q1>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
		src, dst = src[32:], dst[24:]
	}
}

func quantQ8_0(src []float32, dst []byte) {
	for len(src) >= 32 {
		x := src[:32:32]
		b := dst[:34:34]
		_, amax := absMax(x)
		d := amax / 127
		id := inverse(d)
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		for j, v := range x {
			b[2+j] = byte(int8(roundClamp(v*id, -127, 127)))
		}
		src, dst = src[32:], dst[34:]
	}
}

// roundClamp rounds v half away from zero (C's roundf) and clamps it to
// [lo, hi]; NaN gives 0.
func roundClamp(v float32, lo, hi int) int {
	r := math.Round(float64(v))
	switch {
	case !(r == r):
		return 0
	case r < float64(lo):
		return lo
	case r > float64(hi):
		return hi
	}
	return int(r)
}
