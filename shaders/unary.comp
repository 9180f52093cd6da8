#version 450
// unary: element-wise y = f(x): scale (x * s), GELU (tanh approximation, as
// ggml_gelu), SiLU (x * sigmoid(x)) and sigmoid (1 / (1 + exp(-x))). One
// invocation per element. CPU reference: engine/ops RefScale, RefGELU,
// RefSiLU, RefSigmoid.
// variant: scale_f32 -DOP_SCALE=1
// variant: gelu_f32 -DOP_GELU=1
// variant: silu_f32 -DOP_SILU=1
// variant: sigmoid_f32 -DOP_SIGMOID=1
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint n;
	float s;
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.n) {
		return;
	}
	const float x = data_x[i];
#if defined(OP_SCALE)
	data_y[i] = x * p.s;
#elif defined(OP_GELU)
	// 0.5 * (1 + tanh(z)) == 1 / (1 + exp(-2z)): finite for any z and no
	// cancellation for large negative x.
	const float z = 0.7978845608028654 * x * (1.0 + 0.044715 * x * x);
	data_y[i] = x / (1.0 + exp(-2.0 * z));
#elif defined(OP_SIGMOID)
	data_y[i] = 1.0 / (1.0 + exp(-x));
#else
	data_y[i] = x / (1.0 + exp(-x));
#endif
}
