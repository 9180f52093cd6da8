#version 450
// flash_attn_rows is flash_attn (attention.comp) for CPU devices: one
// invocation, not one workgroup, serves one row and GPW query heads that
// share a kv head, walking the row's keys one at a time with an online
// softmax in registers. It has no shared memory and no barriers: a CPU
// driver (lavapipe) runs a workgroup as SIMD lanes and pays a context
// switch per barrier and a per-lane loop per load whatever the address,
// so flash_attn's tiles of keys, reductions and shared q cost it far more
// than the arithmetic of a decode row. Same bindings, push constants and
// results as flash_attn (rows with an out-of-range slot get zeros; sliding
// window, soft-capping and attention sinks as there; with tile_rows > 0 it
// leaves the rows of flash_attn_tiled's tiles alone).
// The loops over the head dimension are unrolled: lavapipe ends a shader's
// loops after 65535 iterations in all, which the key loop alone must stay
// under (engine/ops cpuRowsMaxKeys; TestAttentionLongContext).
// CPU reference: engine/ops RefAttention.
// variant: flash_attn_rows_f32_f16 -DUSE_F16=1
// variant: flash_attn_rows_f32_f16_q8_0 -DUSE_F16=1 -DV_Q8_0=1
// variant: flash_attn_rows_f32_f16_q4_0 -DUSE_F16=1 -DV_Q4_0=1
// variant: flash_attn_rows_f32_q8_0_f16 -DUSE_F16=1 -DK_Q8_0=1
// variant: flash_attn_rows_f32_q8_0_q8_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q8_0=1
// variant: flash_attn_rows_f32_q8_0_q4_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q4_0=1
// variant: flash_attn_rows_f32_q4_0_f16 -DUSE_F16=1 -DK_Q4_0=1
// variant: flash_attn_rows_f32_q4_0_q8_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q8_0=1
// variant: flash_attn_rows_f32_q4_0_q4_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q4_0=1
#include "common.glsl"

// GPW query heads per invocation (divides heads / kv_heads); HEAD_DIM is
// the head dimension itself (the push constant's head_dim).
layout(constant_id = 1) const uint GPW = 1;
layout(constant_id = 2) const uint HEAD_DIM = 128;
#define MAX_GPW 8
#define DV ((HEAD_DIM + 3) / 4)

#include "attention.glsl"

void main() {
	const uint groups_per_row = p.heads / GPW;
	const uint gid = group_id() * WG + gl_LocalInvocationID.x;
	if (gid >= p.rows * groups_per_row) {
		return;
	}
	const uint row = gid / groups_per_row;
	if (tiled(row)) {
		return;
	}
	const uint h0 = (gid % groups_per_row) * GPW;
	const uint kvh = h0 / (p.heads / p.kv_heads);
	const int islot = data_slot[row], ipos = data_pos[row];
	const uint slot = uint(max(islot, 0));
	uint nk = p.causal != 0 ? uint(max(ipos + 1, 0)) : p.n_kv;
	nk = islot < 0 || uint(islot) >= p.n_slots ? 0 : min(nk, p.n_ctx); // bad rows read nothing
	// The first key a windowed row sees.
	const uint lo = p.causal != 0 && p.window != 0 && nk > p.window ? nk - p.window : 0;

	// q of head h0+g, dims 4i..4i+3, scaled, at q[g * DV + i] (zero past
	// head_dim).
	const uint qbase = (row * p.heads + h0) * HEAD_DIM;
	vec4 q[MAX_GPW * DV];
	vec4 acc[MAX_GPW * DV];
	float m[MAX_GPW], l[MAX_GPW];
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		[[unroll]] for (uint i = 0; i < DV; i++) {
			vec4 v = vec4(0.0);
			[[unroll]] for (uint c = 0; c < 4; c++) {
				if (4 * i + c < HEAD_DIM) {
					v[c] = data_q[qbase + g * HEAD_DIM + 4 * i + c] * p.scale;
				}
			}
			q[g * DV + i] = v;
			acc[g * DV + i] = vec4(0.0);
		}
		m[g] = NEG_INF;
		l[g] = 0.0;
		if (p.sinks != 0) { // the sink as a key of value zero seen first (attention.glsl)
			m[g] = data_sinks[h0 + g];
			l[g] = 1.0;
		}
	}
	const uint stride = p.kv_heads * HEAD_DIM; // elements per position
	const uint page_mask = (1u << p.page_shift) - 1u;
	uint kb = 0;
	for (uint j = lo; j < nk; j++, kb += stride) {
		if (j == lo || (j & page_mask) == 0) { // a new page: look it up
			kb = kv_row(slot, j) + kvh * HEAD_DIM;
		}
		float s[MAX_GPW];
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			s[g] = 0.0;
		}
		[[unroll]] for (uint i = 0; i < DV; i++) {
			vec4 kd;
			if (HEAD_DIM % 4 == 0) { // kb is then a multiple of 4 too
				kd = load_k4e(kb + 4 * i);
			} else {
				kd = vec4(0.0);
				[[unroll]] for (uint c = 0; c < 4; c++) {
					if (4 * i + c < HEAD_DIM) {
						kd[c] = load_k1(kb + 4 * i + c);
					}
				}
			}
			[[unroll]] for (uint g = 0; g < GPW; g++) {
				s[g] += dot(q[g * DV + i], kd);
			}
		}
		if (p.softcap > 0.0) { // Gemma 2: softcap * tanh(score / softcap)
			[[unroll]] for (uint g = 0; g < GPW; g++) {
				s[g] = p.softcap * tanh_safe(s[g] / p.softcap);
			}
		}
		float alpha[MAX_GPW];
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			const float mn = max(m[g], s[g]);
			alpha[g] = exp(m[g] - mn);
			s[g] = exp(s[g] - mn);
			l[g] = l[g] * alpha[g] + s[g];
			m[g] = mn;
		}
		[[unroll]] for (uint i = 0; i < DV; i++) {
			vec4 vd;
			if (HEAD_DIM % 4 == 0) {
				vd = load_v4e(kb + 4 * i);
			} else {
				vd = vec4(0.0);
				[[unroll]] for (uint c = 0; c < 4; c++) {
					if (4 * i + c < HEAD_DIM) {
						vd[c] = load_v1(kb + 4 * i + c);
					}
				}
			}
			[[unroll]] for (uint g = 0; g < GPW; g++) {
				acc[g * DV + i] = acc[g * DV + i] * alpha[g] + s[g] * vd;
			}
		}
	}
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		const float inv = l[g] > 0.0 ? 1.0 / l[g] : 0.0;
		[[unroll]] for (uint i = 0; i < DV; i++) {
			const vec4 v = acc[g * DV + i] * inv;
			[[unroll]] for (uint c = 0; c < 4; c++) {
				if (4 * i + c < HEAD_DIM) {
					data_o[qbase + g * HEAD_DIM + 4 * i + c] = v[c];
				}
			}
		}
	}
}
