#version 450
// top_k writes, for each row, the k largest elements (k <= MAX_K) sorted
// by value descending, ties (-0 = +0) by index ascending, as indices
// (uint32) and values (f32) [row][k]; NaNs rank below everything. One workgroup per row
// finds the k-th largest value by a 4-pass 8-bit radix select over the
// order-preserving integer keys of the floats, then collects the elements
// above it and the first (by index) elements equal to it, and sorts the k
// results. CPU reference: engine/ops RefTopK.
// variant: top_k_f32
#include "common.glsl"

#define MAX_K 64

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer I { uint data_i[]; };
layout(binding = 2) writeonly buffer V { float data_v[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint cols;
	uint k;
	uint skip; // elements of X before the first row
} p;

shared uint hist[256];
shared uint sh_prefix, sh_mask, sh_need, sh_above;
shared uint eq_before[WG];
shared uint out_key[MAX_K];
shared uint out_idx[MAX_K];

// key maps floats to uints in the same order (NaN lowest, -0 equal to +0,
// as the sampler's top_k compares them). Integer tests only: a float
// comparison with zero may flush denormals.
uint key(float x) {
	if (isnan(x)) {
		return 0u;
	}
	uint b = floatBitsToUint(x);
	if (b == 0x80000000u) {
		b = 0u;
	}
	return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}


void main() {
	const uint row = group_id();
	if (row >= p.rows) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint base = p.skip + row * p.cols;
	if (t == 0) {
		sh_prefix = 0u;
		sh_mask = 0u;
		sh_need = p.k;
		sh_above = 0u;
	}
	for (int shift = 24; shift >= 0; shift -= 8) {
		for (uint b = t; b < 256; b += WG) {
			hist[b] = 0u;
		}
		barrier();
		const uint prefix = sh_prefix, mask = sh_mask;
		for (uint i = t; i < p.cols; i += WG) {
			const uint kk = key(data_x[base + i]);
			if ((kk & mask) == prefix) {
				atomicAdd(hist[(kk >> shift) & 255u], 1u);
			}
		}
		barrier();
		if (t == 0) {
			uint need = sh_need;
			for (int b = 255; b >= 0; b--) {
				const uint c = hist[b];
				if (c >= need) {
					sh_prefix = prefix | (uint(b) << shift);
					sh_mask = mask | (255u << shift);
					break;
				}
				need -= c;
			}
			sh_need = need;
		}
		barrier();
	}
	// The k-th largest key is sh_prefix; sh_need of the elements equal to it
	// are taken (the first by index), and all k - sh_need above it.
	const uint kth = sh_prefix, need = sh_need;
	const uint chunk = (p.cols + WG - 1) / WG;
	const uint c0 = min(t * chunk, p.cols), c1 = min(c0 + chunk, p.cols);
	uint eq = 0u;
	for (uint i = c0; i < c1; i++) {
		const uint kk = key(data_x[base + i]);
		if (kk > kth) {
			const uint slot = atomicAdd(sh_above, 1u);
			out_key[slot] = kk;
			out_idx[slot] = i;
		} else if (kk == kth) {
			eq++;
		}
	}
	eq_before[t] = eq;
	barrier();
	if (t == 0) {
		uint s = 0u;
		for (uint i = 0; i < WG; i++) {
			const uint c = eq_before[i];
			eq_before[i] = s;
			s += c;
		}
	}
	barrier();
	uint rank = eq_before[t];
	const uint above = p.k - need;
	for (uint i = c0; i < c1 && rank < need; i++) {
		if (key(data_x[base + i]) == kth) {
			out_key[above + rank] = kth;
			out_idx[above + rank] = i;
			rank++;
		}
	}
	barrier();
	if (t == 0) { // insertion sort of at most MAX_K entries
		for (uint i = 1; i < p.k; i++) {
			const uint kk = out_key[i], ii = out_idx[i];
			uint j = i;
			while (j > 0 && (out_key[j - 1] < kk || (out_key[j - 1] == kk && out_idx[j - 1] > ii))) {
				out_key[j] = out_key[j - 1];
				out_idx[j] = out_idx[j - 1];
				j--;
			}
			out_key[j] = kk;
			out_idx[j] = ii;
		}
	}
	barrier();
	for (uint j = t; j < p.k; j += WG) {
		data_i[row * p.k + j] = out_idx[j];
		data_v[row * p.k + j] = data_x[base + out_idx[j]];
	}
}
