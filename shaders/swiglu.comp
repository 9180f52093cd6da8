#version 450
// swiglu: y = silu(g) * u, the gated FFN activation (g and u are the gate
// and up projections). The _oai variant is gpt-oss's: the gate clamped to
// at most 7, the up projection to [-7, 7], y = (u + 1) * g * sigmoid(1.702 g).
// CPU references: engine/ops RefSwiGLU, RefSwiGLUOAI.
// variant: swiglu_f32
// variant: swiglu_oai_f32 -DOAI=1
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
#if defined(OAI)
	const float g = min(data_g[i], 7.0);
	const float u = clamp(data_u[i], -7.0, 7.0);
	data_y[i] = g / (1.0 + exp(-1.702 * g)) * (u + 1.0);
#else
	const float g = data_g[i];
	data_y[i] = g / (1.0 + exp(-g)) * data_u[i];
#endif
}
