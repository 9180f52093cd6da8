#version 450
// matmul multiplies a weight matrix W (M rows of K elements, any GGML type,
// see quant.glsl) by N activation columns for prompt processing and large
// batches: y[c][r] = sum_k W[r][k] * x[c][k]. Each workgroup computes a
// BM x BN output tile, walking K in steps of BK: it dequantizes a BM x BK
// weight tile and loads a BN x BK activation tile into shared memory, and
// every invocation accumulates TM x TN outputs (TM consecutive rows by TN
// consecutive columns, read from the tiles as vec4s) in f32. CPU reference:
// engine/ops MatMulRef.
// variant: matmul_f32_f32 -DDATA_A_F32
// variant: matmul_f16_f32 -DDATA_A_F16
// variant: matmul_bf16_f32 -DDATA_A_BF16
// variant: matmul_q4_0_f32 -DDATA_A_Q4_0
// variant: matmul_q4_1_f32 -DDATA_A_Q4_1
// variant: matmul_q5_0_f32 -DDATA_A_Q5_0
// variant: matmul_q5_1_f32 -DDATA_A_Q5_1
// variant: matmul_q8_0_f32 -DDATA_A_Q8_0
// variant: matmul_q2_k_f32 -DDATA_A_Q2_K
// variant: matmul_q3_k_f32 -DDATA_A_Q3_K
// variant: matmul_q4_k_f32 -DDATA_A_Q4_K
// variant: matmul_q5_k_f32 -DDATA_A_Q5_K
// variant: matmul_q6_k_f32 -DDATA_A_Q6_K
// variant: matmul_iq4_nl_f32 -DDATA_A_IQ4_NL
// variant: matmul_iq4_xs_f32 -DDATA_A_IQ4_XS
// variant: matmul_mxfp4_f32 -DDATA_A_MXFP4
#extension GL_EXT_control_flow_attributes : enable

#define BM 64u
#define BN 64u
#define BK 32u
#define TM 8u
#define TN 8u

// WG must be (BM/TM) * (BN/TN) = 64; it is a specialization constant only
// to follow the kernels' convention. FAST (a specialization constant, so
// that lavapipe compiles one path) says that K is a multiple of 4, the
// activations are vec4-aligned and plain-type rows 16-byte aligned.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const bool FAST = false;
layout(local_size_x_id = 0) in;

layout(binding = 1) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer X4 { vec4 data_x4[]; };
layout(binding = 2) buffer Y { float data_y[]; };

// ACC adds the product to what Y holds (y += W x: a residual connection)
// instead of overwriting it.
layout(constant_id = 2) const bool ACC = false;

void store_y(uint i, float v) {
	data_y[i] = ACC ? data_y[i] + v : v;
}

#include "quant.glsl"

// Params is mirrored by engine/ops MatVecPush (same layout as matvec's).
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

// Tiles are k-major: tile_w[k][r/4] holds rows r..r+3 at depth k, tile_x
// likewise for columns, so each invocation reads its rows and columns as
// whole vec4s.
shared vec4 tile_w[BK * BM / 4u];
shared vec4 tile_x[BK * BN / 4u];

void main() {
	const uint tid = gl_LocalInvocationID.x;
	const uint m0 = gl_WorkGroupID.x * BM;
	const uint n0 = gl_WorkGroupID.y * BN;
	const uint tr = tid % (BM / TM); // rows tr*TM .. tr*TM+TM-1
	const uint tc = tid / (BM / TM); // columns tc*TN .. tc*TN+TN-1

	vec4 acc[TN][TM / 4u];
	[[unroll]] for (uint j = 0u; j < TN; j++) {
		[[unroll]] for (uint i = 0u; i < TM / 4u; i++) {
			acc[j][i] = vec4(0.0);
		}
	}

	for (uint k0 = 0u; k0 < p.K; k0 += BK) {
#if !defined(DATA_A_PLAIN)
		// Weights: BK is one 32-element sub-block of every row, and each
		// invocation decodes the one of row tid (WG == BM) with dequant32.
		{
			vec4 w[8];
			if (m0 + tid < p.M) {
				dequant32(p.w_off + (m0 + tid) * p.w_stride + (k0 / QK) * QS, (k0 / 32u) % QSUB, w);
			} else {
				[[unroll]] for (uint i = 0u; i < 8u; i++) {
					w[i] = vec4(0.0);
				}
			}
			[[unroll]] for (uint i = 0u; i < 8u; i++) {
				[[unroll]] for (uint j = 0u; j < 4u; j++) {
					tile_w[(4u * i + j) * (BM / 4u) + tid / 4u][tid % 4u] = w[i][j];
				}
			}
		}
#else
		// Weights: BM rows x BK/4 groups of four; consecutive invocations
		// take consecutive groups of a row.
		[[unroll]] for (uint t = 0u; t < (BM * BK / 4u) / WG; t++) {
			const uint idx = tid + t * WG;
			const uint r = idx / (BK / 4u);
			const uint gg = idx % (BK / 4u);
			vec4 w = vec4(0.0);
			if (m0 + r < p.M && k0 + 4u * gg < p.K) {
				w = load_w4(p.w_off + (m0 + r) * p.w_stride, k0 / 4u + gg, p.K, FAST);
			}
			[[unroll]] for (uint i = 0u; i < 4u; i++) {
				tile_w[(4u * gg + i) * (BM / 4u) + r / 4u][r % 4u] = w[i];
			}
		}
#endif
		// Activations: BN columns x BK elements.
		[[unroll]] for (uint t = 0u; t < (BN * BK / 4u) / WG; t++) {
			const uint idx = tid + t * WG;
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
				tile_x[(kk + i) * (BN / 4u) + c / 4u][c % 4u] = x[i];
			}
		}
		barrier();
		[[unroll]] for (uint k = 0u; k < BK; k++) {
			vec4 a[TM / 4u];
			vec4 b[TN / 4u];
			[[unroll]] for (uint i = 0u; i < TM / 4u; i++) {
				a[i] = tile_w[k * (BM / 4u) + tr * (TM / 4u) + i];
			}
			[[unroll]] for (uint j = 0u; j < TN / 4u; j++) {
				b[j] = tile_x[k * (BN / 4u) + tc * (TN / 4u) + j];
			}
			[[unroll]] for (uint j = 0u; j < TN; j++) {
				const float bj = b[j / 4u][j % 4u];
				[[unroll]] for (uint i = 0u; i < TM / 4u; i++) {
					acc[j][i] += a[i] * bj;
				}
			}
		}
		barrier();
	}

	[[unroll]] for (uint j = 0u; j < TN; j++) {
		const uint c = n0 + tc * TN + j;
		[[unroll]] for (uint i = 0u; i < TM; i++) {
			const uint r = m0 + tr * TM + i;
			if (c < p.N && r < p.M) {
				store_y(p.y_off + c * p.y_stride + r, acc[j][i / 4u][i % 4u]);
			}
		}
	}
}
