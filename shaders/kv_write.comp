#version 450
// kv_write stores f32 rows [row][kv_dim] into a paged cache [page][position
// in page][kv_dim] at position pos[row] of slot slot[row]: page
// table[slot][pos / page size]. Rows whose slot, position or page is out of
// range are skipped. The f16 variant converts each element (one invocation
// per element); the q8_0 and q4_0 variants quantize each block of 32 values
// as the reference's quantize_row_q8_0 / q4_0 do (one invocation per
// block; kv_dim % 32 == 0), into the block layout kv_types.glsl reads. CPU
// reference: engine/ops RefKVWrite.
// variant: kv_write_f32_f16 -DUSE_F16=1
// variant: kv_write_f32_q8_0 -DUSE_F16=1 -DQ8_0=1
// variant: kv_write_f32_q4_0 -DUSE_F16=1 -DQ4_0=1
#include "common.glsl"
#if defined(Q8_0) || defined(Q4_0)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(Q8_0)
#define HW 17u // halfwords per block
#elif defined(Q4_0)
#define HW 9u
#endif

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer S { int data_slot[]; };
layout(binding = 2) readonly buffer P { int data_pos[]; };
#if defined(Q8_0) || defined(Q4_0)
layout(binding = 3) writeonly buffer C { uint16_t data_c[]; };
layout(binding = 3) writeonly buffer CD { float16_t data_cd[]; };
#else
layout(binding = 3) writeonly buffer C { float16_t data_c[]; };
#endif
layout(binding = 4) readonly buffer T { int data_table[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint kv_dim;
	uint n_ctx;
	uint n_slots;
	uint page_shift;   // log2 of the positions per page
	uint table_stride; // page-table entries per slot
	uint n_pages;      // pages in the pool
} p;

// row_at returns the cache row (page * page size + position in page) of
// batch row row, or -1 when it is skipped.
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

#if defined(Q8_0)
// round_away is C's roundf (half away from zero; v - trunc(v) is exact)
// clamped to [-127, 127], as the reference's q8_0.
int round_away(float v) {
	const float t = trunc(v);
	const float r = abs(v - t) >= 0.5 ? t + sign(v) : t;
	return int(clamp(r, -127.0, 127.0));
}
#endif

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
#if defined(Q8_0) || defined(Q4_0)
	const uint bpr = p.kv_dim / 32; // blocks per row
	if (i >= p.rows * bpr) {
		return;
	}
	const uint row = i / bpr, blk = i % bpr;
	const int at = row_at(row);
	if (at < 0) {
		return;
	}
	const uint x0 = row * p.kv_dim + blk * 32;
	const uint b = (uint(at) * bpr + blk) * HW; // the block's first halfword
	float amax = 0.0, vmax = 0.0;
	for (uint j = 0; j < 32; j++) {
		const float v = data_x[x0 + j];
		if (abs(v) > amax) {
			amax = abs(v);
			vmax = v;
		}
	}
#if defined(Q8_0)
	const float d = amax / 127.0;
	const float id = d != 0.0 ? 1.0 / d : 0.0;
	data_cd[b] = float16_t(d);
	for (uint j = 0; j < 32; j += 2) {
		const int q0 = round_away(data_x[x0 + j] * id), q1 = round_away(data_x[x0 + j + 1] * id);
		data_c[b + 1 + j / 2] = uint16_t((uint(q0) & 255u) | ((uint(q1) & 255u) << 8));
	}
#else
	const float d = vmax / -8.0;
	const float id = d != 0.0 ? 1.0 / d : 0.0;
	data_cd[b] = float16_t(d);
	for (uint j = 0; j < 16; j += 2) {
		uint w = 0;
		for (uint c = 0; c < 2; c++) {
			const uint lo = uint(clamp(int(trunc(data_x[x0 + j + c] * id + 8.5)), 0, 15));
			const uint hi = uint(clamp(int(trunc(data_x[x0 + j + c + 16] * id + 8.5)), 0, 15));
			w |= (lo | (hi << 4)) << (8 * c);
		}
		data_c[b + 1 + j / 2] = uint16_t(w);
	}
#endif
#else
	if (i >= p.rows * p.kv_dim) {
		return;
	}
	const int at = row_at(i / p.kv_dim);
	if (at < 0) {
		return;
	}
	data_c[uint(at) * p.kv_dim + i % p.kv_dim] = float16_t(data_x[i]);
#endif
}
