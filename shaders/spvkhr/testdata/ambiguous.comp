#version 450
// ambiguous.comp multiplies two matrices of one type (16 x 16 f16), which
// SPIR-V cannot tell apart as A and B: NVToKHR must refuse it.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_NV_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer C { float16_t h[]; float c[]; };
void main() {
	fcoopmatNV<16, 3, 16, 16> m;
	fcoopmatNV<32, 3, 16, 16> mc = fcoopmatNV<32, 3, 16, 16>(0.0);
	coopMatLoadNV(m, h, 0, 16, false);
	mc = coopMatMulAddNV(m, m, mc);
	coopMatStoreNV(mc, c, 0, 16, false);
}
