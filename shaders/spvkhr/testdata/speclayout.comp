#version 450
// speclayout.comp loads a matrix with a layout given by a specialization
// constant, which the KHR instruction cannot take: NVToKHR must refuse it.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_NV_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(constant_id = 0) const bool COLS = false;
layout(binding = 0) buffer C { float16_t h[]; float c[]; };
void main() {
	fcoopmatNV<16, 3, 16, 8> a;
	fcoopmatNV<16, 3, 8, 16> b;
	fcoopmatNV<32, 3, 16, 16> mc = fcoopmatNV<32, 3, 16, 16>(0.0);
	coopMatLoadNV(a, h, 0, 8, COLS);
	coopMatLoadNV(b, h, 128, 8, true);
	mc = coopMatMulAddNV(a, b, mc);
	coopMatStoreNV(mc, c, 0, 16, false);
}
