#version 450
// binary: y[i] = a[i] OP b[(off + i) % nb] for element-wise add and mul,
// where nb < n broadcasts b as a row (bias add, per-column scale); MUL_ROWS
// is y[i] = a[i] * b[(off + i) / nb], b one scale per row of nb values.
// One invocation per element. CPU reference: engine/ops RefAdd, RefMul,
// RefMulRows.
// variant: add_f32 -DOP_ADD=1
// variant: mul_f32 -DOP_MUL=1
// variant: mul_rows_f32 -DOP_MUL_ROWS=1
#include "common.glsl"

layout(binding = 0) readonly buffer A { float data_a[]; };
layout(binding = 1) readonly buffer B { float data_b[]; };
layout(binding = 2) writeonly buffer Y { float data_y[]; };

layout(push_constant) uniform Params {
	uint n;   // elements in this dispatch
	uint nb;  // elements of b (MUL_ROWS: values per row of a)
	uint off; // element index of a[0] in the whole tensor (for chunks)
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.n) {
		return;
	}
#ifdef OP_MUL_ROWS
	const float b = data_b[(p.off + i) / p.nb];
#else
	const float b = data_b[(p.off + i) % p.nb];
#endif
#ifdef OP_ADD
	data_y[i] = data_a[i] + b;
#else
	data_y[i] = data_a[i] * b;
#endif
}
