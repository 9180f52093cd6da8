#version 450
// geglu: y = gelu(g) * u, the gated FFN activation of Gemma (g and u are the
// gate and up projections; GELU in its tanh approximation, as ggml_gelu).
// One invocation per element. CPU reference: engine/ops RefGeGLU.
// variant: geglu_f32
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
	// 0.5 * (1 + tanh(z)) == 1 / (1 + exp(-2z)), as unary.comp's GELU.
	const float z = 0.7978845608028654 * g * (1.0 + 0.044715 * g * g);
	data_y[i] = g / (1.0 + exp(-2.0 * z)) * data_u[i];
}
