#version 450
// delta_net: the gated delta rule of Qwen3.5's linear-attention layers
// over sequence runs with per-slot states. One workgroup per (value head
// h, run); invocation j < HEAD_V owns column j of the head's state S
// (HEAD_K values, S[i][j] at state offset j*HEAD_K+i) in registers: loaded
// from the slot's state (zeros for a run at position 0), carried across
// the run's rows, stored back at the end. Per row the workgroup puts q and
// k of key head h % k_heads into shared memory; each invocation takes
// their L2 norms (max(|x|, eps)), decay = exp(softplus(alpha + dt_bias) *
// a) and b = sigmoid(beta) itself, then
//   col *= decay; d = (v[j] - col.k) * b; col += k * d;
//   out[j] = col.q / sqrt(HEAD_K).
// The loops over HEAD_K are unrolled: lavapipe ends a shader's loops after
// 65535 iterations in all, which the loop over a run's rows alone must
// stay under.
// Runs outside the slots or the rows the bindings hold are skipped (the
// whole workgroup: barriers stay in uniform control flow). CPU reference:
// engine/ops RefGatedDeltaNet.
#include "common.glsl"

// HEAD_K and HEAD_V are the key and value head dimensions; WG covers
// both.
layout(constant_id = 1) const uint HEAD_K = 128;
layout(constant_id = 2) const uint HEAD_V = 128;

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

shared float sh_q[HEAD_K];
shared float sh_k[HEAD_K];

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
	for (uint t = uint(row); t < uint(row + rows); t++) {
		const uint base = t * cols;
		if (j < HEAD_K) {
			sh_q[j] = data_qkv[base + kh * HEAD_K + j];
			sh_k[j] = data_qkv[base + (p.k_heads + kh) * HEAD_K + j];
		}
		barrier();
		if (owns) {
			float qq = 0.0, kk = 0.0;
			[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
				qq += sh_q[i] * sh_q[i];
				kk += sh_k[i] * sh_k[i];
			}
			const float rq = 1.0 / max(sqrt(qq), p.eps), rk = 1.0 / max(sqrt(kk), p.eps);
			float x = data_alpha[t * p.v_heads + h] + dt;
			if (x <= 20.0) {
				x = log(1.0 + exp(x));
			}
			const float decay = exp(x * a);
			const float b = 1.0 / (1.0 + exp(-data_beta[t * p.v_heads + h]));
			float sk = 0.0;
			[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
				col[i] *= decay;
				sk += col[i] * sh_k[i];
			}
			const float d = (data_qkv[base + 2 * p.k_heads * HEAD_K + h * HEAD_V + j] - sk * rk) * b * rk;
			float o = 0.0;
			[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
				col[i] += sh_k[i] * d;
				o += col[i] * sh_q[i];
			}
			data_out[t * p.v_heads * HEAD_V + h * HEAD_V + j] = o * rq * scale;
		}
		barrier();
	}
	if (owns) {
		[[unroll]] for (uint i = 0; i < HEAD_K; i++) {
			data_s[sbase + i] = col[i];
		}
	}
}
