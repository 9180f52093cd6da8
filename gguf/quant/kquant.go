package quant

import (
	"encoding/binary"
	"math"
)

// The 256-element quantizers follow llama.cpp's quantize_row_*_ref (no
// importance matrix): a per-sub-block scale (and minimum) search, the
// sub-block scales quantized against one f16 super-block scale, and a final
// round-to-nearest pass against the scales as they will be decoded. Products
// are converted to float32 explicitly so no multiply-add is fused.

const groupMaxEps = 1e-15

// nearestInt rounds v to the nearest integer, ties to even, the way ggml's
// nearest_int does (by adding 1.5*2^23). It is meant for |v| < 2^22; NaN and
// larger values give a garbage integer of bounded size, as in the reference.
func nearestInt(v float32) int {
	b := math.Float32bits(float32(v) + 12582912)
	return int(b&0x007fffff) - 0x00400000
}

func clampInt(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// greater returns v if v > cur, else cur; unlike max, a NaN v is ignored,
// as in the reference's running maxima.
func greater(cur, v float32) float32 {
	if v > cur {
		return v
	}
	return cur
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }

// makeQKX2Quants fits x ≈ scale*L - min with L in [0, nmax] minimising the
// weighted error (ggml's make_qkx2_quants). It returns scale and the
// positive minimum to subtract.
func makeQKX2Quants(nmax int, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -lo
	}
	errOf := func(diff float32) float32 {
		if useMAD {
			return abs32(diff)
		}
		return diff * diff
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := clampInt(nearestInt(iscale*float32(x[i]-lo)), 0, nmax)
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+lo) - x[i]
		bestErr += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(rmin+float32(rdelta*float32(is))+float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clampInt(nearestInt(iscale*float32(x[i]-lo)), 0, nmax)
			Laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curErr float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i]
				curErr += float32(weights[i] * errOf(diff))
			}
			if curErr < bestErr {
				copy(L[:n], Laux[:n])
				bestErr = curErr
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

// makeQXQuants fits x ≈ scale*(L-nmax) with weights x², L in [0, 2*nmax)
// (ggml's make_qx_quants with rmse_type 1 and no importance weights).
func makeQXQuants(nmax int, x []float32, L []int8) float32 {
	maxv, amax := absMax(x)
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	fit := func(iscale float32, store bool) (sumlx, suml2 float32) {
		for i, v := range x {
			l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
			if store {
				L[i] = int8(l + nmax)
			}
			w := v * v
			fl := float32(l)
			sumlx += float32(float32(w*v) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		return sumlx, suml2
	}
	iscale := -float32(nmax) / maxv
	sumlx, suml2 := fit(iscale, true)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / maxv
		sumlx, suml2 = fit(iscale, false)
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			fit(iscale, true)
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3Quants fits x ≈ scale*(L-nmax) for Q3_K with an iterative
// refinement weighted by x² (ggml's make_q3_quants with do_rmse).
func makeQ3Quants(nmax int, x []float32, L []int8) float32 {
	maxv, amax := absMax(x)
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	iscale := -float32(nmax) / maxv
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
		L[i] = int8(l)
		w := v * v
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := v * v
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				nl := clampInt(nearestInt(float32(v*sl2)/slx), -nmax, nmax-1)
				if nl != int(L[i]) {
					fn := float32(nl)
					slx += float32(float32(w*v) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(nl)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

func quantQ2_K(src []float32, dst []byte) {
	var L [256]uint8
	var Laux [16]uint8
	var weights [16]float32
	var mins, scales [16]float32
	const q4scale = 15
	for len(src) >= 256 {
		x := src[:256:256]
		b := dst[:84:84]
		var maxScale, maxMin float32
		for j := 0; j < 16; j++ {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], Laux[:], -0.5, 0.1, 15, true)
			maxScale = greater(maxScale, scales[j])
			maxMin = greater(maxMin, mins[j])
		}
		sc := b[0:16]
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range sc {
				sc[j] = byte(nearestInt(iscale * scales[j]))
			}
			binary.LittleEndian.PutUint16(b[80:], FP32ToFP16(maxScale/q4scale))
		} else {
			clear(sc)
			binary.LittleEndian.PutUint16(b[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := range sc {
				sc[j] |= byte(nearestInt(iscale*mins[j]) << 4)
			}
			binary.LittleEndian.PutUint16(b[82:], FP32ToFP16(maxMin/q4scale))
		} else {
			binary.LittleEndian.PutUint16(b[82:], 0)
		}
		d, dmin := f16At(b[80:]), f16At(b[82:])
		for j := 0; j < 16; j++ {
			dl := float32(d * float32(sc[j]&0xf))
			if dl == 0 {
				continue
			}
			ml := float32(dmin * float32(sc[j]>>4))
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = uint8(clampInt(nearestInt((x[16*j+ii]+ml)/dl), 0, 3))
			}
		}
		qs := b[16:80]
		for j := 0; j < 256; j += 128 {
			for l := 0; l < 32; l++ {
				qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
			}
		}
		src, dst = src[256:], dst[84:]
	}
}

func quantQ3_K(src []float32, dst []byte) {
	var L [256]int8
	var scales [16]float32
	for len(src) >= 256 {
		x := src[:256:256]
		b := dst[:110:110]
		var maxScale, amax float32
		for j := 0; j < 16; j++ {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		sp := b[96:108]
		clear(sp)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < 16; j++ {
				l := clampInt(int(int8(nearestInt(iscale*scales[j]))), -32, 31) + 32
				if j < 8 {
					sp[j] = byte(l & 0xf)
				} else {
					sp[j-8] |= byte(l&0xf) << 4
				}
				sp[8+j%4] |= byte(l>>4) << (2 * uint(j/4))
			}
			binary.LittleEndian.PutUint16(b[108:], FP32ToFP16(1/iscale))
		} else {
			binary.LittleEndian.PutUint16(b[108:], 0)
		}
		var sc [16]int8
		unpackQ3KScales(sp, &sc)
		d := f16At(b[108:])
		for j := 0; j < 16; j++ {
			dl := float32(d * float32(sc[j]))
			if dl == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = int8(clampInt(nearestInt(x[16*j+ii]/dl), -4, 3) + 4)
			}
		}
		hmask := b[0:32]
		clear(hmask)
		for j := 0; j < 256; j++ {
			if L[j] > 3 {
				hmask[j%32] |= 1 << uint(j/32)
				L[j] -= 4
			}
		}
		qs := b[32:96]
		for j := 0; j < 256; j += 128 {
			for l := 0; l < 32; l++ {
				qs[j/4+l] = byte(L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6)
			}
		}
		src, dst = src[256:], dst[110:]
	}
}

// quantK4Scales fits the eight 32-element sub-blocks of a Q4_K/Q5_K super
// block, packs their 6-bit scales and mins into sp (12 bytes), writes d and
// dmin into dm (4 bytes), and leaves in L the final levels in [0, nmax].
func quantK4Scales(x []float32, nmax int, rmin, rdelta float32, nstep int, L *[256]uint8, dm, sp []byte) {
	var Laux [32]uint8
	var weights [32]float32
	var mins, scales [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], Laux[:], rmin, rdelta, nstep, false)
		maxScale = greater(maxScale, scales[j])
		maxMin = greater(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(invScale*scales[j])))
		lm := min(63, uint8(nearestInt(invMin*mins[j])))
		if j < 4 {
			sp[j] = ls
			sp[j+4] = lm
		} else {
			sp[j+4] = ls&0xf | (lm&0xf)<<4
			sp[j-4] |= (ls >> 4) << 6
			sp[j] |= (lm >> 4) << 6
		}
	}
	binary.LittleEndian.PutUint16(dm, FP32ToFP16(maxScale/63))
	binary.LittleEndian.PutUint16(dm[2:], FP32ToFP16(maxMin/63))
	d, dmin := f16At(dm), f16At(dm[2:])
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, sp)
		dl := float32(d * float32(sc))
		if dl == 0 {
			continue
		}
		ml := float32(dmin * float32(m))
		for ii := 0; ii < 32; ii++ {
			L[32*j+ii] = uint8(clampInt(nearestInt((x[32*j+ii]+ml)/dl), 0, nmax))
		}
	}
}

func quantQ4_K(src []float32, dst []byte) {
	var L [256]uint8
	for len(src) >= 256 {
		b := dst[:144:144]
		sp := b[4:16]
		clear(sp)
		quantK4Scales(src[:256], 15, -1, 0.1, 20, &L, b[0:4], sp)
		qs := b[16:144]
		for j := 0; j < 4; j++ {
			for l := 0; l < 32; l++ {
				qs[32*j+l] = L[64*j+l] | L[64*j+l+32]<<4
			}
		}
		src, dst = src[256:], dst[144:]
	}
}

func quantQ5_K(src []float32, dst []byte) {
	var L [256]uint8
	for len(src) >= 256 {
		b := dst[:176:176]
		sp := b[4:16]
		clear(sp)
		quantK4Scales(src[:256], 31, -0.5, 0.1, 15, &L, b[0:4], sp)
		qh := b[16:48]
		clear(qh)
		ql := b[48:176]
		m1, m2 := byte(1), byte(2)
		for n := 0; n < 4; n++ {
			for j := 0; j < 32; j++ {
				l1, l2 := L[64*n+j], L[64*n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[32*n+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
		src, dst = src[256:], dst[176:]
	}
}

func quantQ6_K(src []float32, dst []byte) {
	var L [256]int8
	var scales [16]float32
	for len(src) >= 256 {
		x := src[:256:256]
		b := dst[:210:210]
		var maxScale, maxAbs float32
		for ib := 0; ib < 16; ib++ {
			scales[ib] = makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			if a := abs32(scales[ib]); a > maxAbs {
				maxAbs, maxScale = a, scales[ib]
			}
		}
		if maxAbs < groupMaxEps {
			clear(b)
			src, dst = src[256:], dst[210:]
			continue
		}
		iscale := -128 / maxScale
		binary.LittleEndian.PutUint16(b[208:], FP32ToFP16(1/iscale))
		sc := b[192:208]
		for ib := range sc {
			sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		d := f16At(b[208:])
		for j := 0; j < 16; j++ {
			dl := float32(d * float32(int8(sc[j])))
			if dl == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = int8(clampInt(nearestInt(x[16*j+ii]/dl), -32, 31) + 32)
			}
		}
		for n := 0; n < 2; n++ {
			ql := b[64*n : 64*n+64]
			qh := b[128+32*n : 128+32*n+32]
			Ln := L[128*n : 128*n+128]
			for l := 0; l < 32; l++ {
				q1, q2, q3, q4 := byte(Ln[l]), byte(Ln[l+32]), byte(Ln[l+64]), byte(Ln[l+96])
				ql[l] = q1&0xf | (q3&0xf)<<4
				ql[l+32] = q2&0xf | (q4&0xf)<<4
				qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
		src, dst = src[256:], dst[210:]
	}
}
