#version 450
// flash_attn_tiled computes what flash_attn (attention.comp) computes, for
// prompt processing: one workgroup serves ROWS consecutive batch rows times
// GPW query heads sharing a kv head, Q = ROWS * GPW queries in all, so each
// K and V row of a key tile is read once for all of them and the tile's
// barriers are paid once per ROWS rows (FlashAttention-2 style).
//
// A tile of rows serves only rows of one slot: if the rows of a tile with
// an in-range slot do not all share it, the workgroup returns and
// flash_attn, dispatched with tile_rows = ROWS, serves them (tile_slot is
// mirrored there). Within a tile each row bounds its own keys (causal:
// 0..pos[row], at any position; non-causal: 0..n_kv-1), and the tile walks
// keys up to the most any of its rows sees; rows with an out-of-range slot
// get zeros.
//
// Per tile of BC keys j0..j0+BC-1, three phases separated by barriers:
//  1. scores: invocation c scores keys j0+c (and j0+c+WG, see KPL) against
//     the Q queries (q_s) and stores them in p_s (-inf past a row's keys);
//  2. softmax: invocation q < Q updates its query's running max m and sum l
//     from its BC scores, turns them into probabilities in place and
//     publishes the rescale factor alpha_s[q] (online softmax);
//  3. accumulate: each invocation owns QK queries times DM vec4s of the
//     output in registers (acc), rescales them by alpha and adds P V.
// No reduction crosses invocations, so nothing assumes a subgroup size.
// Attention sinks (sinks != 0) start each query's running max and sum at
// its head's sink logit and 1, as in attention.glsl.
// q, out: [row][head][head_dim] f32. CPU reference: engine/ops RefAttention.
// variant: flash_attn_tiled_f32_f16 -DUSE_F16=1
// variant: flash_attn_tiled_f32_f16_q8_0 -DUSE_F16=1 -DV_Q8_0=1
// variant: flash_attn_tiled_f32_f16_q4_0 -DUSE_F16=1 -DV_Q4_0=1
// variant: flash_attn_tiled_f32_q8_0_f16 -DUSE_F16=1 -DK_Q8_0=1
// variant: flash_attn_tiled_f32_q8_0_q8_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q8_0=1
// variant: flash_attn_tiled_f32_q8_0_q4_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q4_0=1
// variant: flash_attn_tiled_f32_q4_0_f16 -DUSE_F16=1 -DK_Q4_0=1
// variant: flash_attn_tiled_f32_q4_0_q8_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q8_0=1
// variant: flash_attn_tiled_f32_q4_0_q4_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q4_0=1
#include "common.glsl"

// GPW query heads per workgroup (divides heads / kv_heads); HEAD_DIM is
// head_dim; ROWS batch rows per workgroup. The Go side (attnTileFor)
// keeps Q <= MAX_Q, Q <= WG and DM * QK <= MAX_ACC.
layout(constant_id = 1) const uint GPW = 1;
layout(constant_id = 2) const uint HEAD_DIM = 128;
layout(constant_id = 3) const uint ROWS = 8;
#define MAX_Q 32
#define MAX_ACC 16

layout(binding = 0) readonly buffer Q_ { float data_q[]; };
#include "kv_types.glsl" // bindings 1 and 2: the K and V pools
layout(binding = 3) readonly buffer S { int data_slot[]; };
layout(binding = 4) readonly buffer P { int data_pos[]; };
layout(binding = 5) writeonly buffer O { float data_o[]; };
layout(binding = 6) readonly buffer T { int data_table[]; };
layout(binding = 7) readonly buffer Sk { float data_sinks[]; }; // [heads] when sinks != 0

// The push-constant block of attention.comp (AttnPush).
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
	uint split_len; // unused here
	uint n_split;   // unused here
	uint tile_rows; // ROWS
	uint window;    // unused here: windowed attention runs per row
	float softcap;  // unused here: so does soft-capped attention
	uint page_shift;   // log2 of the positions per page
	uint table_stride; // page-table entries per slot
	uint n_pages;      // pages in the K and V pools
	uint sinks;        // 1: data_sinks holds one logit per query head
} p;

// kv_row is attention.glsl's: the element offset of position j of slot in
// the paged cache.
uint kv_row(uint slot, uint j) {
	const int pg = data_table[slot * p.table_stride + (j >> p.page_shift)];
	const uint page = uint(clamp(pg, 0, int(p.n_pages) - 1));
	return ((page << p.page_shift) + (j & ((1u << p.page_shift) - 1u))) * (p.kv_heads * p.head_dim);
}

const uint Q = ROWS * GPW; // query q is head h0 + q % GPW of row row0 + q / GPW
const uint QV = (HEAD_DIM + 3) / 4; // vec4s per head row
// Phase 3 layout: DVP is QV rounded up to a power of two (QV <= 64); TD
// invocations share a query along its vec4s, NG groups of them split the
// queries: invocation t owns vec4s t % TD + m * TD (m < DM) of queries
// t / TD + k * NG (k < QK).
const uint QV1 = QV - 1;
const uint QV2 = QV1 | (QV1 >> 1);
const uint QV3 = QV2 | (QV2 >> 2);
const uint DVP = (QV3 | (QV3 >> 4)) + 1;
const uint TD = DVP < WG ? DVP : WG;
const uint NG = WG / TD;
const uint DM = DVP / TD;
const uint QK = (Q + NG - 1) / NG;
const uint QP = NG * QK; // query slots per key in p_s
// Keys per invocation in phase 1: two on small workgroups (CPU devices,
// where every shared load is a gather, so one q_s load serving two keys
// matters), one on GPUs. BC keys per tile.
#define MAX_KPL 2
const uint KPL = WG < 64 ? 2 : 1;
const uint BC = KPL * WG;

shared vec4 q_s[Q * QV]; // query q, dims 4i..4i+3 at q * QV + i (times scale)
// Scores, then probabilities, of key c for query q at float c * QP + pq(q):
// the QK queries of one phase-3 invocation are adjacent, read as vec4s.
shared vec4 p_s[(BC * QP + 3) / 4];
shared float alpha_s[Q];
shared float l_s[Q];
shared uint nk_s[ROWS]; // keys each row sees
shared uint row_s[BC];  // the cache offset of each key of the tile (kv head included)

uint pq(uint q) {
	return (q % NG) * QK + q / NG;
}

// tile_slot returns the slot shared by the rows row0..row0+ROWS-1 that have
// an in-range slot, -1 if none has, -2 if they have several.
int tile_slot(uint row0) {
	int s = -1;
	for (uint r = row0; r < min(row0 + ROWS, p.rows); r++) {
		const int sr = data_slot[r];
		if (sr < 0 || uint(sr) >= p.n_slots) {
			continue;
		}
		if (s >= 0 && sr != s) {
			return -2;
		}
		s = sr;
	}
	return s;
}

// row_keys is the number of keys row r sees (0 past the batch or with an
// out-of-range slot), as in attention.comp.
uint row_keys(uint r) {
	if (r >= p.rows) {
		return 0;
	}
	const int islot = data_slot[r], ipos = data_pos[r];
	const uint nk = p.causal != 0 ? uint(max(ipos + 1, 0)) : p.n_kv;
	return islot < 0 || uint(islot) >= p.n_slots ? 0 : min(nk, p.n_ctx);
}

// load_k4 / load_v4 return dims 4*d4..4*d4+3 of the cache row at element
// base (zeros past head_dim).
vec4 load_k4(uint base, uint d4) {
	if (HEAD_DIM % 4 == 0) { // base is then a multiple of 4 too
		return load_k4e(base + 4 * d4);
	}
	vec4 v = vec4(0.0);
	[[unroll]] for (uint c = 0; c < 4; c++) {
		if (4 * d4 + c < HEAD_DIM) {
			v[c] = load_k1(base + 4 * d4 + c);
		}
	}
	return v;
}

vec4 load_v4(uint base, uint d4) {
	if (HEAD_DIM % 4 == 0) {
		return load_v4e(base + 4 * d4);
	}
	vec4 v = vec4(0.0);
	[[unroll]] for (uint c = 0; c < 4; c++) {
		if (4 * d4 + c < HEAD_DIM) {
			v[c] = load_v1(base + 4 * d4 + c);
		}
	}
	return v;
}

// load_q fills q_s with the tile's scaled queries (zeros past the batch)
// and nk_s with its rows' key counts.
void load_q(uint row0, uint h0) {
	const uint t = gl_LocalInvocationID.x;
	for (uint i = t; i < Q * QV; i += WG) {
		const uint q = i / QV, d = (i % QV) * 4;
		const uint row = row0 + q / GPW;
		vec4 qv = vec4(0.0);
		if (row < p.rows) {
			const uint b = (row * p.heads + h0 + q % GPW) * HEAD_DIM + d;
			[[unroll]] for (uint c = 0; c < 4; c++) {
				if (d + c < HEAD_DIM) {
					qv[c] = data_q[b + c] * p.scale;
				}
			}
		}
		q_s[i] = qv;
	}
	for (uint r = t; r < ROWS; r += WG) {
		nk_s[r] = row_keys(row0 + r);
	}
}

// score stores the scores of keys j0+t+e*WG (e < KPL) of slot against
// every query in p_s (-inf past a row's keys) and their cache offsets in
// row_s.
void score(uint slot, uint kvoff, uint j0, uint cnt) {
	const uint t = gl_LocalInvocationID.x;
	uint kb[MAX_KPL];
	[[unroll]] for (uint e = 0; e < KPL; e++) {
		kb[e] = t + e * WG < cnt ? kv_row(slot, j0 + t + e * WG) + kvoff : 0;
		row_s[t + e * WG] = kb[e];
	}
	float s[MAX_KPL][MAX_Q];
	[[unroll]] for (uint e = 0; e < KPL; e++) {
		[[unroll]] for (uint q = 0; q < Q; q++) {
			s[e][q] = 0.0;
		}
	}
	for (uint d4 = 0; d4 < QV; d4++) {
		vec4 kd[MAX_KPL];
		[[unroll]] for (uint e = 0; e < KPL; e++) {
			kd[e] = t + e * WG < cnt ? load_k4(kb[e], d4) : vec4(0.0);
		}
		[[unroll]] for (uint q = 0; q < Q; q++) {
			const vec4 qv = q_s[q * QV + d4];
			[[unroll]] for (uint e = 0; e < KPL; e++) {
				s[e][q] += dot(qv, kd[e]);
			}
		}
	}
	[[unroll]] for (uint e = 0; e < KPL; e++) {
		const uint c = t + e * WG;
		[[unroll]] for (uint q = 0; q < Q; q++) {
			const uint i = c * QP + pq(q);
			p_s[i / 4][i % 4] = j0 + c < nk_s[q / GPW] ? s[e][q] : NEG_INF;
		}
	}
}

// softmax updates query q's running max m and sum l with the tile's cnt
// scores, replaces them by exp(score - max) and publishes the factor that
// rescales the query's accumulators.
void softmax(uint q, uint j0, uint cnt, inout float m, inout float l) {
	const uint nk = nk_s[q / GPW];
	const uint n = nk > j0 ? min(cnt, nk - j0) : 0; // the query's keys in the tile
	const uint b = pq(q);
	float mn = m;
	for (uint c = 0; c < n; c++) {
		const uint i = c * QP + b;
		mn = max(mn, p_s[i / 4][i % 4]);
	}
	float sum = 0.0;
	for (uint c = 0; c < cnt; c++) {
		const uint i = c * QP + b;
		const float e = c < n ? exp(p_s[i / 4][i % 4] - mn) : 0.0;
		p_s[i / 4][i % 4] = e;
		sum += e;
	}
	const float alpha = n > 0 ? exp(m - mn) : 1.0;
	alpha_s[q] = alpha;
	l = l * alpha + sum;
	m = mn;
}

// accumulate rescales the invocation's accumulators by their queries'
// alpha_s and adds the tile's cnt probabilities times the V rows (at the
// offsets row_s).
void accumulate(inout vec4 acc[MAX_ACC], uint cnt) {
	const uint t = gl_LocalInvocationID.x;
	const uint d0 = t % TD, qb = t / TD;
	[[unroll]] for (uint k = 0; k < QK; k++) {
		const float a = qb + k * NG < Q ? alpha_s[qb + k * NG] : 0.0;
		[[unroll]] for (uint i = 0; i < DM; i++) {
			acc[i * QK + k] *= a;
		}
	}
	for (uint c = 0; c < cnt; c++) {
		const uint vb = row_s[c];
		const uint pb = c * QP + qb * QK; // p_s of query qb * QK
		[[unroll]] for (uint i = 0; i < DM; i++) {
			if (d0 + i * TD >= QV) {
				continue;
			}
			const vec4 vd = load_v4(vb, d0 + i * TD);
			if (QK % 4 == 0) { // pb is then a multiple of 4 too
				[[unroll]] for (uint k4 = 0; k4 < QK / 4; k4++) {
					const vec4 pk = p_s[pb / 4 + k4];
					[[unroll]] for (uint e = 0; e < 4; e++) {
						acc[i * QK + 4 * k4 + e] += pk[e] * vd;
					}
				}
			} else {
				[[unroll]] for (uint k = 0; k < QK; k++) {
					acc[i * QK + k] += p_s[(pb + k) / 4][(pb + k) % 4] * vd;
				}
			}
		}
	}
}

void main() {
	const uint groups_per_tile = p.heads / GPW;
	const uint gid = group_id();
	if (gid >= (p.rows + ROWS - 1) / ROWS * groups_per_tile) {
		return;
	}
	const uint row0 = gid / groups_per_tile * ROWS;
	const int slot = tile_slot(row0);
	if (slot == -2) {
		return; // rows of several slots: flash_attn serves them
	}
	const uint t = gl_LocalInvocationID.x;
	const uint h0 = (gid % groups_per_tile) * GPW;
	const uint kvh = h0 / (p.heads / p.kv_heads);
	load_q(row0, h0);
	barrier();
	uint kend = 0;
	for (uint r = 0; r < ROWS; r++) {
		kend = max(kend, nk_s[r]);
	}
	const uint kvoff = kvh * HEAD_DIM; // the kv head within a position
	const uint d0 = t % TD, qb = t / TD; // phase-3 vec4s and queries
	float m = NEG_INF, l = 0.0;          // of query t (t < Q)
	if (p.sinks != 0 && t < Q) {
		// The sink as a key of value zero seen first (attention.glsl).
		m = data_sinks[h0 + t % GPW];
		l = 1.0;
	}
	vec4 acc[MAX_ACC];
	[[unroll]] for (uint i = 0; i < DM * QK; i++) {
		acc[i] = vec4(0.0);
	}
	for (uint j0 = 0; j0 < kend; j0 += BC) {
		const uint cnt = min(BC, kend - j0);
		score(uint(max(slot, 0)), kvoff, j0, cnt);
		barrier();
		if (t < Q) {
			softmax(t, j0, cnt, m, l);
		}
		barrier();
		accumulate(acc, cnt);
		barrier(); // p_s and alpha_s are rewritten by the next tile
	}
	if (t < Q) {
		l_s[t] = l;
	}
	barrier();
	[[unroll]] for (uint k = 0; k < QK; k++) {
		const uint q = qb + k * NG, row = row0 + q / GPW;
		if (q >= Q || row >= p.rows) {
			continue;
		}
		const float li = l_s[q];
		const uint ob = (row * p.heads + h0 + q % GPW) * HEAD_DIM;
		[[unroll]] for (uint i = 0; i < DM; i++) {
			const uint d = 4 * (d0 + i * TD);
			const vec4 o = li > 0.0 ? acc[i * QK + k] / li : vec4(0.0);
			[[unroll]] for (uint c = 0; c < 4; c++) {
				if (d + c < HEAD_DIM) {
					data_o[ob + d + c] = o[c];
				}
			}
		}
	}
}
