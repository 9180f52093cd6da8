#version 450
// matvec_fused is matvec.comp's kernel (one row per group of TPR
// invocations on GPUs, RPL rows per invocation on CPU devices; without the
// GPU layout's several rows per group and 16-bit views) with the fused
// decode epilogues. CPU reference: engine/ops MatMulRef.
//
// The matvec_fused variants (FUSED) end in an epilogue that EPI selects:
// EPI_SPLIT sends rows [0, s1), [s1, s2) and [s2, M) of a weight fused at
// load (q|k|v) to three outputs (Y, Y1, Y2), adding a bias (B) per row
// when has_bias is set; EPI_SWIGLU and EPI_GEGLU compute for output row r both row r
// (gate) and the row pair_off bytes after it (up) and store
// silu(gate)*up or gelu(gate)*up (swiglu.comp's and geglu.comp's math).
// CPU references: MatMulRef, then RefSwiGLU / RefGeGLU. The matvec_fused_id
// variants (MUL_MAT_ID) are matvec.comp's matvec_id with the GLU
// epilogues (and EPI_SWIGLU_OAI): a mixture of experts' gate and up
// products and its GLU in one dispatch (fused_epilogue.glsl; CPU
// reference RefMatVecID, then RefSwiGLU / RefSwiGLUOAI).
// variant: matvec_fused_f32_f32 -DDATA_A_F32 -DFUSED=1
// variant: matvec_fused_f16_f32 -DDATA_A_F16 -DFUSED=1
// variant: matvec_fused_bf16_f32 -DDATA_A_BF16 -DFUSED=1
// variant: matvec_fused_q4_0_f32 -DDATA_A_Q4_0 -DFUSED=1
// variant: matvec_fused_q4_1_f32 -DDATA_A_Q4_1 -DFUSED=1
// variant: matvec_fused_q5_0_f32 -DDATA_A_Q5_0 -DFUSED=1
// variant: matvec_fused_q5_1_f32 -DDATA_A_Q5_1 -DFUSED=1
// variant: matvec_fused_q8_0_f32 -DDATA_A_Q8_0 -DFUSED=1
// variant: matvec_fused_q2_k_f32 -DDATA_A_Q2_K -DFUSED=1
// variant: matvec_fused_q3_k_f32 -DDATA_A_Q3_K -DFUSED=1
// variant: matvec_fused_q4_k_f32 -DDATA_A_Q4_K -DFUSED=1
// variant: matvec_fused_q5_k_f32 -DDATA_A_Q5_K -DFUSED=1
// variant: matvec_fused_q6_k_f32 -DDATA_A_Q6_K -DFUSED=1
// variant: matvec_fused_iq4_nl_f32 -DDATA_A_IQ4_NL -DFUSED=1
// variant: matvec_fused_iq4_xs_f32 -DDATA_A_IQ4_XS -DFUSED=1
// variant: matvec_fused_mxfp4_f32 -DDATA_A_MXFP4 -DFUSED=1
// variant: matvec_fused_f32_f32_sg -DDATA_A_F32 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_f16_f32_sg -DDATA_A_F16 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_bf16_f32_sg -DDATA_A_BF16 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q4_0_f32_sg -DDATA_A_Q4_0 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q4_1_f32_sg -DDATA_A_Q4_1 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q5_0_f32_sg -DDATA_A_Q5_0 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q5_1_f32_sg -DDATA_A_Q5_1 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q8_0_f32_sg -DDATA_A_Q8_0 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q2_k_f32_sg -DDATA_A_Q2_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q3_k_f32_sg -DDATA_A_Q3_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q4_k_f32_sg -DDATA_A_Q4_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q5_k_f32_sg -DDATA_A_Q5_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q6_k_f32_sg -DDATA_A_Q6_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_iq4_nl_f32_sg -DDATA_A_IQ4_NL -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_iq4_xs_f32_sg -DDATA_A_IQ4_XS -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_mxfp4_f32_sg -DDATA_A_MXFP4 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_f32_f32_xu -DDATA_A_F32 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_f16_f32_xu -DDATA_A_F16 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_bf16_f32_xu -DDATA_A_BF16 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q4_0_f32_xu -DDATA_A_Q4_0 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q4_1_f32_xu -DDATA_A_Q4_1 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q5_0_f32_xu -DDATA_A_Q5_0 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q5_1_f32_xu -DDATA_A_Q5_1 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q8_0_f32_xu -DDATA_A_Q8_0 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q2_k_f32_xu -DDATA_A_Q2_K -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q3_k_f32_xu -DDATA_A_Q3_K -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q4_k_f32_xu -DDATA_A_Q4_K -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q5_k_f32_xu -DDATA_A_Q5_K -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_q6_k_f32_xu -DDATA_A_Q6_K -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_iq4_nl_f32_xu -DDATA_A_IQ4_NL -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_iq4_xs_f32_xu -DDATA_A_IQ4_XS -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_mxfp4_f32_xu -DDATA_A_MXFP4 -DX_UNIFORM=1 -DFUSED=1
// variant: matvec_fused_f32_f32_xt -DDATA_A_F32 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_f16_f32_xt -DDATA_A_F16 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_bf16_f32_xt -DDATA_A_BF16 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q4_0_f32_xt -DDATA_A_Q4_0 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q4_1_f32_xt -DDATA_A_Q4_1 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q5_0_f32_xt -DDATA_A_Q5_0 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q5_1_f32_xt -DDATA_A_Q5_1 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q8_0_f32_xt -DDATA_A_Q8_0 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q2_k_f32_xt -DDATA_A_Q2_K -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q3_k_f32_xt -DDATA_A_Q3_K -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q4_k_f32_xt -DDATA_A_Q4_K -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q5_k_f32_xt -DDATA_A_Q5_K -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_q6_k_f32_xt -DDATA_A_Q6_K -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_iq4_nl_f32_xt -DDATA_A_IQ4_NL -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_iq4_xs_f32_xt -DDATA_A_IQ4_XS -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
// variant: matvec_fused_mxfp4_f32_xt -DDATA_A_MXFP4 -DX_UNIFORM=1 -DFUSED=1 -DA_TEXEL=1
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
// variant: matvec_fused_id_f32_f32 -DDATA_A_F32 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_f16_f32 -DDATA_A_F16 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_bf16_f32 -DDATA_A_BF16 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_0_f32 -DDATA_A_Q4_0 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_1_f32 -DDATA_A_Q4_1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_0_f32 -DDATA_A_Q5_0 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_1_f32 -DDATA_A_Q5_1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q8_0_f32 -DDATA_A_Q8_0 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q2_k_f32 -DDATA_A_Q2_K -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q3_k_f32 -DDATA_A_Q3_K -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_k_f32 -DDATA_A_Q4_K -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_k_f32 -DDATA_A_Q5_K -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q6_k_f32 -DDATA_A_Q6_K -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_iq4_nl_f32 -DDATA_A_IQ4_NL -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_iq4_xs_f32 -DDATA_A_IQ4_XS -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_mxfp4_f32 -DDATA_A_MXFP4 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_f32_f32_sg -DDATA_A_F32 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_f16_f32_sg -DDATA_A_F16 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_bf16_f32_sg -DDATA_A_BF16 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_0_f32_sg -DDATA_A_Q4_0 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_1_f32_sg -DDATA_A_Q4_1 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_0_f32_sg -DDATA_A_Q5_0 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_1_f32_sg -DDATA_A_Q5_1 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q8_0_f32_sg -DDATA_A_Q8_0 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q2_k_f32_sg -DDATA_A_Q2_K -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q3_k_f32_sg -DDATA_A_Q3_K -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_k_f32_sg -DDATA_A_Q4_K -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_k_f32_sg -DDATA_A_Q5_K -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q6_k_f32_sg -DDATA_A_Q6_K -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_iq4_nl_f32_sg -DDATA_A_IQ4_NL -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_iq4_xs_f32_sg -DDATA_A_IQ4_XS -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_mxfp4_f32_sg -DDATA_A_MXFP4 -DUSE_SUBGROUP=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_f32_f32_xt -DDATA_A_F32 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_f16_f32_xt -DDATA_A_F16 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_bf16_f32_xt -DDATA_A_BF16 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_0_f32_xt -DDATA_A_Q4_0 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_1_f32_xt -DDATA_A_Q4_1 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_0_f32_xt -DDATA_A_Q5_0 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_1_f32_xt -DDATA_A_Q5_1 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q8_0_f32_xt -DDATA_A_Q8_0 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q2_k_f32_xt -DDATA_A_Q2_K -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q3_k_f32_xt -DDATA_A_Q3_K -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q4_k_f32_xt -DDATA_A_Q4_K -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q5_k_f32_xt -DDATA_A_Q5_K -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_q6_k_f32_xt -DDATA_A_Q6_K -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_iq4_nl_f32_xt -DDATA_A_IQ4_NL -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_iq4_xs_f32_xt -DDATA_A_IQ4_XS -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
// variant: matvec_fused_id_mxfp4_f32_xt -DDATA_A_MXFP4 -DX_UNIFORM=1 -DA_TEXEL=1 -DFUSED=1 -DMUL_MAT_ID=1
#define FUSED_DECLS
#define EPI_ID 6
#include "fused_epilogue.glsl"
// MAX_ACC is the accumulators per row: a gate and an up sum per column.
#if defined(FUSED)
#define MAX_ACC 32u
#else
#define MAX_ACC 16u
#endif

// ACC adds the product to what Y holds (y += W x: a residual connection)
// instead of overwriting it.
layout(constant_id = 4) const bool ACC = false;

void store_y(uint i, float v) {
	data_y[i] = ACC ? data_y[i] + v : v;
}

#include "quant.glsl"

// Params is mirrored by engine/ops FusedPush (MatVecPush, then FUSED_PARAMS).
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

// store_row stores the sums of column c of a row: acc (and, in the GLU
// epilogues, up).
void store_row(uint row, uint c, float acc, float up) {
	if (GLU) {
		store_glu(row, c, acc, up);
	} else {
		store_out(row, c, acc);
	}
}

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
// serve RPL rows.
layout(constant_id = 5) const uint RPL = 1;
#define MAX_RPL 16u

// red holds per-invocation (shared-memory path) or per-subgroup partial
// sums; WG entries per column (and per up sum) is enough for any subgroup
// size.
shared float red[WG * MAX_ACC];

// fma4 returns a + dot(w, x) as a chain of fused multiply-adds.
float fma4(vec4 w, vec4 x, float a) {
	return fma(w.w, x.w, fma(w.z, x.z, fma(w.y, x.y, fma(w.x, x.x, a))));
}

// main_rows is main for TPR == 1 and RPL > 1: invocation tid of
// workgroup g computes rows g*WG*ORPL + tid + j*WG (j < ORPL) for every
// column. ORPL is RPL, or in the GLU epilogues RPL/2: the invocation's RPL
// weight rows are then its ORPL gate rows and their up rows.
void main_rows() {
	const uint ORPL = GLU ? RPL / 2u : RPL;
	const uint base = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG * ORPL + gl_LocalInvocationID.x;
	uint wrow[MAX_RPL];
	[[unroll]] for (uint j = 0u; j < RPL; j++) {
		wrow[j] = w_base + min(base + (j % ORPL) * WG, p.M - 1u) * p.w_stride;
#if defined(FUSED)
		if (j >= ORPL) {
			wrow[j] += p.pair_off;
		}
#endif
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
	[[unroll]] for (uint j = 0u; j < ORPL; j++) {
		const uint row = base + j * WG;
		if (row < p.M) {
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				store_row(row, c, acc[j * NCOLS + c], GLU ? acc[(j + ORPL) * NCOLS + c] : 0.0);
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
	const uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * RPW + tid / TPR;
	if (RPW == 1u && row >= p.M) {
		return; // uniform: the whole workgroup is one row
	}
	// Invocations of rows past M still take part in the barriers below.
	const bool live = row < p.M;
	const uint wrow = w_base + min(row, p.M - 1u) * p.w_stride;
	const uint ngroups = live ? (p.K + 3u) / 4u : 0u;
	// The GLU epilogues also sum the up row, into acc[NCOLS + c].
	const uint NACC = GLU ? 2u * NCOLS : NCOLS;
#if defined(FUSED)
	const uint urow = wrow + p.pair_off;
#else
	const uint urow = wrow;
#endif

	float acc[MAX_ACC];
	[[unroll]] for (uint c = 0u; c < NACC; c++) {
		acc[c] = 0.0;
	}
#if !defined(DATA_A_PLAIN)
	// Quantized rows are whole blocks, so whole 32-element sub-blocks: one
	// per invocation and step, decoded with dequant32.
	const uint nsub = live ? p.K / 32u : 0u;
	for (uint u = lane; u < nsub; u += TPR) {
		vec4 w[8], wu[8];
		dequant32(wrow + (u / QSUB) * QS, u % QSUB, w);
		if (GLU) {
			dequant32(urow + (u / QSUB) * QS, u % QSUB, wu);
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
				acc[c] += dot(w[i], x);
				if (GLU) {
					acc[NCOLS + c] += dot(wu[i], x);
				}
			}
		}
	}
#else
	for (uint g = lane; g < ngroups; g += TPR) {
		const vec4 w = load_w4(wrow, g, p.K, FAST);
		const vec4 wu = GLU ? load_w4(urow, g, p.K, FAST) : vec4(0.0);
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
			acc[c] += dot(w, x);
			if (GLU) {
				acc[NCOLS + c] += dot(wu, x);
			}
		}
	}
#endif

	if (TPR == 1u) {
		// One invocation per row (CPU devices): nothing to reduce.
		if (live) {
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				store_row(row, c, acc[c], GLU ? acc[NCOLS + c] : 0.0);
			}
		}
		return;
	}
	if (RPW > 1u) {
		// Several rows per workgroup: a tree over each row's TPR
		// invocations in shared memory.
		[[unroll]] for (uint c = 0u; c < NACC; c++) {
			red[c * WG + tid] = acc[c];
		}
		barrier();
		[[unroll]] for (uint s = TPR / 2u; s > 0u; s >>= 1) {
			if (lane < s) {
				[[unroll]] for (uint c = 0u; c < NACC; c++) {
					red[c * WG + tid] += red[c * WG + tid + s];
				}
			}
			barrier();
		}
		if (live) {
			for (uint c = lane; c < NCOLS; c += TPR) {
				store_row(row, c, red[c * WG + tid - lane], GLU ? red[(NCOLS + c) * WG + tid - lane] : 0.0);
			}
		}
		return;
	}
#if defined(USE_SUBGROUP)
	[[unroll]] for (uint c = 0u; c < NACC; c++) {
		const float s = subgroupAdd(acc[c]);
		if (subgroupElect()) {
			red[gl_SubgroupID * MAX_ACC + c] = s;
		}
	}
	barrier();
	if (tid < NCOLS) {
		float s = 0.0, su = 0.0;
		for (uint i = 0u; i < gl_NumSubgroups; i++) {
			s += red[i * MAX_ACC + tid];
			if (GLU) {
				su += red[i * MAX_ACC + NCOLS + tid];
			}
		}
		store_row(row, tid, s, su);
	}
#else
	[[unroll]] for (uint c = 0u; c < NACC; c++) {
		red[c * WG + tid] = acc[c];
	}
	barrier();
	[[unroll]] for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s) {
			[[unroll]] for (uint c = 0u; c < NACC; c++) {
				red[c * WG + tid] += red[c * WG + tid + s];
			}
		}
		barrier();
	}
	if (tid < NCOLS) {
		store_row(row, tid, red[tid * WG], GLU ? red[(NCOLS + tid) * WG] : 0.0);
	}
#endif
}
