#version 450
// quantize_q8_1 turns N activation columns of K f32 (K a multiple of 32)
// into the Q8_1 blocks the integer-dot matvec kernels read (matvec_idot):
// per 32-element block b, d = max|x|/127, q = roundEven(x/d) as int8 (packed
// four to a word, element 4i+j in byte j of word i) and s = d*sum(q). Column
// c starts at word q_off + c*q_stride and holds the quant words of its K/32
// blocks (8 each) followed by their (d, s) pairs as f32: block b's quants at
// words 8b.., its pair at 8*(K/32) + 2b. One invocation per block. CPU
// reference: engine/ops QuantizeQ8_1Ref.
// variant: quantize_f32_q8_1
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 0) readonly buffer X4B { vec4 data_x4[]; };
layout(binding = 1) writeonly buffer Q { uint data_q[]; };
layout(binding = 1) writeonly buffer Q4 { uvec4 data_q4[]; };
layout(binding = 1) writeonly buffer QF { vec2 data_ds[]; };

// Params is mirrored by engine/ops QuantizePush.
layout(push_constant) uniform Params {
	uint K;        // elements per column, a multiple of 32
	uint N;        // columns
	uint x_off;    // element offset of column 0 in X
	uint x_stride; // elements from one column to the next
	uint q_off;    // word offset of column 0 in Q, a multiple of 4
	uint q_stride; // words from one column to the next, a multiple of 4
} p;

// FAST says that x_off and x_stride are multiples of 4 (vec4 loads).
layout(constant_id = 1) const bool FAST = false;

void main() {
	const uint nb = p.K / 32u;
	const uint b = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
	if (b >= nb * p.N) {
		return;
	}
	const uint c = b / nb;
	const uint blk = b - c * nb;
	const uint xb = p.x_off + c * p.x_stride + 32u * blk;
	vec4 x[8];
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		if (FAST) {
			x[i] = data_x4[(xb >> 2) + i];
		} else {
			x[i] = vec4(data_x[xb + 4u * i], data_x[xb + 4u * i + 1u], data_x[xb + 4u * i + 2u], data_x[xb + 4u * i + 3u]);
		}
	}
	float amax = 0.0;
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		const vec4 a = abs(x[i]);
		amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
	}
	const float d = amax / 127.0;
	const float id = d != 0.0 ? 1.0 / d : 0.0;
	const uint qb = p.q_off + c * p.q_stride;
	uint qw[8];
	int sum = 0;
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		// |x*id| <= 127 up to the rounding of id; the clamp keeps a
		// rounded-up 127.5 from wrapping.
		const ivec4 q = clamp(ivec4(roundEven(x[i] * id)), -127, 127);
		sum += q.x + q.y + q.z + q.w;
		qw[i] = (uint(q.x) & 0xFFu) | ((uint(q.y) & 0xFFu) << 8) | ((uint(q.z) & 0xFFu) << 16) | (uint(q.w) << 24);
	}
	data_q4[(qb >> 2) + 2u * blk] = uvec4(qw[0], qw[1], qw[2], qw[3]);
	data_q4[(qb >> 2) + 2u * blk + 1u] = uvec4(qw[4], qw[5], qw[6], qw[7]);
	data_ds[((qb + 8u * nb) >> 1) + blk] = vec2(d, d * float(sum));
}
