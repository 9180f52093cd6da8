#version 450
// attn_batch is the attention of encoders, which keep no KV cache: each
// row and query head computes
//   out = sum_j softmax_j(scale * q . k[j]) v[j]
// over the rows j of its own sequence in the batch. A sequence's rows are
// consecutive, at positions 0..n-1, so row r sees rows r - pos[r] up to
// end[r] - 1 (end is one past its sequence's last row), in both
// directions. q, out: [row][head][head_dim] f32; k, v: [row][kv_head]
// [head_dim] f32; kv_head = head / (heads / kv_heads).
//
// One workgroup per (row, head) walks the keys in tiles of WG: each
// invocation scores one key, the tile's max and sum update a running
// (max, sum) (online softmax), and invocation t accumulates the output
// dimensions t, t + WG, ... CPU reference: engine/ops RefAttentionBatch.
// variant: attn_batch_f32
// variant: attn_batch_f32_sg -DUSE_SUBGROUP=1
#include "common.glsl"
#include "reduce.glsl"

layout(binding = 0) readonly buffer Q { float data_q[]; };
layout(binding = 1) readonly buffer K { float data_k[]; };
layout(binding = 2) readonly buffer V { float data_v[]; };
layout(binding = 3) readonly buffer P { int data_pos[]; };
layout(binding = 4) readonly buffer E { int data_end[]; };
layout(binding = 5) writeonly buffer O { float data_o[]; };
layout(binding = 6) readonly buffer Sk { float data_sinks[]; }; // [heads] when sinks != 0

layout(push_constant) uniform Params {
	uint rows;
	uint heads;
	uint kv_heads;
	uint head_dim; // at most MAX_D
	float scale;
	uint sinks; // 1: data_sinks holds one logit per query head
} p;

#define MAX_D 256
// Output dimensions per invocation: WG is at least 32 (Kernels.WG).
#define MAX_ACC (MAX_D / 32)

shared float q_s[MAX_D];
shared float p_s[WG];

void main() {
	const uint rh = group_id();
	if (rh >= p.rows * p.heads) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint row = rh / p.heads, h = rh % p.heads;
	const uint kvh = h / (p.heads / p.kv_heads);
	const uint D = p.head_dim;
	const uint beg = uint(max(int(row) - data_pos[row], 0));
	const uint end = min(uint(max(data_end[row], 0)), p.rows);
	for (uint d = t; d < D; d += WG) {
		q_s[d] = data_q[rh * D + d] * p.scale;
	}
	barrier();
	const uint stride = p.kv_heads * D; // elements per row of k and v
	float acc[MAX_ACC];
	[[unroll]] for (uint i = 0; i < MAX_ACC; i++) {
		acc[i] = 0.0;
	}
	float m = NEG_INF, l = 0.0;
	if (p.sinks != 0) {
		// Attention sinks: the head's logit data_sinks[h] counts in the
		// softmax's max and denominator with no value, as a key of value
		// zero seen first (attention.glsl).
		m = data_sinks[h];
		l = 1.0;
	}
	for (uint j0 = beg; j0 < end; j0 += WG) {
		const uint j = j0 + t;
		float s = NEG_INF;
		if (j < end) {
			s = 0.0;
			const uint kb = j * stride + kvh * D;
			for (uint d = 0; d < D; d++) {
				s += q_s[d] * data_k[kb + d];
			}
		}
		const float mn = max(m, wg_max(s));
		const float pj = j < end ? exp(s - mn) : 0.0;
		p_s[t] = pj;
		const float alpha = exp(m - mn); // 0 on the first tile (m = -inf)
		l = l * alpha + wg_sum(pj);      // its barriers also publish p_s
		m = mn;
		const uint cnt = min(WG, end - j0);
		[[unroll]] for (uint i = 0; i < MAX_ACC; i++) {
			const uint d = i * WG + t;
			if (d < D) {
				float a = acc[i] * alpha;
				uint vb = j0 * stride + kvh * D + d;
				for (uint c = 0; c < cnt; c++, vb += stride) {
					a += p_s[c] * data_v[vb];
				}
				acc[i] = a;
			}
		}
		barrier(); // p_s is rewritten by the next tile
	}
	[[unroll]] for (uint i = 0; i < MAX_ACC; i++) {
		const uint d = i * WG + t;
		if (d < D) {
			data_o[rh * D + d] = l > 0.0 ? acc[i] / l : 0.0;
		}
	}
}
