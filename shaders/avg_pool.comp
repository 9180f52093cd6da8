#version 450
// avg_pool: k x k average pooling of a grid of tokens. The input is
// [h*w][c] f32, token (y, x) at row y*w+x; output token (oy, ox), row
// oy*(w/k)+ox, is the mean of the k x k tokens from (oy*k, ox*k) (Gemma 3's
// pooling of SigLIP patches, ggml_pool_2d AVG with stride k and no
// padding). One invocation per output value. CPU reference: engine/ops
// RefAvgPool.
// variant: avg_pool_f32
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint h, w, c, k;
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	const uint ow = p.w / p.k;
	const uint n = (p.h / p.k) * ow * p.c;
	if (i >= n) {
		return;
	}
	const uint tok = i / p.c, ch = i % p.c;
	const uint y0 = tok / ow * p.k, x0 = tok % ow * p.k;
	float s = 0.0;
	for (uint y = y0; y < y0 + p.k; y++) {
		for (uint x = x0; x < x0 + p.k; x++) {
			s += data_x[(y * p.w + x) * p.c + ch];
		}
	}
	data_y[i] = s / float(p.k * p.k);
}
