#version 450
// int8.comp multiplies 8-bit integer matrices, which NVToKHR refuses (the
// KHR multiply-add would need signedness operands).
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_NV_integer_cooperative_matrix : require
#extension GL_NV_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer C { int8_t q[]; int c[]; };
void main() {
	icoopmatNV<8, 3, 16, 32> a;
	icoopmatNV<8, 3, 32, 16> b;
	icoopmatNV<32, 3, 16, 16> mc = icoopmatNV<32, 3, 16, 16>(0);
	coopMatLoadNV(a, q, 0, 32, false);
	coopMatLoadNV(b, q, 512, 32, true);
	mc = coopMatMulAddNV(a, b, mc);
	coopMatStoreNV(mc, c, 0, 16, false);
}
