#version 450
// swiglu: y = silu(g) * u, the gated FFN activation (g and u are the gate
// and up projections). CPU reference: engine/ops RefSwiGLU.
// variant: swiglu_f32
#include "common.glsl"

layout(binding = 0) readonly buffer G { float data_g[]; };
layout(binding = 1) readonly buffer U { float data_u[]; };
layout(binding = 2) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint n;
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.n) {
		return;
	}
	const float g = data_g[i];
	data_y[i] = g / (1.0 + exp(-g)) * data_u[i];
}
