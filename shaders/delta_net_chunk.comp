#version 450
// delta_net_chunk: the gated delta rule of Qwen3.5's linear-attention
// layers in its chunked form, for prompts: the same results as
// delta_net.comp (up to f32 rounding) with the rows of a chunk of CHUNK
// rows worked on together instead of one after another. One workgroup per
// (value head h, run), invocation j < HEAD_V owns column j of the head's
// state S (HEAD_K values, S[i][j] at state offset j*HEAD_K+i) in
// registers, as delta_net.comp. Per chunk of n <= CHUNK rows (the rows
// past n padded with k = q = 0, b = g = 0, which leaves everything alone):
//   1. the workgroup puts the chunk's raw q and k of key head h % k_heads
//      into shared memory, with g_t = softplus(alpha + dt_bias) * a, their
//      cumulative sums G_t within the chunk and b_t = sigmoid(beta);
//   2. the Gram products k_t.k_s and q_t.k_s (s <= t), one (t, s) per
//      invocation, whose diagonal gives the L2 norms' inverses
//      (1/max(|x|, eps); q's also times 1/sqrt(HEAD_K)), which scale
//      everything after (q and k stay raw in shared memory); then
//      A[t][s] = b_t exp(G_t-G_s) k_t.k_s (s < t),
//      QK[t][s] = exp(G_t-G_s) q_t.k_s (s <= t) and T = (I + A)^-1 by
//      forward substitution, column s by invocation s;
//   3. invocation j, for its column S_j: the chunk's new values
//      d = T diag(b) (v_j - diag(exp G) K S_j), outputs
//      o_t = exp(G_t) q_t.S_j + sum_{s<=t} QK[t][s] d_s and the state
//      S_j = exp(G_last) S_j + sum_s exp(G_last-G_s) k_s d_s.
// exp is only taken of G_t - G_s (s <= t) and of G_t, never of -G: the
// decays are at most 1. Shared memory is 4*(2*CHUNK*HEAD_K +
// 3*CHUNK*CHUNK + 4*CHUNK) bytes; WG >= CHUNK.
// The loops over HEAD_K keys (a column's registers) and over CHUNK rows
// within a column's small sums are unrolled; the loops over a chunk's
// elements, pairs and rows around the big bodies are not: lavapipe's
// compiler takes minutes over this kernel unrolled for 32-row chunks and
// seconds as it is. lavapipe ends a shader's loops after 65535 iterations
// in all: a chunk costs CHUNK*HEAD_K/WG + 2*CHUNK*CHUNK/WG + 2*CHUNK + 1
// of them (at most 65 for chunks of 16 rows, HEAD_K <= WG: about 4 a
// row), so runs of up to about 16000 rows there.
// Runs outside the slots or the rows the bindings hold are skipped (the
// whole workgroup: barriers stay in uniform control flow). CPU reference:
// engine/ops RefGatedDeltaNet (chunkedGDN in deltanet_chunk_test.go spells
// out this form in f64).
#include "common.glsl"

layout(constant_id = 1) const uint HEAD_K = 128;
layout(constant_id = 2) const uint HEAD_V = 128;
// CHUNK is the rows per chunk (at most WG).
layout(constant_id = 3) const uint CHUNK = 16;

layout(binding = 0) readonly buffer QKV { float data_qkv[]; };
layout(binding = 1) readonly buffer B { float data_beta[]; };
layout(binding = 2) readonly buffer A { float data_alpha[]; };
layout(binding = 3) readonly buffer DT { float data_dt[]; };
layout(binding = 4) readonly buffer AA { float data_a[]; };
layout(binding = 5) buffer S { float data_s[]; };
layout(binding = 6) readonly buffer R { int data_runs[]; };
layout(binding = 7) writeonly buffer O { float data_out[]; };

// Params is mirrored by engine/ops deltaNetPush.
layout(push_constant) uniform Params {
	uint k_heads;
	uint v_heads;
	uint slots;
	uint rows;   // batch rows the bindings hold
	uint n_runs;
	float eps;
} p;

shared float sh_k[CHUNK * HEAD_K];  // [t][i], as read
shared float sh_q[CHUNK * HEAD_K];  // [t][i], as read
shared float sh_a[CHUNK * CHUNK];   // A[t][s]
shared float sh_t[CHUNK * CHUNK];   // T[t][s]
shared float sh_qk[CHUNK * CHUNK];  // QK[t][s]
shared float sh_g[CHUNK];           // g_t, then G_t
shared float sh_b[CHUNK];
shared float sh_rn[2 * CHUNK];      // 1/|k_t|, then scale/|q_t|

void main() {
	const uint g = group_id();
	if (g >= p.n_runs * p.v_heads) {
		return;
	}
	const uint run = g / p.v_heads, h = g % p.v_heads, kh = h % p.k_heads;
	const int slot = data_runs[4 * run], row = data_runs[4 * run + 1], rows = data_runs[4 * run + 2], pos = data_runs[4 * run + 3];
	if (slot < 0 || uint(slot) >= p.slots || row < 0 || rows < 1 || uint(row) + uint(rows) > p.rows || pos < 0) {
		return;
	}
	const uint j = gl_LocalInvocationID.x;
	const bool owns = j < HEAD_V;
	const uint cols = 2 * p.k_heads * HEAD_K + p.v_heads * HEAD_V;
	const uint sbase = ((uint(slot) * p.v_heads + h) * HEAD_V + j) * HEAD_K;
	float col[HEAD_K];
	[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
		col[i] = owns && pos > 0 ? data_s[sbase + i] : 0.0;
	}
	const float dt = data_dt[h], a = data_a[h];
	const float scale = inversesqrt(float(HEAD_K));
	for (uint c0 = 0; c0 < uint(rows); c0 += CHUNK) {
		const uint n = min(CHUNK, uint(rows) - c0);
		const uint r0 = uint(row) + c0;
		// 1. Raw q and k, g and b.
		[[dont_unroll]] for (uint e0 = 0; e0 < CHUNK * HEAD_K; e0 += WG) {
			const uint e = e0 + j;
			if (e < CHUNK * HEAD_K) {
				const uint t = e / HEAD_K, i = e % HEAD_K;
				float qv = 0.0, kv = 0.0;
				if (t < n) {
					const uint base = (r0 + t) * cols;
					qv = data_qkv[base + kh * HEAD_K + i];
					kv = data_qkv[base + (p.k_heads + kh) * HEAD_K + i];
				}
				sh_q[e] = qv;
				sh_k[e] = kv;
			}
		}
		if (j < CHUNK) {
			float gt = 0.0, bt = 0.0;
			if (j < n) {
				float x = data_alpha[(r0 + j) * p.v_heads + h] + dt;
				if (x <= 20.0) {
					x = log(1.0 + exp(x));
				}
				gt = x * a;
				bt = 1.0 / (1.0 + exp(-data_beta[(r0 + j) * p.v_heads + h]));
			}
			sh_g[j] = gt;
			sh_b[j] = bt;
		}
		barrier();
		// 2. The raw Gram products k_t.k_s and q_t.k_s (s <= t) and from
		// the diagonal the inverse norms (zero on padding rows); the
		// cumulative decays.
		if (j == 0) {
			[[unroll]] for (uint t = 1; t < CHUNK; t++) {
				sh_g[t] += sh_g[t - 1];
			}
		}
		[[dont_unroll]] for (uint e0 = 0; e0 < CHUNK * CHUNK; e0 += WG) {
			const uint e = e0 + j;
			if (e < CHUNK * CHUNK) {
				const uint t = e / CHUNK, s = e % CHUNK;
				float kk = 0.0, qk = 0.0, qq = 0.0;
				if (s <= t) {
					[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
						const float ks = sh_k[s * HEAD_K + i], qt = sh_q[t * HEAD_K + i];
						kk += sh_k[t * HEAD_K + i] * ks;
						qk += qt * ks;
						qq += qt * qt;
					}
				}
				sh_a[e] = kk;
				sh_qk[e] = qk;
				if (s == t) {
					sh_rn[t] = t < n ? 1.0 / max(sqrt(kk), p.eps) : 0.0;
					sh_rn[CHUNK + t] = t < n ? scale / max(sqrt(qq), p.eps) : 0.0;
				}
			}
		}
		barrier();
		// A and QK, normalised and masked.
		[[dont_unroll]] for (uint e0 = 0; e0 < CHUNK * CHUNK; e0 += WG) {
			const uint e = e0 + j;
			if (e < CHUNK * CHUNK) {
				const uint t = e / CHUNK, s = e % CHUNK;
				const float d = s <= t ? exp(sh_g[t] - sh_g[s]) * sh_rn[s] : 0.0;
				sh_a[e] = s < t ? sh_b[t] * d * sh_a[e] * sh_rn[t] : 0.0;
				sh_qk[e] = d * sh_qk[e] * sh_rn[CHUNK + t];
			}
		}
		barrier();
		// T = (I + A)^-1: T[t][s] = [t == s] - sum_{m<t} A[t][m] T[m][s].
		if (j < CHUNK) {
			float tc[CHUNK];
			[[unroll]] for (uint t = 0; t < CHUNK; t++) {
				float x = t == j ? 1.0 : 0.0;
				[[unroll]] for (uint m = 0; m < CHUNK; m++) {
					if (m < t) {
						x -= sh_a[t * CHUNK + m] * tc[m];
					}
				}
				tc[t] = x;
				sh_t[t * CHUNK + j] = x;
			}
		}
		barrier();
		// 3. Column j: new values, outputs, state.
		if (owns) {
			float ks[CHUNK], qs[CHUNK];
			[[dont_unroll]] for (uint t = 0; t < CHUNK; t++) {
				float x = 0.0, y = 0.0;
				[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
					x += sh_k[t * HEAD_K + i] * col[i];
					y += sh_q[t * HEAD_K + i] * col[i];
				}
				const float v = t < n ? data_qkv[(r0 + t) * cols + 2 * p.k_heads * HEAD_K + h * HEAD_V + j] : 0.0;
				ks[t] = sh_b[t] * (v - exp(sh_g[t]) * x * sh_rn[t]); // diag(b) (v - diag(exp G) K S_j)
				qs[t] = exp(sh_g[t]) * y * sh_rn[CHUNK + t];
			}
			float d[CHUNK];
			[[unroll]] for (uint t = 0; t < CHUNK; t++) {
				float x = 0.0;
				[[unroll]] for (uint s = 0; s < CHUNK; s++) {
					if (s <= t) {
						x += sh_t[t * CHUNK + s] * ks[s];
					}
				}
				d[t] = x;
			}
			[[unroll]] for (uint t = 0; t < CHUNK; t++) {
				float o = qs[t];
				[[unroll]] for (uint s = 0; s < CHUNK; s++) {
					if (s <= t) {
						o += sh_qk[t * CHUNK + s] * d[s];
					}
				}
				if (t < n) {
					data_out[(r0 + t) * p.v_heads * HEAD_V + h * HEAD_V + j] = o;
				}
			}
			const float gl = sh_g[CHUNK - 1], eg = exp(gl);
			[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
				col[i] *= eg;
			}
			[[dont_unroll]] for (uint s = 0; s < CHUNK; s++) {
				const float ds = d[s] * exp(gl - sh_g[s]) * sh_rn[s];
				[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
					col[i] += sh_k[s * HEAD_K + i] * ds;
				}
			}
		}
		barrier();
	}
	if (owns) {
		[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
			data_s[sbase + i] = col[i];
		}
	}
}
