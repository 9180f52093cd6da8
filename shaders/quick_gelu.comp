#version 450
// quick_gelu: y = x * sigmoid(1.702 x), CLIP's activation (ggml_gelu_quick).
// One invocation per element. CPU reference: engine/ops RefQuickGELU.
// variant: quick_gelu_f32
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint n;
	float unused;
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.n) {
		return;
	}
	const float x = data_x[i];
	// x / (1 + e^(-1.702x)) is finite for any x: the denominator grows to
	// +inf for large negative x (giving -0) and tends to 1 for large x.
	data_y[i] = x / (1.0 + exp(-1.702 * x));
}
