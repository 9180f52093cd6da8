#version 450
// moe: the routing and combining kernels of a mixture-of-experts FFN
// (engine/ops moe.go; the expert products are matvec.comp's matvec_id
// variants). CPU references: engine/ops RefMoERoute, RefMoEGroup,
// RefMoESum.
//   moe_route: one workgroup. First one invocation per row: the row's k
//     experts from its router logits and their weights. Mode 0 (softmax):
//     softmax over every expert, the k largest probabilities, their
//     weights the probabilities, renormalised to sum 1 where norm is set.
//     Mode 1 (softmax_weight): the k largest logits, their weights a
//     softmax over those k. Ties go to the lower expert index. Then one
//     invocation per expert: how many of the batch's pairs
//     (row*k + slot) chose it and their list, in ascending order (the
//     routes); then, by one invocation, the active experts (those some
//     pair chose) in ascending order and each expert's rank among them
//     (the expert products' workgroups take the active experts only).
//   moe_sum: one invocation per output value: y[row][j] (+)= sum over the
//     row's slots of weight * expert output.
// variant: moe_route -DROUTE=1
// variant: moe_sum -DSUM=1
#include "common.glsl"

#if defined(ROUTE)
layout(binding = 0) readonly buffer L { float data_l[]; };
layout(binding = 1) coherent buffer S { uint data_sel[]; };
layout(binding = 2) writeonly buffer W { float data_w[]; };
layout(binding = 3) coherent buffer IDS { uint data_ids[]; };

// Params is mirrored by engine/ops moeRoutePush.
layout(push_constant) uniform Params {
	uint rows;
	uint experts;
	uint k;
	uint mode;
	uint norm;
	uint list_off;    // where the lists start in IDS
	uint list_stride; // entries per expert's list (the batch's rows)
	uint act_off;     // where the ranks start in IDS: [experts+1], then the active list
} p;

#define MAX_K 32u

// route picks row's experts and weights.
void route(uint row) {
	const uint base = row * p.experts;
	float m = NEG_INF;
	for (uint e = 0u; e < p.experts; e++) {
		m = max(m, data_l[base + e]);
	}
	float sum = 0.0;
	if (p.mode == 0u) {
		for (uint e = 0u; e < p.experts; e++) {
			sum += exp(data_l[base + e] - m);
		}
	}
	uint sel[MAX_K];
	float val[MAX_K];
	for (uint s = 0u; s < p.k; s++) {
		float best = NEG_INF;
		uint bi = 0xFFFFFFFFu;
		for (uint e = 0u; e < p.experts; e++) {
			bool taken = false;
			for (uint t = 0u; t < s; t++) {
				taken = taken || sel[t] == e;
			}
			float v = data_l[base + e];
			if (p.mode == 0u) {
				v = exp(v - m) / sum;
			}
			if (!taken && (bi == 0xFFFFFFFFu || v > best)) {
				best = v;
				bi = e;
			}
		}
		sel[s] = bi;
		val[s] = best;
	}
	if (p.mode == 1u) {
		// softmax over the selected logits (val[0] is their largest)
		const float top = val[0];
		float ws = 0.0;
		for (uint s = 0u; s < p.k; s++) {
			val[s] = exp(val[s] - top);
			ws += val[s];
		}
		for (uint s = 0u; s < p.k; s++) {
			val[s] /= ws;
		}
	} else if (p.norm != 0u) {
		float ws = 0.0;
		for (uint s = 0u; s < p.k; s++) {
			ws += val[s];
		}
		ws = max(ws, 6.103515625e-5);
		for (uint s = 0u; s < p.k; s++) {
			val[s] /= ws;
		}
	}
	for (uint s = 0u; s < p.k; s++) {
		data_sel[row * p.k + s] = sel[s];
		data_w[row * p.k + s] = val[s];
	}
}

// One workgroup: each invocation routes rows tid, tid+WG, ..., then (after
// a barrier) lists the pairs of experts tid, tid+WG, ...
void main() {
	const uint tid = gl_LocalInvocationID.x;
	for (uint row = tid; row < p.rows; row += WG) {
		route(row);
	}
	memoryBarrierBuffer();
	barrier();
	const uint pairs = p.rows * p.k;
	for (uint e = tid; e < p.experts; e += WG) {
		uint n = 0u;
		const uint base = p.list_off + e * p.list_stride;
		for (uint i = 0u; i < pairs; i++) {
			if (data_sel[i] == e) {
				data_ids[base + n] = i;
				n++;
			}
		}
		data_ids[e] = n;
	}
	memoryBarrierBuffer();
	barrier();
	if (tid == 0u) {
		// rank[e]: the active experts before e; rank[experts]: all of them.
		uint r = 0u;
		for (uint e = 0u; e < p.experts; e++) {
			data_ids[p.act_off + e] = r;
			if (data_ids[e] != 0u) {
				data_ids[p.act_off + p.experts + 1u + r] = e;
				r++;
			}
		}
		data_ids[p.act_off + p.experts] = r;
	}
}
#endif

#if defined(SUM)
layout(binding = 0) readonly buffer X { float data_x[]; };
layout(binding = 1) readonly buffer W { float data_w[]; };
layout(binding = 2) buffer Y { float data_y[]; };

// Params is mirrored by engine/ops moeSumPush.
layout(push_constant) uniform Params {
	uint rows;
	uint n;   // values per row
	uint k;
	uint acc; // add to Y instead of storing
} p;

void main() {
	const uint i = group_id() * WG + gl_LocalInvocationID.x;
	if (i >= p.rows * p.n) {
		return;
	}
	const uint row = i / p.n, j = i % p.n;
	float s = 0.0;
	for (uint t = 0u; t < p.k; t++) {
		const uint pair = row * p.k + t;
		s += data_w[pair] * data_x[pair * p.n + j];
	}
	data_y[i] = p.acc != 0u ? data_y[i] + s : s;
}
#endif
