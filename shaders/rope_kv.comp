#version 450
// rope_kv is decode's attention-input step in one dispatch: it rotates q in
// place (rope.comp's math), rotates k into the K page pool at each row's
// slot and position (kv_write.comp's store of the rotated values) and
// stores v into the V pool. k and v are only read: the rotated k exists
// only in the cache. Work items, in order: the rows*q_heads*head_dim/2
// pairs of q, then the K pool's units of every row (an element for f16, a
// block of 32 for q8_0 / q4_0, kv_dim % 32 == 0), then V's. NEOX (a
// specialization constant) pairs (j, j + rot_dims/2), otherwise (2j,
// 2j+1). CPU reference: engine/ops RefRoPEKV (RefRoPE, then RefKVWrite).
// variant: rope_kv_f32_f16_f16 -DUSE_F16=1
// variant: rope_kv_f32_f16_q8_0 -DUSE_F16=1 -DV_Q8_0=1
// variant: rope_kv_f32_f16_q4_0 -DUSE_F16=1 -DV_Q4_0=1
// variant: rope_kv_f32_q8_0_f16 -DUSE_F16=1 -DK_Q8_0=1
// variant: rope_kv_f32_q8_0_q8_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q8_0=1
// variant: rope_kv_f32_q8_0_q4_0 -DUSE_F16=1 -DK_Q8_0=1 -DV_Q4_0=1
// variant: rope_kv_f32_q4_0_f16 -DUSE_F16=1 -DK_Q4_0=1
// variant: rope_kv_f32_q4_0_q8_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q8_0=1
// variant: rope_kv_f32_q4_0_q4_0 -DUSE_F16=1 -DK_Q4_0=1 -DV_Q4_0=1
#include "common.glsl"

layout(constant_id = 1) const bool NEOX = false;

layout(binding = 0) buffer Q { float data_q[]; };
layout(binding = 1) readonly buffer KS { float data_k[]; };
layout(binding = 2) readonly buffer VS { float data_v[]; };
layout(binding = 3) readonly buffer S { int data_slot[]; };
layout(binding = 4) readonly buffer P { int data_pos[]; };
layout(binding = 5) readonly buffer T { int data_table[]; };
layout(binding = 6) readonly buffer F { float data_f[]; };
layout(binding = 7) writeonly buffer KC { uint16_t data_kc[]; };
layout(binding = 7) writeonly buffer KCH { float16_t data_kch[]; };
layout(binding = 8) writeonly buffer VC { uint16_t data_vc[]; };
layout(binding = 8) writeonly buffer VCH { float16_t data_vch[]; };

// Params is mirrored by engine/ops RoPEKVPush.
layout(push_constant) uniform Params {
	uint rows;
	uint q_heads;
	uint kv_heads;
	uint head_dim;
	uint rot_dims;
	float freq_base;
	float freq_scale;
	uint has_factors;
	float attn_factor;
	float ext_factor;
	float corr0, corr1;
	uint n_ctx;
	uint n_slots;
	uint page_shift;   // log2 of the positions per page
	uint table_stride; // page-table entries per slot
	uint n_pages;      // pages in the pool
} p;

#include "kv_quant.glsl"

// row_at returns the cache row (page * page size + position in page) of
// batch row row, or -1 when it is skipped (as kv_write.comp).
int row_at(uint row) {
	const int slot = data_slot[row], pos = data_pos[row];
	if (slot < 0 || uint(slot) >= p.n_slots || pos < 0 || uint(pos) >= p.n_ctx) {
		return -1;
	}
	const int page = data_table[uint(slot) * p.table_stride + (uint(pos) >> p.page_shift)];
	if (page < 0 || uint(page) >= p.n_pages) {
		return -1;
	}
	return int((uint(page) << p.page_shift) + (uint(pos) & ((1u << p.page_shift) - 1u)));
}

// rope_cs returns the scaled cos and sin of pair j at position pos, as
// rope.comp computes them.
vec2 rope_cs(uint j, int pos) {
	float extrap = float(pos) * pow(p.freq_base, -float(2u * j) / float(p.rot_dims));
	if (p.has_factors != 0u) {
		extrap /= data_f[j];
	}
	float theta = p.freq_scale * extrap;
	float mscale = p.attn_factor;
	if (p.ext_factor != 0.0) {
		const float y = (float(j) - p.corr0) / max(0.001, p.corr1 - p.corr0);
		const float ramp = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
		theta = theta * (1.0 - ramp) + extrap * ramp;
		mscale *= 1.0 + 0.1 * log(1.0 / p.freq_scale);
	}
	return vec2(cos(theta), sin(theta)) * mscale;
}

// pair returns, for dimension d < rot_dims of a head, its pair index, its
// partner and whether it is the pair's first element.
uvec3 pair(uint d) {
	if (NEOX) {
		const uint h = p.rot_dims / 2u;
		return d < h ? uvec3(d, d + h, 1u) : uvec3(d - h, d - h, 0u);
	}
	return uvec3(d / 2u, d ^ 1u, (d & 1u) == 0u ? 1u : 0u);
}

// k_rot returns element e of batch row row of k, rotated.
float k_rot(uint row, uint e) {
	const uint kv_dim = p.kv_heads * p.head_dim;
	const uint d = e % p.head_dim, base = row * kv_dim + e - d;
	const float x = data_k[base + d];
	if (d >= p.rot_dims) {
		return x;
	}
	const uvec3 pr = pair(d);
	const vec2 cs = rope_cs(pr.x, data_pos[row]);
	// The pair (x0, x1) turns to (x0 c - x1 s, x0 s + x1 c).
	return pr.z != 0u ? x * cs.x - data_k[base + pr.y] * cs.y : data_k[base + pr.y] * cs.y + x * cs.x;
}

void main() {
	uint i = group_id() * WG + gl_LocalInvocationID.x;
	const uint half_dim = p.head_dim / 2u;
	const uint nq = p.rows * p.q_heads * half_dim;
	if (i < nq) {
		const uint j = i % half_dim, rh = i / half_dim;
		if (2u * j >= p.rot_dims) {
			return; // passes through, in place
		}
		const uint base = rh * p.head_dim;
		const uint i0 = NEOX ? j : 2u * j, i1 = NEOX ? j + p.rot_dims / 2u : 2u * j + 1u;
		const vec2 cs = rope_cs(j, data_pos[rh / p.q_heads]);
		const float x0 = data_q[base + i0], x1 = data_q[base + i1];
		data_q[base + i0] = x0 * cs.x - x1 * cs.y;
		data_q[base + i1] = x0 * cs.y + x1 * cs.x;
		return;
	}
	i -= nq;
	const uint kv_dim = p.kv_heads * p.head_dim, bpr = kv_dim / 32u;
#if defined(K_Q8_0) || defined(K_Q4_0)
	const uint nk = p.rows * bpr;
#else
	const uint nk = p.rows * kv_dim;
#endif
	if (i < nk) {
#if defined(K_Q8_0) || defined(K_Q4_0)
		const uint row = i / bpr, blk = i % bpr;
		const int at = row_at(row);
		if (at < 0) {
			return;
		}
		float v[32];
		[[unroll]] for (uint j = 0u; j < 32u; j++) {
			v[j] = k_rot(row, blk * 32u + j);
		}
#if defined(K_Q8_0)
		const uint b = (uint(at) * bpr + blk) * 17u;
		uint hw[16];
		data_kch[b] = float16_t(q8_0_block(v, hw));
		[[unroll]] for (uint j = 0u; j < 16u; j++) {
			data_kc[b + 1u + j] = uint16_t(hw[j]);
		}
#else
		const uint b = (uint(at) * bpr + blk) * 9u;
		uint hw[8];
		data_kch[b] = float16_t(q4_0_block(v, hw));
		[[unroll]] for (uint j = 0u; j < 8u; j++) {
			data_kc[b + 1u + j] = uint16_t(hw[j]);
		}
#endif
#else
		const uint row = i / kv_dim;
		const int at = row_at(row);
		if (at >= 0) {
			data_kch[uint(at) * kv_dim + i % kv_dim] = float16_t(k_rot(row, i % kv_dim));
		}
#endif
		return;
	}
	i -= nk;
#if defined(V_Q8_0) || defined(V_Q4_0)
	if (i >= p.rows * bpr) {
		return;
	}
	const uint row = i / bpr, blk = i % bpr;
	const int at = row_at(row);
	if (at < 0) {
		return;
	}
	float v[32];
	[[unroll]] for (uint j = 0u; j < 32u; j++) {
		v[j] = data_v[row * kv_dim + blk * 32u + j];
	}
#if defined(V_Q8_0)
	const uint b = (uint(at) * bpr + blk) * 17u;
	uint hw[16];
	data_vch[b] = float16_t(q8_0_block(v, hw));
	[[unroll]] for (uint j = 0u; j < 16u; j++) {
		data_vc[b + 1u + j] = uint16_t(hw[j]);
	}
#else
	const uint b = (uint(at) * bpr + blk) * 9u;
	uint hw[8];
	data_vch[b] = float16_t(q4_0_block(v, hw));
	[[unroll]] for (uint j = 0u; j < 8u; j++) {
		data_vc[b + 1u + j] = uint16_t(hw[j]);
	}
#endif
#else
	if (i >= p.rows * kv_dim) {
		return;
	}
	const int at = row_at(i / kv_dim);
	if (at >= 0) {
		data_vch[uint(at) * kv_dim + i % kv_dim] = float16_t(data_v[i]);
	}
#endif
}
