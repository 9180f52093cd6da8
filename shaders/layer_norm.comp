#version 450
// layer_norm: y = (x - mean) / sqrt(var + eps) * w + b per row (population
// variance, two passes over the row). One workgroup per row. CPU reference:
// engine/ops RefLayerNorm.
// variant: layer_norm_f32
// variant: layer_norm_f32_sg -DUSE_SUBGROUP=1
#include "common.glsl"
#include "reduce.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer W { float data_w[]; };
layout(binding = 2) readonly buffer B { float data_b[]; };
layout(binding = 3) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint cols;
	float eps;
} p;

void main() {
	const uint row = group_id();
	if (row >= p.rows) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint base = row * p.cols;
	float s = 0.0;
	for (uint i = t; i < p.cols; i += WG) {
		s += data_x[base + i];
	}
	const float mean = wg_sum(s) / float(p.cols);
	float q = 0.0;
	for (uint i = t; i < p.cols; i += WG) {
		const float d = data_x[base + i] - mean;
		q += d * d;
	}
	const float inv = inversesqrt(wg_sum(q) / float(p.cols) + p.eps);
	for (uint i = t; i < p.cols; i += WG) {
		data_y[base + i] = (data_x[base + i] - mean) * inv * data_w[i] + data_b[i];
	}
}
