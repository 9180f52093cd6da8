#version 450
// rope rotates pairs of q/k elements by position-dependent angles. Rows are
// [row][head][head_dim] f32 and row r has position pos[r]. Pair j (of
// head_dim/2) with 2j < rot_dims turns by
//   theta = pos * freq_scale * freq_base^(-2j/rot_dims) / factor[j]
// ("normal" mode pairs elements (2j, 2j+1); NeoX pairs (j, j + rot_dims/2))
// and cos and sin are multiplied by attn_factor. With ext_factor != 0
// (YaRN) the angle mixes the scaled and unscaled ones by a ramp over
// corr_dims and the magnitude grows by 1 + 0.1 ln(1/freq_scale), as the
// reference's rope_yarn. Elements from rot_dims on are copied. One
// invocation per pair. CPU reference: engine/ops RefRoPE.
// variant: rope_norm_f32
// variant: rope_neox_f32 -DNEOX=1
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer P { int data_pos[]; };
layout(binding = 2) readonly buffer F { float data_f[]; };
layout(binding = 3) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint heads;
	uint head_dim;
	uint rot_dims;
	float freq_base;
	float freq_scale;
	uint has_factors;
	float attn_factor;
	float ext_factor;
	float corr0, corr1;
} p;

void main() {
	const uint half_dim = p.head_dim / 2;
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.rows * p.heads * half_dim) {
		return;
	}
	const uint j = i % half_dim;
	const uint rh = i / half_dim; // row * heads + head
	const uint row = rh / p.heads;
	const uint base = rh * p.head_dim;
	if (2 * j >= p.rot_dims) {
		data_y[base + 2 * j] = data_x[base + 2 * j];
		data_y[base + 2 * j + 1] = data_x[base + 2 * j + 1];
		return;
	}
#ifdef NEOX
	const uint i0 = j, i1 = j + p.rot_dims / 2;
#else
	const uint i0 = 2 * j, i1 = 2 * j + 1;
#endif
	float extrap = float(data_pos[row]) * pow(p.freq_base, -float(2 * j) / float(p.rot_dims));
	if (p.has_factors != 0) {
		extrap /= data_f[j];
	}
	float theta = p.freq_scale * extrap;
	float mscale = p.attn_factor;
	if (p.ext_factor != 0.0) {
		const float y = (float(j) - p.corr0) / max(0.001, p.corr1 - p.corr0);
		const float ramp = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
		theta = theta * (1.0 - ramp) + extrap * ramp;
		mscale *= 1.0 + 0.1 * log(1.0 / p.freq_scale);
	}
	const float c = cos(theta) * mscale, s = sin(theta) * mscale;
	const float x0 = data_x[base + i0], x1 = data_x[base + i1];
	data_y[base + i0] = x0 * c - x1 * s;
	data_y[base + i1] = x0 * s + x1 * c;
}
