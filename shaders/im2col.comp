#version 450
// im2col: unfolds an image into patches for the patch embedding (a
// convolution with stride = kernel = P as one matrix product). The image is
// planar f32 [C][H][W]; patch (py, px), row py*(W/P)+px of the output,
// holds the C*P*P pixels [c][ky][kx] of its P x P square, matching a
// convolution kernel stored [out][C][P][P]. With round set the values are
// rounded to f16 (the reference unfolds into f16 for an f16 kernel). One
// invocation per output value. CPU reference: engine/ops RefIm2Col.
// variant: im2col_f32
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint c, h, w, p; // channels, image height and width, patch side
	uint round;      // 1: round to f16
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	const uint pw = p.w / p.p;
	const uint cols = p.c * p.p * p.p;
	const uint n = (p.h / p.p) * pw * cols;
	if (i >= n) {
		return;
	}
	const uint pt = i / cols, col = i % cols;
	const uint ch = col / (p.p * p.p), ky = col / p.p % p.p, kx = col % p.p;
	const uint y = pt / pw * p.p + ky, x = pt % pw * p.p + kx;
	float v = data_x[(ch * p.h + y) * p.w + x];
	if (p.round != 0) {
		v = unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x;
	}
	data_y[i] = v;
}
