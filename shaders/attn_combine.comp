#version 450
// attn_combine merges the per-split partial results of flash_attn_split
// ([row][head][split][max, sum, acc[head_dim]]) into the attention output
// [row][head][head_dim]: with M the largest split max,
//   out = sum_s acc_s * exp(max_s - M) / sum_s sum_s * exp(max_s - M).
// Splits that saw no keys have max = -inf and sum 0. An attention sink
// needs nothing here: split 0 counted it in its max and sum. One workgroup
// per (row, head). CPU reference: engine/ops RefAttention.
// variant: attn_combine_f32
#include "common.glsl"

layout(binding = 0) readonly buffer P { float data_p[]; };
layout(binding = 1) writeonly buffer O { float data_o[]; };

layout(push_constant) uniform Params {
	uint rows_heads;
	uint head_dim;
	uint n_split;
} p;

void main() {
	const uint rh = group_id();
	if (rh >= p.rows_heads) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint pstride = p.head_dim + 2;
	const uint base = rh * p.n_split * pstride;
	float M = NEG_INF;
	for (uint s = 0; s < p.n_split; s++) {
		M = max(M, data_p[base + s * pstride]);
	}
	float L = 0.0;
	for (uint s = 0; s < p.n_split; s++) {
		const float ms = data_p[base + s * pstride];
		if (ms != NEG_INF) {
			L += data_p[base + s * pstride + 1] * exp(ms - M);
		}
	}
	for (uint d = t; d < p.head_dim; d += WG) {
		float a = 0.0;
		for (uint s = 0; s < p.n_split; s++) {
			const float ms = data_p[base + s * pstride];
			if (ms != NEG_INF) {
				a += data_p[base + s * pstride + 2 + d] * exp(ms - M);
			}
		}
		data_o[rh * p.head_dim + d] = L > 0.0 ? a / L : 0.0;
	}
}
