#version 450
// rms_norm normalises each row by its root mean square:
// y = x / sqrt(mean(x*x) + eps), times w (per column) in the _mul variants.
// One workgroup per row; the _rows variants (CPU devices) give each
// invocation a row of its own, with no reduction and no barrier (lavapipe
// runs a workgroup as SIMD lanes and pays a context switch per barrier).
// CPU reference: engine/ops RefRMSNorm.
// variant: rms_norm_f32
// variant: rms_norm_rows_f32 -DROWS=1
// variant: rms_norm_mul_rows_f32 -DMUL=1 -DROWS=1
// variant: rms_norm_mul_f32 -DMUL=1
// variant: rms_norm_f32_sg -DUSE_SUBGROUP=1
// variant: rms_norm_mul_f32_sg -DMUL=1 -DUSE_SUBGROUP=1
#include "common.glsl"
#ifndef ROWS
#include "reduce.glsl"
#endif

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer W { float data_w[]; };
layout(binding = 2) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint cols;
	float eps;
} p;

#ifdef ROWS
void main() {
	const uint row = group_id() * WG + gl_LocalInvocationID.x;
	if (row >= p.rows) {
		return;
	}
	const uint base = row * p.cols;
	float s = 0.0;
	for (uint i = 0; i < p.cols; i++) {
		const float v = data_x[base + i];
		s += v * v;
	}
	const float scale = inversesqrt(s / float(p.cols) + p.eps);
	for (uint i = 0; i < p.cols; i++) {
#ifdef MUL
		data_y[base + i] = data_x[base + i] * scale * data_w[i];
#else
		data_y[base + i] = data_x[base + i] * scale;
#endif
	}
}
#else
void main() {
	const uint row = group_id();
	if (row >= p.rows) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint base = row * p.cols;
	float s = 0.0;
	for (uint i = t; i < p.cols; i += WG) {
		const float v = data_x[base + i];
		s += v * v;
	}
	s = wg_sum(s);
	const float scale = inversesqrt(s / float(p.cols) + p.eps);
	for (uint i = t; i < p.cols; i += WG) {
#ifdef MUL
		data_y[base + i] = data_x[base + i] * scale * data_w[i];
#else
		data_y[base + i] = data_x[base + i] * scale;
#endif
	}
}
#endif
