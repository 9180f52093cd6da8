#version 450
// argmax writes, for each row, the index of its largest element (the
// smallest such index on ties; NaNs and -Inf are never chosen) as uint32,
// or 0xFFFFFFFF when no element is above -Inf: the sampler's greedy pick
// (sampling argmax), bit for bit. One workgroup per row. CPU reference:
// engine/ops RefArgmax.
// variant: argmax_f32
// variant: argmax_f32_sg -DUSE_SUBGROUP=1
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer Y { uint data_y[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint cols;
} p;

shared float best_v[WG];
shared uint best_i[WG];

void main() {
	const uint row = group_id();
	if (row >= p.rows) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint base = row * p.cols;
	float bv = NEG_INF;
	uint bi = 0xFFFFFFFFu;
	for (uint i = t; i < p.cols; i += WG) {
		const float v = data_x[base + i];
		if (v > bv) {
			bv = v;
			bi = i;
		}
	}
#ifdef USE_SUBGROUP
	// Within each subgroup: the max value, then the smallest index holding it.
	const float sv = subgroupMax(bv);
	const uint si = subgroupMin(bv == sv ? bi : 0xFFFFFFFFu);
	if (subgroupElect()) {
		best_v[gl_SubgroupID] = sv;
		best_i[gl_SubgroupID] = si;
	}
	barrier();
	if (t == 0) {
		float v = best_v[0];
		uint idx = best_i[0];
		for (uint s = 1; s < gl_NumSubgroups; s++) {
			if (best_v[s] > v || (best_v[s] == v && best_i[s] < idx)) {
				v = best_v[s];
				idx = best_i[s];
			}
		}
		data_y[row] = idx;
	}
#else
	best_v[t] = bv;
	best_i[t] = bi;
	barrier();
	[[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
		if (t < s) {
			const float ov = best_v[t + s];
			const uint oi = best_i[t + s];
			if (ov > best_v[t] || (ov == best_v[t] && oi < best_i[t])) {
				best_v[t] = ov;
				best_i[t] = oi;
			}
		}
		barrier();
	}
	if (t == 0) {
		data_y[row] = best_i[0];
	}
#endif
}
