#version 450
// flash_attn computes, for each row and query head h,
//   out = sum_j softmax_j(scale * q . K[j]) V[j]
// over the positions of the row's slot in the paged f16 cache
// [page][position in page][kv_head][head_dim] (kv_row, attention.glsl),
// with kv_head = h / (heads / kv_heads) (GQA). Causal rows see positions
// 0..pos[row] (with a sliding window of w > 0 positions only
// pos[row]-w+1..pos[row]); non-causal rows see 0..n_kv-1; rows with an
// out-of-range slot get zeros. With softcap > 0 each scaled score s becomes
// softcap * tanh(s / softcap) (Gemma 2). With sinks != 0 each head's
// softmax also counts its sink logit (attention.glsl; split 0 of the
// _split variants carries it).
//
// One workgroup serves one row and GPW query heads that share a kv head,
// so each K and V row is read once for all of them. It walks the keys in
// tiles of WG: each invocation scores one key against the GPW queries, the
// tile's max and sum update a running (max, sum) per head and the output
// accumulators are rescaled (online softmax): no n_ctx-sized scratch. q,
// out: [row][head][head_dim] f32. CPU reference: engine/ops RefAttention.
//
// The _split variants (flash decoding) give each workgroup only the keys
// [split * split_len, (split + 1) * split_len) of the row's range (counted
// from its first key, after the window) and write the unnormalised
// partial result (max, sum, accumulator[head_dim]) to a scratch buffer
// [row][head][split][head_dim + 2]; attn_combine.comp merges the splits.
// They keep a GPU busy when rows * heads is small (decoding).
//
// With tile_rows > 0 flash_attn_tiled (attention_tiled.comp) is dispatched
// over tiles of tile_rows rows as well, and a workgroup here serves only
// rows of tiles that kernel leaves: those whose rows have several slots.
// variant: flash_attn_f32_f16 -DUSE_F16=1
// variant: flash_attn_f32_f16_sg -DUSE_F16=1 -DUSE_SUBGROUP=1
// variant: flash_attn_split_f32_f16 -DUSE_F16=1 -DSPLIT=1
// variant: flash_attn_split_f32_f16_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1
// variant: flash_attn_f32_f16_q8_0 -DUSE_F16=1 -DV_Q8_0=1
// variant: flash_attn_f32_f16_q4_0 -DUSE_F16=1 -DV_Q4_0=1
// variant: flash_attn_f32_q8_0_f16 -DUSE_F16=1 -DK_Q8_0=1
// variant: flash_attn_f32_q8_0_q8_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q8_0=1
// variant: flash_attn_f32_q8_0_q4_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q4_0=1
// variant: flash_attn_f32_q4_0_f16 -DUSE_F16=1 -DK_Q4_0=1
// variant: flash_attn_f32_q4_0_q8_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q8_0=1
// variant: flash_attn_f32_q4_0_q4_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q4_0=1
// variant: flash_attn_f32_f16_q8_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DV_Q8_0=1
// variant: flash_attn_f32_f16_q4_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DV_Q4_0=1
// variant: flash_attn_f32_q8_0_f16_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DK_Q8_0=1
// variant: flash_attn_f32_q8_0_q8_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DK_Q8_0=1 -DV_Q8_0=1
// variant: flash_attn_f32_q8_0_q4_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DK_Q8_0=1 -DV_Q4_0=1
// variant: flash_attn_f32_q4_0_f16_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DK_Q4_0=1
// variant: flash_attn_f32_q4_0_q8_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DK_Q4_0=1 -DV_Q8_0=1
// variant: flash_attn_f32_q4_0_q4_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DK_Q4_0=1 -DV_Q4_0=1
// variant: flash_attn_split_f32_f16_q8_0 -DUSE_F16=1 -DSPLIT=1 -DV_Q8_0=1
// variant: flash_attn_split_f32_f16_q4_0 -DUSE_F16=1 -DSPLIT=1 -DV_Q4_0=1
// variant: flash_attn_split_f32_q8_0_f16 -DUSE_F16=1 -DSPLIT=1 -DK_Q8_0=1
// variant: flash_attn_split_f32_q8_0_q8_0 -DUSE_F16=1 -DSPLIT=1 -DK_Q8_0=1 -DV_Q8_0=1
// variant: flash_attn_split_f32_q8_0_q4_0 -DUSE_F16=1 -DSPLIT=1 -DK_Q8_0=1 -DV_Q4_0=1
// variant: flash_attn_split_f32_q4_0_f16 -DUSE_F16=1 -DSPLIT=1 -DK_Q4_0=1
// variant: flash_attn_split_f32_q4_0_q8_0 -DUSE_F16=1 -DSPLIT=1 -DK_Q4_0=1 -DV_Q8_0=1
// variant: flash_attn_split_f32_q4_0_q4_0 -DUSE_F16=1 -DSPLIT=1 -DK_Q4_0=1 -DV_Q4_0=1
// variant: flash_attn_split_f32_f16_q8_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DV_Q8_0=1
// variant: flash_attn_split_f32_f16_q4_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DV_Q4_0=1
// variant: flash_attn_split_f32_q8_0_f16_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DK_Q8_0=1
// variant: flash_attn_split_f32_q8_0_q8_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DK_Q8_0=1 -DV_Q8_0=1
// variant: flash_attn_split_f32_q8_0_q4_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DK_Q8_0=1 -DV_Q4_0=1
// variant: flash_attn_split_f32_q4_0_f16_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DK_Q4_0=1
// variant: flash_attn_split_f32_q4_0_q8_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DK_Q4_0=1 -DV_Q8_0=1
// variant: flash_attn_split_f32_q4_0_q4_0_sg -DUSE_F16=1 -DUSE_SUBGROUP=1 -DSPLIT=1 -DK_Q4_0=1 -DV_Q4_0=1
#include "common.glsl"

// GPW query heads per workgroup (divides heads / kv_heads, at most 8);
// HEAD_DIM sizes the shared arrays (>= head_dim).
layout(constant_id = 1) const uint GPW = 1;
layout(constant_id = 2) const uint HEAD_DIM = 128;
#define MAX_GPW 8

#include "attention.glsl"

// q and the tile's probabilities are read by every invocation in the inner
// loops, so they are stored as vec4s: one shared load serves four lanes of
// work (shared loads dominate on CPU drivers such as lavapipe).
#define QV ((HEAD_DIM + 3) / 4)
#define PG ((GPW + 3) / 4)
// VEC_V: the vector path for V (see main); DV vec4s per head row, KG key
// groups per tile.
const uint VEC_V = (HEAD_DIM % 4 == 0 ? 1u : 0u) * (WG >= HEAD_DIM / 4 ? 1u : 0u);
const uint DV = HEAD_DIM >= 4 ? HEAD_DIM / 4 : 1;
const uint KG = WG / DV;
shared vec4 q_s[GPW * QV];    // head g, dims 4i..4i+3 at g * QV + i
shared float acc_s[GPW * HEAD_DIM];
shared vec4 p_s[PG * WG];     // head g, key k at (g / 4) * WG + k, component g % 4
shared float red_s[GPW * WG];
shared uint row_s[WG]; // the cache offset of each key of the tile

// reduce_max / reduce_sum combine v[g] over the workgroup for every g < GPW;
// all invocations get the results in v. Uniform control flow only.
void reduce_max(inout float v[MAX_GPW]) {
	const uint t = gl_LocalInvocationID.x;
#ifdef USE_SUBGROUP
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		v[g] = subgroupMax(v[g]);
		if (subgroupElect()) {
			red_s[g * WG + gl_SubgroupID] = v[g];
		}
	}
	barrier();
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		float m = NEG_INF;
		for (uint i = 0; i < gl_NumSubgroups; i++) {
			m = max(m, red_s[g * WG + i]);
		}
		v[g] = m;
	}
	barrier();
#else
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		red_s[g * WG + t] = v[g];
	}
	barrier();
	for (uint s = WG / 2; s > 0; s >>= 1) {
		if (t < s) {
			[[unroll]] for (uint g = 0; g < GPW; g++) {
				red_s[g * WG + t] = max(red_s[g * WG + t], red_s[g * WG + t + s]);
			}
		}
		barrier();
	}
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		v[g] = red_s[g * WG];
	}
	barrier();
#endif
}

void reduce_sum(inout float v[MAX_GPW]) {
	const uint t = gl_LocalInvocationID.x;
#ifdef USE_SUBGROUP
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		v[g] = subgroupAdd(v[g]);
		if (subgroupElect()) {
			red_s[g * WG + gl_SubgroupID] = v[g];
		}
	}
	barrier();
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		float s = 0.0;
		for (uint i = 0; i < gl_NumSubgroups; i++) {
			s += red_s[g * WG + i];
		}
		v[g] = s;
	}
	barrier();
#else
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		red_s[g * WG + t] = v[g];
	}
	barrier();
	for (uint s = WG / 2; s > 0; s >>= 1) {
		if (t < s) {
			[[unroll]] for (uint g = 0; g < GPW; g++) {
				red_s[g * WG + t] += red_s[g * WG + t + s];
			}
		}
		barrier();
	}
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		v[g] = red_s[g * WG];
	}
	barrier();
#endif
}

void main() {
	const uint groups_per_row = p.heads / GPW;
#ifdef SPLIT
	const uint split = group_id() % p.n_split;
	const uint gid = group_id() / p.n_split;
#else
	const uint gid = group_id();
#endif
	if (gid >= p.rows * groups_per_row) {
		return;
	}
	const uint t = gl_LocalInvocationID.x;
	const uint row = gid / groups_per_row;
	if (tiled(row)) {
		return;
	}
	const uint h0 = (gid % groups_per_row) * GPW;
	const uint kvh = h0 / (p.heads / p.kv_heads);
	const uint D = p.head_dim;
	const int islot = data_slot[row], ipos = data_pos[row];
	const uint slot = uint(max(islot, 0));
	uint nk = p.causal != 0 ? uint(max(ipos + 1, 0)) : p.n_kv;
	nk = islot < 0 || uint(islot) >= p.n_slots ? 0 : min(nk, p.n_ctx); // bad rows read nothing
	// The first key a windowed row sees.
	const uint lo = p.causal != 0 && p.window != 0 && nk > p.window ? nk - p.window : 0;
#ifdef SPLIT
	// Split s takes keys lo + [s * split_len, (s + 1) * split_len) of the
	// row's range; the last one takes whatever is left, so a split_len
	// sized for shorter rows costs time, never keys.
	const uint kbeg = min(lo + split * p.split_len, nk);
	const uint kend = split + 1 == p.n_split ? nk : min(nk, kbeg + p.split_len);
#else
	const uint kbeg = lo, kend = nk;
#endif

	const uint qbase = (row * p.heads + h0) * D; // GPW consecutive heads
	for (uint i = t; i < GPW * QV; i += WG) {
		const uint g = i / QV, d = (i % QV) * 4;
		vec4 qv = vec4(0.0);
		[[unroll]] for (uint c = 0; c < 4; c++) {
			if (d + c < D) {
				qv[c] = data_q[qbase + g * D + d + c] * p.scale;
			}
		}
		q_s[i] = qv;
	}
	for (uint i = t; i < GPW * D; i += WG) {
		acc_s[i] = 0.0;
	}
	barrier();
	const uint kvoff = kvh * D; // the kv head within a position
	float m[MAX_GPW], l[MAX_GPW], s[MAX_GPW], alpha[MAX_GPW];
	// Vector path for V (head_dim % 4 == 0): invocation t owns dims
	// 4*d4..4*d4+3 of keys k = kq, kq + KG, ... of each tile, accumulating in
	// registers across tiles; the KG partial sums meet in acc_s at the end.
	const uint d4 = t % DV, kq = t / DV;
	vec4 acc4[MAX_GPW];
	[[unroll]] for (uint g = 0; g < GPW; g++) {
		m[g] = NEG_INF;
		l[g] = 0.0;
		acc4[g] = vec4(0.0);
	}
#ifdef SPLIT
	if (p.sinks != 0 && split == 0) {
#else
	if (p.sinks != 0) {
#endif
		// The sink as a key of value zero seen first (attention.glsl).
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			m[g] = data_sinks[h0 + g];
			l[g] = 1.0;
		}
	}
	for (uint j0 = kbeg; j0 < kend; j0 += WG) {
		const uint j = j0 + t;
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			s[g] = 0.0;
		}
		if (j < kend) {
			const uint kb = kv_row(slot, j) + kvoff;
			row_s[t] = kb;
			if (HEAD_DIM % 4 == 0) { // kb is then a multiple of 4 too
				for (uint d4 = 0; d4 < D / 4; d4++) {
					const vec4 kd = load_k4e(kb + 4 * d4);
					[[unroll]] for (uint g = 0; g < GPW; g++) {
						s[g] += dot(q_s[g * QV + d4], kd);
					}
				}
			} else {
				for (uint d = 0; d < D; d++) {
					const float kd = load_k1(kb + d);
					[[unroll]] for (uint g = 0; g < GPW; g++) {
						s[g] += q_s[g * QV + d / 4][d % 4] * kd;
					}
				}
			}
			if (p.softcap > 0.0) { // Gemma 2: softcap * tanh(score / softcap)
				[[unroll]] for (uint g = 0; g < GPW; g++) {
					s[g] = p.softcap * tanh_safe(s[g] / p.softcap);
				}
			}
		} else {
			[[unroll]] for (uint g = 0; g < GPW; g++) {
				s[g] = NEG_INF;
			}
		}
		float mt[MAX_GPW];
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			mt[g] = s[g];
		}
		reduce_max(mt);
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			const float mn = max(m[g], mt[g]);
			const float pj = j < kend ? exp(s[g] - mn) : 0.0;
			p_s[(g / 4) * WG + t][g % 4] = pj;
			alpha[g] = exp(m[g] - mn);
			m[g] = mn;
			s[g] = pj;
		}
		reduce_sum(s); // its barriers also publish p_s and row_s
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			l[g] = l[g] * alpha[g] + s[g];
		}
		const uint cnt = min(WG, kend - j0);
		if (VEC_V != 0u) {
			[[unroll]] for (uint g = 0; g < GPW; g++) {
				acc4[g] *= alpha[g];
			}
			if (kq < KG) {
				for (uint k = kq; k < cnt; k += KG) {
					const vec4 vd = load_v4e(row_s[k] + 4 * d4);
					[[unroll]] for (uint gq = 0; gq < PG; gq++) {
						const vec4 pk = p_s[gq * WG + k];
						[[unroll]] for (uint c = 0; c < 4; c++) {
							if (gq * 4 + c < GPW) {
								acc4[gq * 4 + c] += pk[c] * vd;
							}
						}
					}
				}
			}
		} else {
			for (uint d = t; d < D; d += WG) {
				float a[MAX_GPW];
				[[unroll]] for (uint g = 0; g < GPW; g++) {
					a[g] = acc_s[g * D + d] * alpha[g];
				}
				for (uint k = 0; k < cnt; k++) {
					const float vd = load_v1(row_s[k] + d);
					[[unroll]] for (uint gq = 0; gq < PG; gq++) {
						const vec4 pk = p_s[gq * WG + k];
						[[unroll]] for (uint c = 0; c < 4; c++) {
							if (gq * 4 + c < GPW) {
								a[gq * 4 + c] += pk[c] * vd;
							}
						}
					}
				}
				[[unroll]] for (uint g = 0; g < GPW; g++) {
					acc_s[g * D + d] = a[g];
				}
			}
		}
		barrier(); // p_s is rewritten by the next tile
	}
	if (VEC_V != 0u) {
		for (uint r = 0; r < KG; r++) {
			if (kq == r) {
				[[unroll]] for (uint g = 0; g < GPW; g++) {
					[[unroll]] for (uint c = 0; c < 4; c++) {
						acc_s[g * D + 4 * d4 + c] += acc4[g][c];
					}
				}
			}
			barrier();
		}
	}
#ifdef SPLIT
	// Partial result of head h0+g: [max, sum, acc[D]] at its split's slot.
	const uint pstride = D + 2;
	for (uint i = t; i < GPW * D; i += WG) {
		const uint g = i / D;
		data_o[((row * p.heads + h0 + g) * p.n_split + split) * pstride + 2 + i % D] = acc_s[i];
	}
	if (t == 0) {
		[[unroll]] for (uint g = 0; g < GPW; g++) {
			const uint b = ((row * p.heads + h0 + g) * p.n_split + split) * pstride;
			data_o[b] = m[g];
			data_o[b + 1] = l[g];
		}
	}
#else
	for (uint i = t; i < GPW * D; i += WG) {
		const float li = l[i / D];
		data_o[qbase + i] = li > 0.0 ? acc_s[i] / li : 0.0;
	}
#endif
}
