#version 450
// kv_write stores f32 rows [row][kv_dim] into the f16 cache
// [slot][position][kv_dim] at (slot[row], pos[row]); rows whose slot or
// position is out of range are skipped. One invocation per element. CPU
// reference: engine/ops RefKVWrite.
// variant: kv_write_f32_f16 -DUSE_F16=1
#include "common.glsl"

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer S { int data_slot[]; };
layout(binding = 2) readonly buffer P { int data_pos[]; };
layout(binding = 3) writeonly buffer C { float16_t data_c[]; };

layout(push_constant) uniform Params {
	uint rows;
	uint kv_dim;
	uint n_ctx;
	uint n_slots;
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
	data_c[(uint(slot) * p.n_ctx + uint(pos)) * p.kv_dim + i % p.kv_dim] = float16_t(data_x[i]);
}
