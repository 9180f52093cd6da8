#version 450
// soft_max: y = softmax(x * scale + mask) along each row, where the mask
// (f32, e.g. 0 / -inf) row is r % mask_rows and mask_rows == 0 means none.
// One workgroup per row: max, sum of exp, normalise. CPU reference:
// engine/ops RefSoftMax.
// variant: soft_max_f32
// variant: soft_max_f32_sg -DUSE_SUBGROUP=1
#include "common.glsl"
#include "reduce.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer M { float data_m[]; };
layout(binding = 2) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint cols;
	uint mask_rows;
	float scale;
} p;

float val(uint base, uint mbase, uint i) {
	float v = data_x[base + i] * p.scale;
	if (p.mask_rows != 0) {
		v += data_m[mbase + i];
	}
	return v;
}

void main() {
	const uint row = group_id();
	if (row >= p.rows) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint base = row * p.cols;
	const uint mbase = p.mask_rows != 0 ? (row % p.mask_rows) * p.cols : 0;
	float m = NEG_INF;
	for (uint i = t; i < p.cols; i += WG) {
		m = max(m, val(base, mbase, i));
	}
	m = wg_max(m);
	float s = 0.0;
	for (uint i = t; i < p.cols; i += WG) {
		s += exp(val(base, mbase, i) - m);
	}
	const float inv = 1.0 / wg_sum(s);
	for (uint i = t; i < p.cols; i += WG) {
		data_y[base + i] = exp(val(base, mbase, i) - m) * inv;
	}
}
