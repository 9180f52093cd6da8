#version 450
// matmul multiplies a weight matrix W (M rows of K elements, any GGML type,
// see quant.glsl) by N activation columns for prompt processing and large
// batches: y[c][r] = sum_k W[r][k] * x[c][k]. Each workgroup computes a
// BM x BN output tile, walking K in steps of BK: it dequantizes a BM x BK
// weight tile and loads a BN x BK activation tile into shared memory, and
// every invocation accumulates TM x TN outputs in f32. CPU reference:
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
#extension GL_EXT_control_flow_attributes : enable

#define BM 64u
#define BN 64u
#define BK 32u
#define TM 4u
#define TN 4u

// WG must be (BM/TM) * (BN/TN) = 256; it is a specialization constant only
// to follow the kernels' convention. FAST says that plain-type rows are
// 16-byte aligned and K a multiple of 4 (quant.glsl's wide path).
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const bool FAST = false;
layout(local_size_x_id = 0) in;

layout(binding = 1) readonly buffer X { float data_x[]; };
layout(binding = 2) writeonly buffer Y { float data_y[]; };

#include "quant.glsl"

// Params is mirrored by engine/ops matmulParams (same layout as matvec's).
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

// Tiles are k-major with one pad column against bank conflicts.
shared float tile_w[BK * (BM + 1u)];
shared float tile_x[BK * (BN + 1u)];

void main() {
	const uint tid = gl_LocalInvocationID.x;
	const uint m0 = gl_WorkGroupID.x * BM;
	const uint n0 = gl_WorkGroupID.y * BN;
	const uint tr = tid % (BM / TM); // rows tr + (BM/TM)*i
	const uint tc = tid / (BM / TM); // columns tc + (BN/TN)*j

	float acc[TM * TN];
	[[unroll]] for (uint i = 0u; i < TM * TN; i++) {
		acc[i] = 0.0;
	}

	for (uint k0 = 0u; k0 < p.K; k0 += BK) {
		// Weights: BM rows x BK/4 groups of four.
		[[unroll]] for (uint t = 0u; t < (BM * BK / 4u) / WG; t++) {
			const uint idx = tid + t * WG;
			const uint r = idx / (BK / 4u);
			const uint gg = idx % (BK / 4u);
			vec4 w = vec4(0.0);
			if (m0 + r < p.M && k0 + 4u * gg < p.K) {
				w = load_w4(p.w_off + (m0 + r) * p.w_stride, k0 / 4u + gg, p.K, FAST);
			}
			[[unroll]] for (uint i = 0u; i < 4u; i++) {
				tile_w[(4u * gg + i) * (BM + 1u) + r] = w[i];
			}
		}
		// Activations: BN columns x BK elements, consecutive invocations
		// reading consecutive k.
		[[unroll]] for (uint t = 0u; t < (BN * BK) / WG; t++) {
			const uint idx = tid + t * WG;
			const uint c = idx / BK;
			const uint kk = idx % BK;
			float x = 0.0;
			if (n0 + c < p.N && k0 + kk < p.K) {
				x = data_x[p.x_off + (n0 + c) * p.x_stride + k0 + kk];
			}
			tile_x[kk * (BN + 1u) + c] = x;
		}
		barrier();
		[[unroll]] for (uint k = 0u; k < BK; k++) {
			float a[TM];
			float b[TN];
			[[unroll]] for (uint i = 0u; i < TM; i++) {
				a[i] = tile_w[k * (BM + 1u) + tr + i * (BM / TM)];
			}
			[[unroll]] for (uint j = 0u; j < TN; j++) {
				b[j] = tile_x[k * (BN + 1u) + tc + j * (BN / TN)];
			}
			[[unroll]] for (uint j = 0u; j < TN; j++) {
				[[unroll]] for (uint i = 0u; i < TM; i++) {
					acc[j * TM + i] += a[i] * b[j];
				}
			}
		}
		barrier();
	}

	[[unroll]] for (uint j = 0u; j < TN; j++) {
		const uint c = n0 + tc + j * (BN / TN);
		if (c >= p.N) {
			continue;
		}
		[[unroll]] for (uint i = 0u; i < TM; i++) {
			const uint r = m0 + tr + i * (BM / TM);
			if (r < p.M) {
				data_y[p.y_off + c * p.y_stride + r] = acc[j * TM + i];
			}
		}
	}
}
