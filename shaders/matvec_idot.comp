#version 450
// matvec_idot is the matvec kernel (matvec.comp) for GPUs with
// shaderIntegerDotProduct: the activations come quantized to Q8_1 blocks
// (quantize_q8_1.comp), each 32-element weight sub-block is decoded to 32
// int8 in eight packed words (quant.glsl's layouts, minus any offset) and
// multiplied by the activation quants with four-element packed dot products
// (OpSDot). A sub-block of scale d (or two halves of scales d0, d1) and min
// m (x = d*q + m) against a block (dx, sx = dx*sum(qx)) adds
// dx*d*sum(q*qx) + m*sx; Q2_K's halves have mins of their own (m0, m1),
// which take the halves' sums of qx (dot products with 0x01010101). TPR
// invocations per group of GR rows, WG/TPR groups per workgroup, reduced as
// in matvec.comp; the _s16 variants read the blocks through 16- and 8-bit
// storage views (quant.glsl, A_16BIT). CPU reference: engine/ops
// MatVecQ8_1Ref.
//
// The matvec_fused variants (FUSED) end in matvec_fused.comp's decode
// epilogues, selected by EPI: EPI_SPLIT sends rows [0, s1), [s1, s2) and
// [s2, M) of a weight fused at load (q|k|v) to Y, Y1 and Y2, adding a bias
// (B) per row when has_bias is set; EPI_SWIGLU and EPI_GEGLU give each
// group of TPR invocations one output row r (GR is 2): the gate row r and
// the up row pair_off bytes after it, and store silu(gate)*up or
// gelu(gate)*up. CPU references: MatVecQ8_1Ref, then RefSwiGLU / RefGeGLU.
// variant: matvec_q4_0_q8_1_f32 -DDATA_A_Q4_0
// variant: matvec_q4_1_q8_1_f32 -DDATA_A_Q4_1
// variant: matvec_q5_0_q8_1_f32 -DDATA_A_Q5_0
// variant: matvec_q5_1_q8_1_f32 -DDATA_A_Q5_1
// variant: matvec_q8_0_q8_1_f32 -DDATA_A_Q8_0
// variant: matvec_q2_k_q8_1_f32 -DDATA_A_Q2_K
// variant: matvec_q3_k_q8_1_f32 -DDATA_A_Q3_K
// variant: matvec_q4_k_q8_1_f32 -DDATA_A_Q4_K
// variant: matvec_q5_k_q8_1_f32 -DDATA_A_Q5_K
// variant: matvec_q6_k_q8_1_f32 -DDATA_A_Q6_K
// variant: matvec_iq4_nl_q8_1_f32 -DDATA_A_IQ4_NL
// variant: matvec_iq4_xs_q8_1_f32 -DDATA_A_IQ4_XS
// variant: matvec_mxfp4_q8_1_f32 -DDATA_A_MXFP4
// variant: matvec_q4_0_q8_1_f32_sg -DDATA_A_Q4_0 -DUSE_SUBGROUP=1
// variant: matvec_q4_1_q8_1_f32_sg -DDATA_A_Q4_1 -DUSE_SUBGROUP=1
// variant: matvec_q5_0_q8_1_f32_sg -DDATA_A_Q5_0 -DUSE_SUBGROUP=1
// variant: matvec_q5_1_q8_1_f32_sg -DDATA_A_Q5_1 -DUSE_SUBGROUP=1
// variant: matvec_q8_0_q8_1_f32_sg -DDATA_A_Q8_0 -DUSE_SUBGROUP=1
// variant: matvec_q2_k_q8_1_f32_sg -DDATA_A_Q2_K -DUSE_SUBGROUP=1
// variant: matvec_q3_k_q8_1_f32_sg -DDATA_A_Q3_K -DUSE_SUBGROUP=1
// variant: matvec_q4_k_q8_1_f32_sg -DDATA_A_Q4_K -DUSE_SUBGROUP=1
// variant: matvec_q5_k_q8_1_f32_sg -DDATA_A_Q5_K -DUSE_SUBGROUP=1
// variant: matvec_q6_k_q8_1_f32_sg -DDATA_A_Q6_K -DUSE_SUBGROUP=1
// variant: matvec_iq4_nl_q8_1_f32_sg -DDATA_A_IQ4_NL -DUSE_SUBGROUP=1
// variant: matvec_iq4_xs_q8_1_f32_sg -DDATA_A_IQ4_XS -DUSE_SUBGROUP=1
// variant: matvec_mxfp4_q8_1_f32_sg -DDATA_A_MXFP4 -DUSE_SUBGROUP=1
// variant: matvec_q4_0_q8_1_f32_s16 -DDATA_A_Q4_0 -DA_16BIT=1
// variant: matvec_q8_0_q8_1_f32_s16 -DDATA_A_Q8_0 -DA_16BIT=1
// variant: matvec_q4_k_q8_1_f32_s16 -DDATA_A_Q4_K -DA_16BIT=1
// variant: matvec_q5_k_q8_1_f32_s16 -DDATA_A_Q5_K -DA_16BIT=1
// variant: matvec_q6_k_q8_1_f32_s16 -DDATA_A_Q6_K -DA_16BIT=1
// variant: matvec_q4_0_q8_1_f32_sg_s16 -DDATA_A_Q4_0 -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q8_0_q8_1_f32_sg_s16 -DDATA_A_Q8_0 -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q4_k_q8_1_f32_sg_s16 -DDATA_A_Q4_K -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q5_k_q8_1_f32_sg_s16 -DDATA_A_Q5_K -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_q6_k_q8_1_f32_sg_s16 -DDATA_A_Q6_K -DUSE_SUBGROUP=1 -DA_16BIT=1
// variant: matvec_fused_q4_0_q8_1_f32 -DDATA_A_Q4_0 -DFUSED=1
// variant: matvec_fused_q4_1_q8_1_f32 -DDATA_A_Q4_1 -DFUSED=1
// variant: matvec_fused_q5_0_q8_1_f32 -DDATA_A_Q5_0 -DFUSED=1
// variant: matvec_fused_q5_1_q8_1_f32 -DDATA_A_Q5_1 -DFUSED=1
// variant: matvec_fused_q8_0_q8_1_f32 -DDATA_A_Q8_0 -DFUSED=1
// variant: matvec_fused_q2_k_q8_1_f32 -DDATA_A_Q2_K -DFUSED=1
// variant: matvec_fused_q3_k_q8_1_f32 -DDATA_A_Q3_K -DFUSED=1
// variant: matvec_fused_q4_k_q8_1_f32 -DDATA_A_Q4_K -DFUSED=1
// variant: matvec_fused_q5_k_q8_1_f32 -DDATA_A_Q5_K -DFUSED=1
// variant: matvec_fused_q6_k_q8_1_f32 -DDATA_A_Q6_K -DFUSED=1
// variant: matvec_fused_iq4_nl_q8_1_f32 -DDATA_A_IQ4_NL -DFUSED=1
// variant: matvec_fused_iq4_xs_q8_1_f32 -DDATA_A_IQ4_XS -DFUSED=1
// variant: matvec_fused_mxfp4_q8_1_f32 -DDATA_A_MXFP4 -DFUSED=1
// variant: matvec_fused_q4_0_q8_1_f32_sg -DDATA_A_Q4_0 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q4_1_q8_1_f32_sg -DDATA_A_Q4_1 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q5_0_q8_1_f32_sg -DDATA_A_Q5_0 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q5_1_q8_1_f32_sg -DDATA_A_Q5_1 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q8_0_q8_1_f32_sg -DDATA_A_Q8_0 -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q2_k_q8_1_f32_sg -DDATA_A_Q2_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q3_k_q8_1_f32_sg -DDATA_A_Q3_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q4_k_q8_1_f32_sg -DDATA_A_Q4_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q5_k_q8_1_f32_sg -DDATA_A_Q5_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_q6_k_q8_1_f32_sg -DDATA_A_Q6_K -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_iq4_nl_q8_1_f32_sg -DDATA_A_IQ4_NL -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_iq4_xs_q8_1_f32_sg -DDATA_A_IQ4_XS -DUSE_SUBGROUP=1 -DFUSED=1
// variant: matvec_fused_mxfp4_q8_1_f32_sg -DDATA_A_MXFP4 -DUSE_SUBGROUP=1 -DFUSED=1
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_spirv_intrinsics : enable
#if defined(USE_SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

// sdot4x8 is OpSDot (SPV_KHR_integer_dot_product, opcode 4450) on two words
// of four packed signed bytes (PackedVectorFormat4x8Bit, 0): capabilities
// DotProduct (6019) and DotProductInput4x8BitPacked (6018). glslang 11
// lacks GL_EXT_integer_dot_product, so the instruction is declared here.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(int a, int b, spirv_literal int fmt);
#define SDOT(a, b) sdot4x8(int(a), int(b), 0)

layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;

layout(binding = 1) readonly buffer XQ4 { uvec4 data_xq4[]; };
layout(binding = 1) readonly buffer XDS { vec2 data_xds[]; };
layout(binding = 2) buffer Y { float data_y[]; };

// NCOLS is the pass's column bucket (1, 2, 4, 8, 16; see xcol), TPR the invocations
// per row (a power of two dividing WG), ACC adds the product to Y.
layout(constant_id = 1) const uint NCOLS = 1;
layout(constant_id = 2) const uint TPR = 32;
layout(constant_id = 3) const bool ACC = false;
// GR is the rows each group of TPR invocations computes (1..MAX_GR), as in
// matvec.comp.
layout(constant_id = 4) const uint GR = 1;
#define RPW (WG / TPR)
#define MAX_COLS 8u
#define MAX_GR 4u
#define NV (GR * NCOLS)

void store_y(uint i, float v) {
	data_y[i] = ACC ? data_y[i] + v : v;
}

#define FUSED_DECLS
#define EPI_ID 5
#include "fused_epilogue.glsl"

#include "quant.glsl"

// Params is mirrored by engine/ops MatVecPush (FusedPush in the fused
// variants, FUSED_PARAMS after it); x_off and x_stride count
// 32-bit words of the Q8_1 buffer (multiples of 4, see quantize_q8_1.comp).
layout(push_constant) uniform Params {
	uint K;        // elements per row
	uint M;        // rows
	uint N;        // activation columns, 1..NCOLS (see xcol)
	uint w_off;    // byte offset of row 0 in A
	uint w_stride; // bytes from one row to the next
	uint x_off;    // word offset of column 0 in XQ
	uint x_stride; // words from one activation column to the next
	uint y_off;    // element offset of (row 0, column 0) in Y
	uint y_stride; // elements from one output column to the next
	FUSED_PARAMS
} p;

#include "fused_epilogue.glsl"

shared float red[WG * NV];

// unsigned bytes b in [0, 2o) minus o as signed bytes, four at a time: b +
// 128 - o stays within its byte, and flipping bit 7 subtracts 128 modulo
// 256.
#define SUB_BYTES(q, o) (((q) + (128u - (o)) * 0x01010101u) ^ 0x80808080u)

// wquant32 decodes sub-block sub of the block at byte blk to 32 signed
// bytes q (q[i] holds elements 4i..4i+3, as dequant32's v[i]), the scales
// of elements 0..15 and 16..31 (d.x, d.y) and their mins (m.x, m.y):
// element e is d*q[e] + m.
#if defined(DATA_A_Q6_K) || defined(DATA_A_Q3_K) || defined(DATA_A_Q2_K)
#define SPLIT_SCALE 1
#endif
#if defined(DATA_A_Q2_K)
#define SPLIT_MIN 1
#endif
#if defined(DATA_A_IQ4_NL) || defined(DATA_A_IQ4_XS)
// iq4_bytes maps the four nibbles of v (one per byte) to their code book
// values as four signed bytes.
uint iq4_bytes(uint v) {
	uint r = 0u;
	[[unroll]] for (uint b = 0u; b < 4u; b++) {
		const uint i = (v >> (8u * b)) & 0xFu;
		r |= ((kvalues_iq4nl[i >> 2] >> (8u * (i & 3u))) & 0xFFu) << (8u * b);
	}
	return r;
}
#endif
#if defined(DATA_A_MXFP4)
// mxfp4_bytes maps the four nibbles of v (one per byte) to their doubled
// E2M1 values as four signed bytes.
uint mxfp4_bytes(uint v) {
	uint r = 0u;
	[[unroll]] for (uint b = 0u; b < 4u; b++) {
		const uint i = (v >> (8u * b)) & 0xFu;
		r |= ((kvalues_mxfp4[i >> 2] >> (8u * (i & 3u))) & 0xFFu) << (8u * b);
	}
	return r;
}
#endif
#if defined(DATA_A_Q4_1) || defined(DATA_A_Q5_1) || defined(DATA_A_Q4_K) || defined(DATA_A_Q5_K)
#define HAS_MIN 1
#endif
void wquant32(uint blk, uint sub, out uint q[8], out vec2 d, out vec2 m) {
	m = vec2(0.0);
#if defined(DATA_A_Q4_0)
	uint qw[8];
	d = vec2(half_block(blk, qw));
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		q[i] = SUB_BYTES(qw[i] & 0x0F0F0F0Fu, 8u);
		q[4u + i] = SUB_BYTES((qw[i] >> 4) & 0x0F0F0F0Fu, 8u);
	}

#elif defined(DATA_A_Q4_1)
	d = vec2(ldh(blk));
	m = vec2(ldh(blk + 2u));
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const uint w = ld32(blk + 4u + 4u * i);
		q[i] = w & 0x0F0F0F0Fu;
		q[4u + i] = (w >> 4) & 0x0F0F0F0Fu;
	}

#elif defined(DATA_A_Q5_0) || defined(DATA_A_Q5_1)
	d = vec2(ldh(blk));
	const uint qh = ld32(blk + Q5_QH);
	uint lo[4];
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		lo[i] = ld32(blk + Q5_QH + 4u + 4u * i);
	}
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		const uint h = qh >> (4u * i);
		const uint hi = (h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21);
		const uint v = ((lo[i & 3u] >> (i >= 4u ? 4u : 0u)) & 0x0F0F0F0Fu) | (hi << 4);
#if defined(DATA_A_Q5_0)
		q[i] = SUB_BYTES(v, 16u);
#else
		q[i] = v;
#endif
	}
#if defined(DATA_A_Q5_1)
	m = vec2(ldh(blk + 2u));
#endif

#elif defined(DATA_A_Q8_0)
	d = vec2(half_block(blk, q));

#elif defined(DATA_A_Q4_K) || defined(DATA_A_Q5_K)
	uint sc, mn;
	if (sub < 4u) {
		sc = ld8(blk + 4u + sub) & 63u;
		mn = ld8(blk + 8u + sub) & 63u;
	} else {
		const uint b = ld8(blk + 8u + sub);
		sc = (b & 0xFu) | ((ld8(blk + sub) >> 6) << 4);
		mn = (b >> 4) | ((ld8(blk + 4u + sub) >> 6) << 4);
	}
	d = vec2(ldh(blk) * float(sc));
	m = vec2(-ldh(blk + 2u) * float(mn));
	const uint qs = blk + QK_QS + 32u * (sub >> 1);
	const uint sh = 4u * (sub & 1u);
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		q[i] = (ld32(qs + 4u * i) >> sh) & 0x0F0F0F0Fu;
#if defined(DATA_A_Q5_K)
		q[i] |= ((ld32(blk + 16u + 4u * i) >> sub) & 0x01010101u) << 4;
#endif
	}

#elif defined(DATA_A_Q6_K)
	const uint n = sub >> 2;
	const uint t = sub & 3u;
	const uint ql = blk + 64u * n + 32u * (t & 1u);
	const uint qh = blk + 128u + 32u * n;
	const float dd = ldh(blk + 208u);
	const uint sc = ld16(blk + 192u + 2u * sub);
	d = dd * vec2(float(bitfieldExtract(int(sc), 0, 8)), float(bitfieldExtract(int(sc), 8, 8)));
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		const uint lo = (ld32(ql + 4u * i) >> (4u * (t >> 1))) & 0x0F0F0F0Fu;
		const uint hi = (ld32(qh + 4u * i) >> (2u * t)) & 0x03030303u;
		q[i] = SUB_BYTES(lo | (hi << 4), 32u);
	}

#elif defined(DATA_A_Q2_K)
	// As quant.glsl's dequant32: 2-bit values, a scale and a min per half.
	const uint qs = blk + 16u + 32u * (sub >> 2);
	const uint sh = 2u * (sub & 3u);
	const uint sc = ld16(blk + 2u * sub);
	d = ldh(blk + 80u) * vec2(float(sc & 0xFu), float((sc >> 8) & 0xFu));
	m = -ldh(blk + 82u) * vec2(float((sc >> 4) & 0xFu), float(sc >> 12));
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		q[i] = (ld32(qs + 4u * i) >> sh) & 0x03030303u;
	}

#elif defined(DATA_A_Q3_K)
	// As quant.glsl's dequant32: low two bits | high bit << 2, minus 4.
	const uint qs = blk + 32u + 32u * (sub >> 2);
	const uint sh = 2u * (sub & 3u);
	const uint hb = 4u * (sub >> 2) + (sub & 3u);
	float dl[2];
	[[unroll]] for (uint k = 0u; k < 2u; k++) {
		const uint s = 2u * sub + k;
		const uint lo = s < 8u ? (ld8(blk + 96u + s) & 0xFu) : (ld8(blk + 88u + s) >> 4);
		const uint hi = (ld8(blk + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
		dl[k] = float(int(lo | (hi << 4)) - 32);
	}
	d = ldh(blk + 108u) * vec2(dl[0], dl[1]);
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		const uint lo = (ld32(qs + 4u * i) >> sh) & 0x03030303u;
		const uint h = (ld32(blk + 4u * i) >> hb) & 0x01010101u;
		q[i] = SUB_BYTES(lo | (h << 2), 4u);
	}

#elif defined(DATA_A_IQ4_NL)
	uint qw[8];
	d = vec2(half_block(blk, qw));
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		q[i] = iq4_bytes(qw[i] & 0x0F0F0F0Fu);
		q[4u + i] = iq4_bytes((qw[i] >> 4) & 0x0F0F0F0Fu);
	}

#elif defined(DATA_A_IQ4_XS)
	const uint ls = ((ld8(blk + 4u + (sub >> 1)) >> (4u * (sub & 1u))) & 0xFu) | (((ld16(blk + 2u) >> (2u * sub)) & 3u) << 4);
	d = vec2(ldh(blk) * float(int(ls) - 32));
	const uint qs = blk + 8u + 16u * sub;
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const uint w = ld32(qs + 4u * i);
		q[i] = iq4_bytes(w & 0x0F0F0F0Fu);
		q[4u + i] = iq4_bytes((w >> 4) & 0x0F0F0F0Fu);
	}

#elif defined(DATA_A_MXFP4)
	uint qw[4];
	d = vec2(e8m0_half(mxfp4_block(blk, qw)));
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		q[i] = mxfp4_bytes(qw[i] & 0x0F0F0F0Fu);
		q[4u + i] = mxfp4_bytes((qw[i] >> 4) & 0x0F0F0F0Fu);
	}

#else
#error "matvec_idot.comp: no integer-dot decoding for this type"
#endif
}

void main() {
	const uint tid = gl_LocalInvocationID.x;
	const uint lane = tid % TPR;
	// The TPR invocations of tid / TPR compute rows row0 .. row0+GR-1.
	// In the GLU epilogues a group computes one output row: its GR = 2
	// weight rows are the gate row and the up row.
	const uint OGR = GLU ? 1u : GR;
	const uint row0 = ((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * RPW + tid / TPR) * OGR;
	if (RPW == 1u && row0 >= p.M) {
		return; // uniform: the whole workgroup is one group of rows
	}
	// Invocations of rows past M still take part in the barriers below.
	const bool live = row0 < p.M;
	uint wrow[MAX_GR];
	[[unroll]] for (uint j = 0u; j < GR; j++) {
#if defined(FUSED)
		if (GLU) {
			wrow[j] = p.w_off + min(row0, p.M - 1u) * p.w_stride + j * p.pair_off;
			continue;
		}
#endif
		wrow[j] = p.w_off + min(row0 + j, p.M - 1u) * p.w_stride;
	}
	const uint nb = p.K / 32u; // activation blocks per column
	const uint nsub = live ? nb : 0u;

	float acc[MAX_GR * MAX_COLS];
	[[unroll]] for (uint v = 0u; v < NV; v++) {
		acc[v] = 0.0;
	}
	for (uint u = lane; u < nsub; u += TPR) {
		[[unroll]] for (uint j = 0u; j < GR; j++) {
			uint wq[8];
			vec2 wd, wm;
			wquant32(wrow[j] + (u / QSUB) * QS, u % QSUB, wq, wd, wm);
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				const uint xb = xcol(c);
				const uvec4 x0 = data_xq4[(xb >> 2) + 2u * u];
				const uvec4 x1 = data_xq4[(xb >> 2) + 2u * u + 1u];
				const vec2 ds = data_xds[((xb + 8u * nb) >> 1) + u];
				const int s0 = SDOT(wq[0], x0.x) + SDOT(wq[1], x0.y) + SDOT(wq[2], x0.z) + SDOT(wq[3], x0.w);
				const int s1 = SDOT(wq[4], x1.x) + SDOT(wq[5], x1.y) + SDOT(wq[6], x1.z) + SDOT(wq[7], x1.w);
#if defined(SPLIT_SCALE)
				float v = ds.x * (wd.x * float(s0) + wd.y * float(s1));
#else
				float v = ds.x * wd.x * float(s0 + s1);
#endif
#if defined(SPLIT_MIN)
				// The halves' sums of the activation quants.
				const int t0 = SDOT(0x01010101u, x0.x) + SDOT(0x01010101u, x0.y) + SDOT(0x01010101u, x0.z) + SDOT(0x01010101u, x0.w);
				const int t1 = SDOT(0x01010101u, x1.x) + SDOT(0x01010101u, x1.y) + SDOT(0x01010101u, x1.z) + SDOT(0x01010101u, x1.w);
				v += ds.x * (wm.x * float(t0) + wm.y * float(t1));
#elif defined(HAS_MIN)
				v += wm.x * ds.y;
#endif
				acc[j * NCOLS + c] += v;
			}
		}
	}

	// The reduction is matvec.comp's.
	if (TPR == 1u) {
		if (live && GLU) {
			[[unroll]] for (uint c = 0u; c < NCOLS; c++) {
				store_glu(row0, c, acc[c], acc[NCOLS + c]);
			}
		} else if (live) {
			[[unroll]] for (uint v = 0u; v < NV; v++) {
				if (row0 + v / NCOLS < p.M) {
					store_out(row0 + v / NCOLS, v % NCOLS, acc[v]);
				}
			}
		}
		return;
	}
	if (RPW > 1u) {
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
		if (GLU) {
			for (uint c = lane; c < NCOLS && live; c += TPR) {
				store_glu(row0, c, red[c * WG + tid - lane], red[(NCOLS + c) * WG + tid - lane]);
			}
			return;
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
	if (GLU) {
		for (uint c = tid; c < NCOLS && live; c += WG) {
			float g = 0.0, u = 0.0;
			for (uint i = 0u; i < gl_NumSubgroups; i++) {
				g += red[i * NV + c];
				u += red[i * NV + NCOLS + c];
			}
			store_glu(row0, c, g, u);
		}
		return;
	}
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
	if (GLU) {
		for (uint c = tid; c < NCOLS && live; c += WG) {
			store_glu(row0, c, red[c * WG], red[(NCOLS + c) * WG]);
		}
		return;
	}
	for (uint v = tid; v < NV; v += WG) {
		const uint row = row0 + v / NCOLS;
		if (row < p.M) {
			store_out(row, v % NCOLS, red[v * WG]);
		}
	}
#endif
}
