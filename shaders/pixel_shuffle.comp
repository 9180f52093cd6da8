#version 450
// pixel_shuffle: merges each k x k square of a token grid into one token
// (Idefics3 / SmolVLM "pixel shuffle", the reference's
// build_patch_merge_permute). The input is [h*w][c] f32, token (y, x) at row
// y*w+x; output token (by, bx), row by*(w/k)+bx, holds k*k*c values, value
// dy*k*c + dx*c + ch being channel ch of token (by*k+dy, bx*k+dx). One
// invocation per output value. CPU reference: engine/ops RefPixelShuffle.
// variant: pixel_shuffle_f32
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint h, w, c, k;
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	const uint ow = p.w / p.k, cols = p.k * p.k * p.c;
	const uint n = (p.h / p.k) * ow * cols;
	if (i >= n) {
		return;
	}
	const uint tok = i / cols, col = i % cols;
	const uint dy = col / (p.k * p.c), dx = col / p.c % p.k, ch = col % p.c;
	const uint y = tok / ow * p.k + dy, x = tok % ow * p.k + dx;
	data_y[i] = data_x[(y * p.w + x) * p.c + ch];
}
