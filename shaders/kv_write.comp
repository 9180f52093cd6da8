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

#include "kv_quant.glsl"

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
	float v[32];
	[[unroll]] for (uint j = 0u; j < 32u; j++) {
		v[j] = data_x[x0 + j];
	}
#if defined(Q8_0)
	uint hw[16];
	data_cd[b] = float16_t(q8_0_block(v, hw));
	[[unroll]] for (uint j = 0u; j < 16u; j++) {
		data_c[b + 1u + j] = uint16_t(hw[j]);
	}
#else
	uint hw[8];
	data_cd[b] = float16_t(q4_0_block(v, hw));
	[[unroll]] for (uint j = 0u; j < 8u; j++) {
		data_c[b + 1u + j] = uint16_t(hw[j]);
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
