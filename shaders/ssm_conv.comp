#version 450
// ssm_conv: the causal depthwise convolution of Qwen3.5's linear-attention
// layers, SiLU fused, over sequence runs with per-slot states. One
// invocation per (channel, run) walks the run's rows in order with the
// last K-1 inputs of its channel in registers (the slot's state rows at
// first, zeros for a run at position 0): y = SiLU(sum_k in[t-(K-1)+k] *
// w[c*K+k]), then stores the final K-1 inputs back as the slot's state
// ([slot][K-1][channels], oldest first), so a run shorter than K-1 rows
// leaves old state rows in the new state. Runs outside the slots or the
// rows the bindings hold are skipped. CPU reference: engine/ops
// RefSSMConv.
#include "common.glsl"

// K is the kernel width (taps), 1..MAX_K.
layout(constant_id = 1) const uint K = 4;
#define MAX_K 8

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer W { float data_w[]; };
layout(binding = 2) buffer S { float data_s[]; };
layout(binding = 3) readonly buffer R { int data_runs[]; };
layout(binding = 4) writeonly buffer Y { float data_y[]; };

// Params is mirrored by engine/ops ssmConvPush.
layout(push_constant) uniform Params {
	uint channels;
	uint slots;
	uint rows;   // batch rows x and y hold
	uint n_runs;
} p;

void main() {
	const uint gid = group_id() * WG + gl_LocalInvocationID.x;
	if (gid >= p.n_runs * p.channels) {
		return;
	}
	const uint run = gid / p.channels, c = gid % p.channels;
	const int slot = data_runs[4 * run], row = data_runs[4 * run + 1], rows = data_runs[4 * run + 2], pos = data_runs[4 * run + 3];
	if (slot < 0 || uint(slot) >= p.slots || row < 0 || rows < 1 || uint(row) + uint(rows) > p.rows || pos < 0) {
		return;
	}
	float w[MAX_K];
	[[unroll]] for (uint k = 0; k < K; k++) {
		w[k] = data_w[c * K + k];
	}
	// win[k] is input t-(K-1)+k of the next row t (oldest first).
	float win[MAX_K];
	const uint sbase = uint(slot) * (K - 1) * p.channels + c;
	[[unroll]] for (uint k = 0; k + 1 < K; k++) {
		win[k] = pos > 0 ? data_s[sbase + k * p.channels] : 0.0;
	}
	for (uint t = uint(row); t < uint(row + rows); t++) {
		const float x = data_x[t * p.channels + c];
		float s = x * w[K - 1];
		[[unroll]] for (uint k = 0; k + 1 < K; k++) {
			s += win[k] * w[k];
		}
		data_y[t * p.channels + c] = s / (1.0 + exp(-s));
		[[unroll]] for (uint k = 0; k + 2 < K; k++) {
			win[k] = win[k + 1];
		}
		if (K > 1) {
			win[K - 2] = x;
		}
	}
	[[unroll]] for (uint k = 0; k + 1 < K; k++) {
		data_s[sbase + k * p.channels] = win[k];
	}
}
