#version 450
// coop.comp is the fixture of TestNVToKHR: C (16 x 16, f32) = A (16 x 8,
// f16, row-major in shared memory) * B (8 x 16, f16, column-major in a
// buffer) + C, stored column-major. Compiled by gen.sh.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_NV_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(binding = 0) readonly buffer B { float16_t b[]; };
layout(binding = 1) buffer C { float c[]; };
shared float16_t a[16 * 8];
void main() {
	a[gl_LocalInvocationID.x] = float16_t(gl_LocalInvocationID.x);
	barrier();
	fcoopmatNV<16, 3, 16, 8> ma;
	fcoopmatNV<16, 3, 8, 16> mb;
	fcoopmatNV<32, 3, 16, 16> mc;
	coopMatLoadNV(ma, a, 0, 8, false);
	coopMatLoadNV(mb, b, 64, 8, true);
	coopMatLoadNV(mc, c, 0, 16, true);
	mc = coopMatMulAddNV(ma, mb, mc);
	coopMatStoreNV(mc, c, 256, 16, true);
}
