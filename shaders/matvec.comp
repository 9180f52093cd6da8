#version 450
// matvec multiplies a weight matrix W (M rows of K elements, any GGML type,
// see quant.glsl) by up to 16 activation columns in one pass (8 on GPUs;
// NCOLS, a column bucket: see xcol), so a decode batch reads each weight
// once: y[c][r] = sum_k W[r][k] * x[c][k]. TPR
// invocations compute one row, or RPL consecutive rows, for every column
// (WG/TPR groups of rows per workgroup), striding over the rows in
// 32-element sub-blocks (quantized types, dequant32) or groups of four
// (plain types), then reduce (subgroup adds where the device has them and
// a group of rows fills the workgroup, otherwise shared memory). The _s16
// variants read the weight blocks through 16- and 8-bit storage views
// (quant.glsl, A_16BIT). The matvec_id variants (MUL_MAT_ID, a mixture of
// experts' products) multiply each expert's matrix by the activation
// columns routed to it: see fused_epilogue.glsl. CPU reference: engine/ops
// MatMulRef (matvec_id: RefMatVecID).
// variant: matvec_f32_f32 -DDATA_A_F32
// variant: matvec_f16_f32 -DDATA_A_F16
// variant: matvec_bf16_f32 -DDATA_A_BF16
// variant: matvec_q4_0_f32 -DDATA_A_Q4_0
// variant: matvec_q4_1_f32 -DDATA_A_Q4_1
// variant: matvec_q5_0_f32 -DDATA_A_Q5_0
// variant: matvec_q5_1_f32 -DDATA_A_Q5_1
// variant: matvec_q8_0_f32 -DDATA_A_Q8_0
// variant: matvec_q2_k_f32 -DDATA_A_Q2_K
// variant: matvec_q3_k_f32 -DDATA_A_Q3_K
// variant: matvec_q4_k_f32 -DDATA_A_Q4_K
// variant: matvec_q5_k_f32 -DDATA_A_Q5_K
// variant: matvec_q6_k_f32 -DDATA_A_Q6_K
// variant: matvec_iq4_nl_f32 -DDATA_A_IQ4_NL
// variant: matvec_iq4_xs_f32 -DDATA_A_IQ4_XS
// variant: matvec_mxfp4_f32 -DDATA_A_MXFP4
// variant: matvec_f32_f32_sg -DDATA_A_F32 -DUSE_SUBGROUP=1
// variant: matvec_f16_f32_sg -DDATA_A_F16 -DUSE_SUBGROUP=1
// variant: matvec_bf16_f32_sg -DDATA_A_BF16 -DUSE_SUBGROUP=1
// variant: matvec_q4_0_f32_sg -DDATA_A_Q4_0 -DUSE_SUBGROUP=1
// variant: matvec_q4_1_f32_sg -DDATA_A_Q4_1 -DUSE_SUBGROUP=1
// variant: matvec_q5_0_f32_sg -DDATA_A_Q5_0 -DUSE_SUBGROUP=1
// variant: matvec_q5_1_f32_sg -DDATA_A_Q5_1 -DUSE_SUBGROUP=1
// variant: matvec_q8_0_f32_sg -DDATA_A_Q8_0 -DUSE_SUBGROUP=1
// variant: matvec_q2_k_f32_sg -DDATA_A_Q2_K -DUSE_SUBGROUP=1
// variant: matvec_q3_k_f32_sg -DDATA_A_Q3_K -DUSE_SUBGROUP=1
// variant: matvec_q4_k_f32_sg -DDATA_A_Q4_K -DUSE_SUBGROUP=1
// variant: matvec_q5_k_f32_sg -DDATA_A_Q5_K -DUSE_SUBGROUP=1
// variant: matvec_q6_k_f32_sg -DDATA_A_Q6_K -DUSE_SUBGROUP=1
// variant: matvec_iq4_nl_f32_sg -DDATA_A_IQ4_NL -DUSE_SUBGROUP=1
// variant: matvec_iq4_xs_f32_sg -DDATA_A_IQ4_XS -DUSE_SUBGROUP=1
// variant: matvec_mxfp4_f32_sg -DDATA_A_MXFP4 -DUSE_SUBGROUP=1
// variant: matvec_f32_f32_xu -DDATA_A_F32 -DX_UNIFORM=1
// variant: matvec_f16_f32_xu -DDATA_A_F16 -DX_UNIFORM=1
// variant: matvec_bf16_f32_xu -DDATA_A_BF16 -DX_UNIFORM=1
// variant: matvec_q4_0_f32_xu -DDATA_A_Q4_0 -DX_UNIFORM=1
// variant: matvec_q4_1_f32_xu -DDATA_A_Q4_1 -DX_UNIFORM=1
// variant: matvec_q5_0_f32_xu -DDATA_A_Q5_0 -DX_UNIFORM=1
// variant: matvec_q5_1_f32_xu -DDATA_A_Q5_1 -DX_UNIFORM=1
// variant: matvec_q8_0_f32_xu -DDATA_A_Q8_0 -DX_UNIFORM=1
// variant: matvec_q2_k_f32_xu -DDATA_A_Q2_K -DX_UNIFORM=1
// variant: matvec_q3_k_f32_xu -DDATA_A_Q3_K -DX_UNIFORM=1
// variant: matvec_q4_k_f32_xu -DDATA_A_Q4_K -DX_UNIFORM=1
// variant: matvec_q5_k_f32_xu -DDATA_A_Q5_K -DX_UNIFORM=1
// variant: matvec_q6_k_f32_xu -DDATA_A_Q6_K -DX_UNIFORM=1
// variant: matvec_iq4_nl_f32_xu -DDATA_A_IQ4_NL -DX_UNIFORM=1
// variant: matvec_iq4_xs_f32_xu -DDATA_A_IQ4_XS -DX_UNIFORM=1
// variant: matvec_mxfp4_f32_xu -DDATA_A_MXFP4 -DX_UNIFORM=1
// variant: matvec_f32_f32_xt -DDATA_A_F32 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_f16_f32_xt -DDATA_A_F16 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_bf16_f32_xt -DDATA_A_BF16 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q4_0_f32_xt -DDATA_A_Q4_0 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q4_1_f32_xt -DDATA_A_Q4_1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q5_0_f32_xt -DDATA_A_Q5_0 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q5_1_f32_xt -DDATA_A_Q5_1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q8_0_f32_xt -DDATA_A_Q8_0 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q2_k_f32_xt -DDATA_A_Q2_K -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q3_k_f32_xt -DDATA_A_Q3_K -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q4_k_f32_xt -DDATA_A_Q4_K -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q5_k_f32_xt -DDATA_A_Q5_K -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q6_k_f32_xt -DDATA_A_Q6_K -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_iq4_nl_f32_xt -DDATA_A_IQ4_NL -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_iq4_xs_f32_xt -DDATA_A_IQ4_XS -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_mxfp4_f32_xt -DDATA_A_MXFP4 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_q4_0_f32_s16 -DDATA_A_Q4_0 -DA_16BIT=1
// variant: matvec_q8_0_f32_s16 -DDATA_A_Q8_0 -DA_16BIT=1
// variant: matvec_q4_k_f32_s16 -DDATA_A_Q4_K -DA_16BIT=1
// variant: matvec_q5_k_f32_s16 -DDATA_A_Q5_K -DA_16BIT=1
// variant: matvec_q6_k_f32_s16 -DDATA_A_Q6_K -DA_16BIT=1
// variant: matvec_q4_0_f32_sg_s16 -DDATA_A_Q4_0 -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q8_0_f32_sg_s16 -DDATA_A_Q8_0 -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q4_k_f32_sg_s16 -DDATA_A_Q4_K -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q5_k_f32_sg_s16 -DDATA_A_Q5_K -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q6_k_f32_sg_s16 -DDATA_A_Q6_K -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_id_f32_f32 -DDATA_A_F32 -DMUL_MAT_ID=1
// variant: matvec_id_f16_f32 -DDATA_A_F16 -DMUL_MAT_ID=1
// variant: matvec_id_bf16_f32 -DDATA_A_BF16 -DMUL_MAT_ID=1
// variant: matvec_id_q4_0_f32 -DDATA_A_Q4_0 -DMUL_MAT_ID=1
// variant: matvec_id_q4_1_f32 -DDATA_A_Q4_1 -DMUL_MAT_ID=1
// variant: matvec_id_q5_0_f32 -DDATA_A_Q5_0 -DMUL_MAT_ID=1
// variant: matvec_id_q5_1_f32 -DDATA_A_Q5_1 -DMUL_MAT_ID=1
// variant: matvec_id_q8_0_f32 -DDATA_A_Q8_0 -DMUL_MAT_ID=1
// variant: matvec_id_q2_k_f32 -DDATA_A_Q2_K -DMUL_MAT_ID=1
// variant: matvec_id_q3_k_f32 -DDATA_A_Q3_K -DMUL_MAT_ID=1
// variant: matvec_id_q4_k_f32 -DDATA_A_Q4_K -DMUL_MAT_ID=1
// variant: matvec_id_q5_k_f32 -DDATA_A_Q5_K -DMUL_MAT_ID=1
// variant: matvec_id_q6_k_f32 -DDATA_A_Q6_K -DMUL_MAT_ID=1
// variant: matvec_id_iq4_nl_f32 -DDATA_A_IQ4_NL -DMUL_MAT_ID=1
// variant: matvec_id_iq4_xs_f32 -DDATA_A_IQ4_XS -DMUL_MAT_ID=1
// variant: matvec_id_mxfp4_f32 -DDATA_A_MXFP4 -DMUL_MAT_ID=1
// variant: matvec_id_f32_f32_sg -DDATA_A_F32 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_f16_f32_sg -DDATA_A_F16 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_bf16_f32_sg -DDATA_A_BF16 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q4_0_f32_sg -DDATA_A_Q4_0 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q4_1_f32_sg -DDATA_A_Q4_1 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q5_0_f32_sg -DDATA_A_Q5_0 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q5_1_f32_sg -DDATA_A_Q5_1 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q8_0_f32_sg -DDATA_A_Q8_0 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q2_k_f32_sg -DDATA_A_Q2_K -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q3_k_f32_sg -DDATA_A_Q3_K -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q4_k_f32_sg -DDATA_A_Q4_K -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q5_k_f32_sg -DDATA_A_Q5_K -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_q6_k_f32_sg -DDATA_A_Q6_K -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_iq4_nl_f32_sg -DDATA_A_IQ4_NL -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_iq4_xs_f32_sg -DDATA_A_IQ4_XS -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_mxfp4_f32_sg -DDATA_A_MXFP4 -DMUL_MAT_ID=1 -DUSE_SUBGROUP=1
// variant: matvec_id_f32_f32_xt -DDATA_A_F32 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_f16_f32_xt -DDATA_A_F16 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_bf16_f32_xt -DDATA_A_BF16 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q4_0_f32_xt -DDATA_A_Q4_0 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q4_1_f32_xt -DDATA_A_Q4_1 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q5_0_f32_xt -DDATA_A_Q5_0 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q5_1_f32_xt -DDATA_A_Q5_1 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q8_0_f32_xt -DDATA_A_Q8_0 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q2_k_f32_xt -DDATA_A_Q2_K -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q3_k_f32_xt -DDATA_A_Q3_K -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q4_k_f32_xt -DDATA_A_Q4_K -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q5_k_f32_xt -DDATA_A_Q5_K -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_q6_k_f32_xt -DDATA_A_Q6_K -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_iq4_nl_f32_xt -DDATA_A_IQ4_NL -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_iq4_xs_f32_xt -DDATA_A_IQ4_XS -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
// variant: matvec_id_mxfp4_f32_xt -DDATA_A_MXFP4 -DMUL_MAT_ID=1 -DX_UNIFORM=1 -DA_TEXEL=1
#extension GL_EXT_control_flow_attributes : enable
#if defined(USE_SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

// WG is the workgroup size, a power of two.
layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;

#if defined(X_UNIFORM)
// The _xu variants (CPU devices) read the activations from a uniform buffer
// (at most 64 KiB, the smallest maxUniformBufferRange Vulkan allows): a CPU
// driver (lavapipe) loads a uniform-buffer element whose address every
// invocation shares once for the whole workgroup, even inside a loop, where
// a storage-buffer load becomes one load per invocation.
layout(binding = 1, std140) uniform XU { vec4 data_xu[4096]; };
#define X4(i) data_xu[(i)]
#define X1(i) data_xu[(i) >> 2][(i) & 3u]
#else
layout(binding = 1) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer X4B { vec4 data_x4[]; };
#define X4(i) data_x4[(i)]
#define X1(i) data_x[(i)]
#endif
layout(binding = 2) buffer Y { float data_y[]; };

// ACC adds the product to what Y holds (y += W x: a residual connection)
// instead of overwriting it.
layout(constant_id = 4) const bool ACC = false;

void store_y(uint i, float v) {
	data_y[i] = ACC ? data_y[i] + v : v;
}

#define FUSED_DECLS
#include "fused_epilogue.glsl"

#include "quant.glsl"

// Params is mirrored by engine/ops MatVecPush.
layout(push_constant) uniform Params {
	uint K;        // elements per row
	uint M;        // rows
	uint N;        // activation columns, 1..NCOLS (see xcol)
	uint w_off;    // byte offset of row 0 in A
	uint w_stride; // bytes from one row to the next
	uint x_off;    // element offset of column 0 in X
	uint x_stride; // elements from one activation column to the next
	uint y_off;    // element offset of (row 0, column 0) in Y
	uint y_stride; // elements from one output column to the next
	FUSED_PARAMS
	ID_PARAMS
} p;

#include "fused_epilogue.glsl"

// NCOLS is the pass's column bucket (1, 2, 4, 8, 16; see xcol), FAST says that K is a
// multiple of 4, the activations are vec4-aligned (x_off and x_stride
// multiples of 4) and plain-type rows are 16-byte aligned. Both are
// specialization constants so that drivers that execute both sides of a
// branch under a mask (lavapipe) compile only the path in use.
layout(constant_id = 1) const uint NCOLS = 1;
layout(constant_id = 2) const bool FAST = false;
// TPR is the number of invocations per row (a power of two dividing WG):
// short rows share a workgroup, WG/TPR rows each, instead of leaving most
// invocations idle.
layout(constant_id = 3) const uint TPR = 32;
#define RPW (WG / TPR)

#define MAX_COLS 16u

// RPL is the number of rows each invocation computes when TPR is 1 (CPU
// devices): rows base + j*WG for j < RPL. A CPU driver (lavapipe) turns
// every load from a buffer into a per-lane loop, even one whose address is
// the same in every lane, so the activation loads cost far more than the
// arithmetic; computing RPL rows per invocation makes each activation load
// serve RPL rows. With TPR > 1 (GPUs) RPL is GR below, 1 to MAX_GR.
layout(constant_id = 5) const uint RPL = 1;
#define MAX_RPL 16u
// MAX_GR is the most rows a group of TPR > 1 invocations computes.
#define MAX_GR 4u

// GR is the rows each group of TPR invocations computes where TPR > 1
// (GPUs): RPL consecutive rows, decoded one after another against the same
// activation loads, so each invocation has GR rows' weight bytes in flight
// and the workgroup count drops by GR (see rowsPerLane in engine/ops).
// With TPR == 1 RPL means main_rows' strided rows instead.
const uint GR = TPR == 1u ? 1u : RPL;
#define NV (GR * NCOLS)

// red holds per-invocation (shared-memory path) or per-subgroup partial
// sums, value v = j*NCOLS + c of row j and column c; WG entries per value
// is enough for any subgroup size.
shared float red[WG * NV];

// fma4 returns a + dot(w, x) as a chain of fused multiply-adds.
float fma4(vec4 w, vec4 x, float a) {
	return fma(w.w, x.w, fma(w.z, x.z, fma(w.y, x.y, fma(w.x, x.x, a))));
}

// main_rows is main for TPR == 1 and RPL > 1: invocation tid of
// workgroup g computes rows g*WG*RPL + tid + j*WG (j < RPL) for every
// column.
void main_rows() {
	const uint base = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG * RPL + gl_LocalInvocationID.x;
	uint wrow[MAX_RPL];
	[[unroll]] for (uint j = 0u; j < RPL; j++) {
		wrow[j] = w_base + min(base + j * WG, p.M - 1u) * p.w_stride;
	}
	float acc[MAX_RPL * MAX_COLS];
	[[unroll]] for (uint i = 0u; i < RPL * NCOLS; i++) {
		acc[i] = 0.0;
	}
#if !defined(DATA_A_PLAIN)
	const uint nsub = p.K / 32u;
	for (uint u = 0u; u < nsub; u++) {
		vec4 w[MAX_RPL * 8u];
		[[unroll]] for (uint j = 0u; j < RPL; j++) {
			vec4 v[8];
			dequant32(wrow[j] + (u / QSUB) * QS, u % QSUB, v);
			[[unroll]] for (uint i = 0u; i < 8u; i++) {
				w[j * 8u + i] = v[i];
			}
		}
		[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
			const uint xb = xcol(c) + 32u * u;
			[[unroll]] for (uint i = 0u; i < 8u; i++) {
				vec4 x;
				if (FAST) {
					x = X4((xb >> 2) + i);
				} else {
					x = vec4(X1(xb + 4u * i), X1(xb + 4u * i + 1u), X1(xb + 4u * i + 2u), X1(xb + 4u * i + 3u));
				}
				[[unroll]] for (uint j = 0u; j < RPL; j++) {
					acc[j * NCOLS + c] = fma4(w[j * 8u + i], x, acc[j * NCOLS + c]);
				}
			}
		}
	}
#else
	const uint ngroups = (p.K + 3u) / 4u;
	for (uint g = 0u; g < ngroups; g++) {
		vec4 w[MAX_RPL];
		[[unroll]] for (uint j = 0u; j < RPL; j++) {
			w[j] = load_w4(wrow[j], g, p.K, FAST);
		}
		const uint k = 4u * g;
		[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
			const uint xb = xcol(c) + k;
			vec4 x;
			if (FAST) {
				x = X4(xb >> 2);
			} else {
				x = vec4(0.0);
				[[unroll]] for (uint i = 0u; i < 4u; i++) {
					if (k + i < p.K) {
						x[i] = X1(xb + i);
					}
				}
			}
			[[unroll]] for (uint j = 0u; j < RPL; j++) {
				acc[j * NCOLS + c] = fma4(w[j], x, acc[j * NCOLS + c]);
			}
		}
	}
#endif
	[[unroll]] for (uint j = 0u; j < RPL; j++) {
		const uint row = base + j * WG;
		if (row < p.M) {
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				store_out(row, c, acc[j * NCOLS + c]);
			}
		}
	}
}

void main() {
#if defined(MUL_MAT_ID)
	if (!id_setup(NCOLS)) {
		return; // uniform: the expert has no columns in this pass
	}
#else
	w_base = p.w_off;
#endif
	if (TPR == 1u && RPL > 1u) {
		main_rows();
		return;
	}
	const uint tid = gl_LocalInvocationID.x;
	const uint lane = tid % TPR;
	// The TPR invocations of tid / TPR compute rows row0 .. row0+GR-1.
	const uint row0 = ((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * RPW + tid / TPR) * GR;
	if (RPW == 1u && row0 >= p.M) {
		return; // uniform: the whole workgroup is one group of rows
	}
	// Invocations of rows past M still take part in the barriers below.
	const bool live = row0 < p.M;
	uint wrow[MAX_GR];
	[[unroll]] for (uint j = 0u; j < GR; j++) {
		wrow[j] = w_base + min(row0 + j, p.M - 1u) * p.w_stride;
	}
	const uint ngroups = live ? (p.K + 3u) / 4u : 0u;

	float acc[MAX_GR * MAX_COLS];
	[[unroll]] for (uint v = 0u; v < NV; v++) {
		acc[v] = 0.0;
	}
#if !defined(DATA_A_PLAIN)
	// Quantized rows are whole blocks, so whole 32-element sub-blocks: one
	// per invocation and step, decoded with dequant32.
	const uint nsub = live ? p.K / 32u : 0u;
	for (uint u = lane; u < nsub; u += TPR) {
		[[unroll]] for (uint j = 0u; j < GR; j++) {
			vec4 w[8];
			dequant32(wrow[j] + (u / QSUB) * QS, u % QSUB, w);
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				const uint xb = xcol(c) + 32u * u;
				[[unroll]] for (uint i = 0u; i < 8u; i++) {
					vec4 x;
					if (FAST) {
						x = X4((xb >> 2) + i);
					} else {
						x = vec4(X1(xb + 4u * i), X1(xb + 4u * i + 1u), X1(xb + 4u * i + 2u), X1(xb + 4u * i + 3u));
					}
					acc[j * NCOLS + c] += dot(w[i], x);
				}
			}
		}
	}
#else
	for (uint g = lane; g < ngroups; g += TPR) {
		const uint k = 4u * g;
		[[unroll]] for (uint j = 0u; j < GR; j++) {
			const vec4 w = load_w4(wrow[j], g, p.K, FAST);
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				const uint xb = xcol(c) + k;
				vec4 x;
				if (FAST) {
					x = X4(xb >> 2);
				} else {
					x = vec4(0.0);
					[[unroll]] for (uint i = 0u; i < 4u; i++) {
						if (k + i < p.K) {
							x[i] = X1(xb + i);
						}
					}
				}
				acc[j * NCOLS + c] += dot(w, x);
			}
		}
	}
#endif

	if (TPR == 1u) {
		// One invocation per row (CPU devices): nothing to reduce.
		if (live) {
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				store_out(row0, c, acc[c]);
			}
		}
		return;
	}
	if (RPW > 1u) {
		// Several row groups per workgroup: a tree over each group's TPR
		// invocations in shared memory.
		[[unroll]] for (uint v = 0u; v < NV; v++) {
			red[v * WG + tid] = acc[v];
		}
		barrier();
		[[unroll]] for (uint s = TPR / 2u; s > 0u; s >>= 1) {
			if (lane < s) {
				[[unroll]] for (uint v = 0u; v < NV; v++) {
					red[v * WG + tid] += red[v * WG + tid + s];
				}
			}
			barrier();
		}
		for (uint v = lane; v < NV; v += TPR) {
			const uint row = row0 + v / NCOLS;
			if (row < p.M) {
				store_out(row, v % NCOLS, red[v * WG + tid - lane]);
			}
		}
		return;
	}
#if defined(USE_SUBGROUP)
	[[unroll]] for (uint v = 0u; v < NV; v++) {
		const float s = subgroupAdd(acc[v]);
		if (subgroupElect()) {
			red[gl_SubgroupID * NV + v] = s;
		}
	}
	barrier();
	for (uint v = tid; v < NV; v += WG) {
		float s = 0.0;
		for (uint i = 0u; i < gl_NumSubgroups; i++) {
			s += red[i * NV + v];
		}
		const uint row = row0 + v / NCOLS;
		if (row < p.M) {
			store_out(row, v % NCOLS, s);
		}
	}
#else
	[[unroll]] for (uint v = 0u; v < NV; v++) {
		red[v * WG + tid] = acc[v];
	}
	barrier();
	[[unroll]] for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s) {
			[[unroll]] for (uint v = 0u; v < NV; v++) {
				red[v * WG + tid] += red[v * WG + tid + s];
			}
		}
		barrier();
	}
	for (uint v = tid; v < NV; v += WG) {
		const uint row = row0 + v / NCOLS;
		if (row < p.M) {
			store_out(row, v % NCOLS, red[v * WG]);
		}
	}
#endif
}
