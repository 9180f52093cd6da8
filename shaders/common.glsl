// common.glsl is included by every kernel right after "#version 450". It
// enables the extensions the kernels share, declares the workgroup size WG
// as specialization constant 0 (the Go side passes Kernels.WG(), a power of
// two) and the helpers below.
#extension GL_EXT_control_flow_attributes : enable
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#ifdef USE_F16
#extension GL_EXT_shader_16bit_storage : require
#endif

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;

// group_id is the linear workgroup index of a grid that Kernels.Groups may
// have spread over x and y.
uint group_id() {
	return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

// NEG_INF is -infinity (for max reductions and masks).
#define NEG_INF uintBitsToFloat(0xFF800000u)
