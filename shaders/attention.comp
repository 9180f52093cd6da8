#version 450
// flash_attn computes, for each row and query head h,
//   out = sum_j softmax_j(scale * q . K[j]) V[j]
// over the f16 cache [slot][position][kv_head][head_dim] of the row's slot,
// kv_head = h / (heads / kv_heads) (GQA). Causal rows see positions
// 0..pos[row]; non-causal rows see 0..n_kv-1; rows with an out-of-range
// slot get zeros. One workgroup per (row, head)
// walks the keys in tiles of WG: each invocation scores one key, the tile's
// max and sum update a running (max, sum) pair and the output accumulator
// is rescaled (online softmax), so no n_ctx-sized scratch exists. q, out:
// [row][head][head_dim] f32. CPU reference: engine/ops RefAttention.
// variant: flash_attn_f32_f16 -DUSE_F16=1
// variant: flash_attn_f32_f16_sg -DUSE_F16=1 -DUSE_SUBGROUP=1
#include "common.glsl"
#include "reduce.glsl"

#define MAX_HEAD_DIM 256

layout(binding = 0) readonly buffer Q { float data_q[]; };
layout(binding = 1) readonly buffer K { float16_t data_k[]; };
layout(binding = 2) readonly buffer V { float16_t data_v[]; };
layout(binding = 3) readonly buffer S { int data_slot[]; };
layout(binding = 4) readonly buffer P { int data_pos[]; };
layout(binding = 5) writeonly buffer O { float data_o[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint heads;
	uint kv_heads;
	uint head_dim;
	uint n_ctx;
	uint n_slots;
	uint n_kv; // keys seen by non-causal rows
	uint causal;
	float scale;
} p;

shared float q_s[MAX_HEAD_DIM];
shared float acc_s[MAX_HEAD_DIM];
shared float p_s[WG];

void main() {
	const uint gid = group_id();
	if (gid >= p.rows * p.heads) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint row = gid / p.heads, h = gid % p.heads;
	const uint kvh = h / (p.heads / p.kv_heads);
	const uint D = p.head_dim;
	const int islot = data_slot[row], ipos = data_pos[row];
	const uint slot = uint(max(islot, 0));
	uint nk = p.causal != 0 ? uint(max(ipos + 1, 0)) : p.n_kv;
	nk = islot < 0 || uint(islot) >= p.n_slots ? 0 : min(nk, p.n_ctx); // bad rows read nothing
	const uint qbase = gid * D;
	for (uint d = t; d < D; d += WG) {
		q_s[d] = data_q[qbase + d];
		acc_s[d] = 0.0;
	}
	barrier();
	const uint stride = p.kv_heads * D; // elements per position
	const uint kvbase = slot * p.n_ctx * stride + kvh * D;
	float m = NEG_INF, l = 0.0;
	for (uint j0 = 0; j0 < nk; j0 += WG) {
		const uint j = j0 + t;
		float s = NEG_INF;
		if (j < nk) {
			const uint kb = kvbase + j * stride;
			float dot = 0.0;
			for (uint d = 0; d < D; d++) {
				dot += q_s[d] * float(data_k[kb + d]);
			}
			s = dot * p.scale;
		}
		const float mn = max(m, wg_max(s));
		const float pj = j < nk ? exp(s - mn) : 0.0;
		p_s[t] = pj;
		const float lt = wg_sum(pj); // its barriers also publish p_s
		const float alpha = exp(m - mn);
		l = l * alpha + lt;
		m = mn;
		const uint cnt = min(WG, nk - j0);
		for (uint d = t; d < D; d += WG) {
			float a = acc_s[d] * alpha;
			for (uint k = 0; k < cnt; k++) {
				a += p_s[k] * float(data_v[kvbase + (j0 + k) * stride + d]);
			}
			acc_s[d] = a;
		}
		barrier(); // p_s is rewritten by the next tile
	}
	const float inv = l > 0.0 ? 1.0 / l : 0.0;
	for (uint d = t; d < D; d += WG) {
		data_o[qbase + d] = acc_s[d] * inv;
	}
}
