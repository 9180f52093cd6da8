package quant

import "encoding/binary"

// bestIndexIQ4 returns the index of the code-book value nearest to x; a
// value exactly between two levels picks the upper one (ggml's
// best_index_int8 over kvalues_iq4nl).
func bestIndexIQ4(x float32) int {
	x2 := float32(x) + float32(x)
	idx := 0
	for step := 8; step > 0; step >>= 1 {
		j := idx + step
		if x2 >= float32(int(kvaluesIQ4NL[j-1])+int(kvaluesIQ4NL[j])) {
			idx = j
		}
	}
	return idx
}

// fitIQ4Block fits one 32-element block x to d*kvalues[L] with weights x²,
// trying 2*ntry+1 scales around the one that maps the largest magnitude to
// the code book's end (ggml's quantize_row_iq4_nl_impl per block). It
// returns the scale; L gets the levels of the first try.
func fitIQ4Block(x []float32, L []uint8, ntry int) float32 {
	maxv, amax := absMax(x)
	if amax < groupMaxEps {
		return 0
	}
	v0 := float32(kvaluesIQ4NL[0])
	d := -maxv / v0
	if ntry <= 0 {
		d = maxv / v0
	}
	id := 1 / d
	var sumqx, sumq2 float32
	for j, v := range x {
		l := bestIndexIQ4(id * v)
		L[j] = uint8(l)
		q := float32(kvaluesIQ4NL[l])
		w := v * v
		sumqx += float32(float32(w*q) * v)
		sumq2 += float32(float32(w*q) * q)
	}
	d = sumqx / sumq2
	best := d * sumqx
	for itry := -ntry; itry <= ntry; itry++ {
		id = (float32(itry) + v0) / maxv
		sumqx, sumq2 = 0, 0
		for _, v := range x {
			q := float32(kvaluesIQ4NL[bestIndexIQ4(id*v)])
			w := v * v
			sumqx += float32(float32(w*q) * v)
			sumq2 += float32(float32(w*q) * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = d * sumqx
		}
	}
	return d
}

// packIQ4 writes the 32 levels of L into 16 bytes: element j low nibble,
// element j+16 high nibble.
func packIQ4(L []uint8, qs []byte) {
	for j := 0; j < 16; j++ {
		qs[j] = L[j] | L[j+16]<<4
	}
}

func quantIQ4_NL(src []float32, dst []byte) {
	var L [32]uint8
	for len(src) >= 32 {
		x := src[:32:32]
		b := dst[:18:18]
		clear(L[:])
		d := fitIQ4Block(x, L[:], 7)
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		id := inverse(d)
		for j, v := range x {
			L[j] = uint8(bestIndexIQ4(id * v))
		}
		packIQ4(L[:], b[2:18])
		src, dst = src[32:], dst[18:]
	}
}

func quantIQ4_XS(src []float32, dst []byte) {
	var L [256]uint8
	var scales [8]float32
	for len(src) >= 256 {
		x := src[:256:256]
		b := dst[:136:136]
		clear(b)
		clear(L[:])
		var maxScale, amaxScale float32
		for ib := 0; ib < 8; ib++ {
			scales[ib] = fitIQ4Block(x[32*ib:32*ib+32], L[32*ib:32*ib+32], 7)
			if a := abs32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		binary.LittleEndian.PutUint16(b, FP32ToFP16(d))
		id := inverse(d)
		var scalesH uint16
		for ib := 0; ib < 8; ib++ {
			l := clampInt(nearestInt(id*scales[ib]), -32, 31)
			dl := float32(d * float32(l))
			idl := inverse(dl)
			for j, v := range x[32*ib : 32*ib+32] {
				L[32*ib+j] = uint8(bestIndexIQ4(idl * v))
			}
			l += 32
			b[4+ib/2] |= byte(l&0xf) << (4 * uint(ib%2))
			scalesH |= uint16(l>>4) << (2 * uint(ib))
		}
		binary.LittleEndian.PutUint16(b[2:], scalesH)
		for ib := 0; ib < 8; ib++ {
			packIQ4(L[32*ib:32*ib+32], b[8+16*ib:8+16*ib+16])
		}
		src, dst = src[256:], dst[136:]
	}
}
