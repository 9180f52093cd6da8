#version 450
// copy: y = x with element-type conversion (f32 <-> f16, round to nearest
// even on the way down). One invocation per element. CPU reference:
// engine/ops F16FromF32 / F32FromF16.
// variant: cpy_f32_f32 -DSRC_F32=1 -DDST_F32=1
// variant: cpy_f32_f16 -DSRC_F32=1 -DDST_F16=1 -DUSE_F16=1
// variant: cpy_f16_f32 -DSRC_F16=1 -DDST_F32=1 -DUSE_F16=1
#include "common.glsl"

#ifdef SRC_F16
layout(binding = 0) readonly buffer X { float16_t data_x[]; };
#else
layout(binding = 0) readonly buffer X { float data_x[]; };
#endif
#ifdef DST_F16
layout(binding = 1) writeonly buffer Y { float16_t data_y[]; };
#else
layout(binding = 1) writeonly buffer Y { float data_y[]; };
#endif

layout(push_constant) uniform Params {
	uint n;
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.n) {
		return;
	}
#ifdef DST_F16
	data_y[i] = float16_t(data_x[i]);
#else
	data_y[i] = float(data_x[i]);
#endif
}
