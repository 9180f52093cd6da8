#version 450
// softcap: y = cap * tanh(x / cap), Gemma 2's final logit soft-capping
// (finite for any x). One invocation per element. CPU reference:
// engine/ops RefSoftCap.
// variant: softcap_f32
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint n;
	float cap;
} p;

// tanh_safe is tanh(z) without overflow for large |z| (1 - 2/(e^2|z| + 1))
// nor cancellation for small |z| (its Taylor series, error below 1e-7).
float tanh_safe(float z) {
	const float a = abs(z);
	if (a < 0.25) {
		const float z2 = z * z;
		return z * (1.0 - z2 * (1.0 / 3.0 - z2 * (2.0 / 15.0 - z2 * (17.0 / 315.0))));
	}
	return sign(z) * (1.0 - 2.0 / (exp(2.0 * a) + 1.0));
}

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.n) {
		return;
	}
	data_y[i] = p.cap * tanh_safe(data_x[i] / p.cap);
}
