#version 450
// kv_write stores f32 rows [row][kv_dim] into the paged f16 cache
// [page][position in page][kv_dim] at position pos[row] of slot slot[row]:
// page table[slot][pos / page size]. Rows whose slot, position or page is
// out of range are skipped. One invocation per element. CPU reference:
// engine/ops RefKVWrite.
// variant: kv_write_f32_f16 -DUSE_F16=1
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer S { int data_slot[]; };
layout(binding = 2) readonly buffer P { int data_pos[]; };
layout(binding = 3) writeonly buffer C { float16_t data_c[]; };
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

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.rows * p.kv_dim) {
		return;
	}
	const uint row = i / p.kv_dim;
	const int slot = data_slot[row], pos = data_pos[row];
	if (slot < 0 || uint(slot) >= p.n_slots || pos < 0 || uint(pos) >= p.n_ctx) {
		return;
	}
	const int page = data_table[uint(slot) * p.table_stride + (uint(pos) >> p.page_shift)];
	if (page < 0 || uint(page) >= p.n_pages) {
		return;
	}
	const uint at = (uint(page) << p.page_shift) + (uint(pos) & ((1u << p.page_shift) - 1u));
	data_c[at * p.kv_dim + i % p.kv_dim] = float16_t(data_x[i]);
}
