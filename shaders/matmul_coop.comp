#version 450
// matmul_coop is the prefill matmul (matmul.comp) on the GPU's matrix units
// (tensor cores, WMMA, XMX) through cooperative matrices: y[c][r] =
// sum_k W[r][k] * x[c][k] with the weights dequantized to f16 and the
// activations rounded to f16, accumulated in f32. Each workgroup computes a
// BM x BN output tile from four subgroups in a 2 x 2 grid, each subgroup an
// SM x SN block of CM x CN cooperative matrices of TM x TN (the device's
// shape, specialization constants). It walks K in steps of BK: the
// invocations dequantize a BM x BK weight tile and convert a BN x BK
// activation tile into f16 shared memory, and every subgroup multiplies
// TM x TK by TK x TN matrices out of them. The accumulators go out through
// shared memory, so that partial tiles and ACC are handled by plain
// bounds-checked stores. CPU reference: engine/ops MatMulRef (with the
// f16 roundings, the test's tolerance).
//
// It is written with GL_NV_cooperative_matrix, the only cooperative-matrix
// extension glslang 11 knows; shaders/compile.sh turns every *_nv variant
// into a *_khr twin for VK_KHR_cooperative_matrix devices (shaders/spvkhr).
// variant: matmul_coop_f32_f32_nv -DDATA_A_F32
// variant: matmul_coop_f16_f32_nv -DDATA_A_F16
// variant: matmul_coop_bf16_f32_nv -DDATA_A_BF16
// variant: matmul_coop_q4_0_f32_nv -DDATA_A_Q4_0
// variant: matmul_coop_q4_1_f32_nv -DDATA_A_Q4_1
// variant: matmul_coop_q5_0_f32_nv -DDATA_A_Q5_0
// variant: matmul_coop_q5_1_f32_nv -DDATA_A_Q5_1
// variant: matmul_coop_q8_0_f32_nv -DDATA_A_Q8_0
// variant: matmul_coop_q2_k_f32_nv -DDATA_A_Q2_K
// variant: matmul_coop_q3_k_f32_nv -DDATA_A_Q3_K
// variant: matmul_coop_q4_k_f32_nv -DDATA_A_Q4_K
// variant: matmul_coop_q5_k_f32_nv -DDATA_A_Q5_K
// variant: matmul_coop_q6_k_f32_nv -DDATA_A_Q6_K
// variant: matmul_coop_iq4_nl_f32_nv -DDATA_A_IQ4_NL
// variant: matmul_coop_iq4_xs_f32_nv -DDATA_A_IQ4_XS
// variant: matmul_coop_mxfp4_f32_nv -DDATA_A_MXFP4
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require

// SCOPE_SUBGROUP is SPIR-V's Subgroup scope, gl_ScopeSubgroup without
// GL_KHR_memory_scope_semantics (which would switch the module to the Vulkan
// memory model, a device feature of its own).
#define SCOPE_SUBGROUP 3

#define BM 64u
#define BN 64u
#define BK 32u
// Each subgroup's block of the output tile (the four of them make BM x BN).
#define SM 32u
#define SN 32u
// Row strides of the shared tiles, padded by 16 bytes: cooperative loads and
// stores want 16-byte aligned rows, and the padding spreads the rows over
// the memory banks.
#define SK (BK + 8u)  // f16 per row of tile_w and tile_x
#define SR (BM + 4u)  // f32 per column of tile_y

// WG is four subgroups (engine/ops passes 4 x the subgroup size). TM x TN x
// TK is the cooperative-matrix shape: TM and TN divide SM and SN, TK divides
// BK, all multiples of 8 (engine/ops picks one the device supports).
layout(constant_id = 0) const uint WG = 128;
// FAST says that K is a multiple of 4, the activations are vec4-aligned and
// plain-type rows 16-byte aligned (as in matmul.comp).
layout(constant_id = 1) const bool FAST = false;
// ACC adds the product to what Y holds instead of overwriting it.
layout(constant_id = 2) const bool ACC = false;
layout(constant_id = 3) const uint TM = 16;
layout(constant_id = 4) const uint TN = 16;
layout(constant_id = 5) const uint TK = 16;
layout(local_size_x_id = 0) in;

// The loops over the cooperative matrices run to the largest counts (TM, TN
// and TK of 8) and skip the steps past the specialized CM, CN and KS, so
// that they unroll before specialization.
const uint CM = SM / TM;
const uint CN = SN / TN;
const uint KS = BK / TK;
#define MAXC 4u

layout(binding = 1) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer X4 { vec4 data_x4[]; };
layout(binding = 2) buffer Y { float data_y[]; };

#include "quant.glsl"

// Params is mirrored by engine/ops MatVecPush (the layout of matmul.comp's).
layout(push_constant) uniform Params {
	uint K;        // elements per row
	uint M;        // rows
	uint N;        // activation columns
	uint w_off;    // byte offset of row 0 in A
	uint w_stride; // bytes from one row to the next
	uint x_off;    // element offset of column 0 in X
	uint x_stride; // elements from one activation column to the next
	uint y_off;    // element offset of (row 0, column 0) in Y
	uint y_stride; // elements from one output column to the next
} p;

// tile_w is the weight tile row-major (row r at r*SK), tile_x the
// activation tile column by column (column c at c*SK), which is the TK x TN
// B matrix in column-major order; tile_y the output tile column-major
// (column c at c*SR), as Y stores it.
shared float16_t tile_w[BM * SK];
shared float16_t tile_x[BN * SK];
shared float tile_y[BN * SR];

void main() {
	const uint tid = gl_LocalInvocationID.x;
	const uint m0 = gl_WorkGroupID.x * BM;
	const uint n0 = gl_WorkGroupID.y * BN;
	// The subgroup's block: rows sm .. sm+SM-1, columns sn .. sn+SN-1.
	const uint sm = (gl_SubgroupID % 2u) * SM;
	const uint sn = (gl_SubgroupID / 2u) * SN;
	// Four subgroups are expected (WG is four times the device's subgroup
	// size); should a driver run more, smaller ones, the first four do the
	// work, each a whole block of its own (the matrices are per subgroup).
	const bool working = gl_SubgroupID < 4u;

	fcoopmatNV<32, SCOPE_SUBGROUP, TM, TN> acc[MAXC][MAXC];
	[[unroll]] for (uint i = 0u; i < MAXC; i++) {
		[[unroll]] for (uint j = 0u; j < MAXC; j++) {
			acc[i][j] = fcoopmatNV<32, SCOPE_SUBGROUP, TM, TN>(0.0);
		}
	}

	for (uint k0 = 0u; k0 < p.K; k0 += BK) {
#if !defined(DATA_A_PLAIN)
		// Weights: BK is one 32-element sub-block of every row, decoded
		// with dequant32 by one invocation per row.
		for (uint r = tid; r < BM; r += WG) {
			vec4 w[8];
			if (m0 + r < p.M) {
				dequant32(p.w_off + (m0 + r) * p.w_stride + (k0 / QK) * QS, (k0 / 32u) % QSUB, w);
			} else {
				[[unroll]] for (uint i = 0u; i < 8u; i++) {
					w[i] = vec4(0.0);
				}
			}
			[[unroll]] for (uint i = 0u; i < 8u; i++) {
				[[unroll]] for (uint j = 0u; j < 4u; j++) {
					tile_w[r * SK + 4u * i + j] = float16_t(w[i][j]);
				}
			}
		}
#else
		// Weights: BM rows x BK/4 groups of four; consecutive invocations
		// take consecutive groups of a row.
		for (uint idx = tid; idx < BM * BK / 4u; idx += WG) {
			const uint r = idx / (BK / 4u);
			const uint g = idx % (BK / 4u);
			vec4 w = vec4(0.0);
			if (m0 + r < p.M && k0 + 4u * g < p.K) {
				w = load_w4(p.w_off + (m0 + r) * p.w_stride, k0 / 4u + g, p.K, FAST);
			}
			[[unroll]] for (uint i = 0u; i < 4u; i++) {
				tile_w[r * SK + 4u * g + i] = float16_t(w[i]);
			}
		}
#endif
		// Activations: BN columns x BK elements, four at a time.
		for (uint idx = tid; idx < BN * BK / 4u; idx += WG) {
			const uint c = idx / (BK / 4u);
			const uint kk = 4u * (idx % (BK / 4u));
			vec4 x = vec4(0.0);
			if (n0 + c < p.N && k0 + kk < p.K) {
				const uint xb = p.x_off + (n0 + c) * p.x_stride + k0 + kk;
				if (FAST) {
					x = data_x4[xb >> 2];
				} else {
					[[unroll]] for (uint i = 0u; i < 4u; i++) {
						if (k0 + kk + i < p.K) {
							x[i] = data_x[xb + i];
						}
					}
				}
			}
			[[unroll]] for (uint i = 0u; i < 4u; i++) {
				tile_x[c * SK + kk + i] = float16_t(x[i]);
			}
		}
		barrier();
		[[unroll]] for (uint ks = 0u; ks < MAXC; ks++) {
			if (working && ks < KS) {
				fcoopmatNV<16, SCOPE_SUBGROUP, TM, TK> a[MAXC];
				fcoopmatNV<16, SCOPE_SUBGROUP, TK, TN> b[MAXC];
				[[unroll]] for (uint i = 0u; i < MAXC; i++) {
					if (i < CM) {
						coopMatLoadNV(a[i], tile_w, (sm + i * TM) * SK + ks * TK, SK, false);
					}
				}
				[[unroll]] for (uint j = 0u; j < MAXC; j++) {
					if (j < CN) {
						coopMatLoadNV(b[j], tile_x, (sn + j * TN) * SK + ks * TK, SK, true);
					}
				}
				[[unroll]] for (uint i = 0u; i < MAXC; i++) {
					[[unroll]] for (uint j = 0u; j < MAXC; j++) {
						if (i < CM && j < CN) {
							acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
						}
					}
				}
			}
		}
		barrier();
	}

	[[unroll]] for (uint i = 0u; i < MAXC; i++) {
		[[unroll]] for (uint j = 0u; j < MAXC; j++) {
			if (working && i < CM && j < CN) {
				coopMatStoreNV(acc[i][j], tile_y, (sn + j * TN) * SR + sm + i * TM, SR, true);
			}
		}
	}
	barrier();
	for (uint idx = tid; idx < BM * BN; idx += WG) {
		const uint c = idx / BM;
		const uint r = idx % BM;
		if (n0 + c < p.N && m0 + r < p.M) {
			const uint i = p.y_off + (n0 + c) * p.y_stride + m0 + r;
			const float v = tile_y[c * SR + r];
			data_y[i] = ACC ? data_y[i] + v : v;
		}
	}
}
