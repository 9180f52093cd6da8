// attention.glsl declares the bindings and push constants that flash_attn
// (attention.comp) and flash_attn_rows (attention_rows.comp) share, mirrored
// by engine/ops AttnPush, the page-table lookup and the test for rows that
// flash_attn_tiled serves.
//
// Attention sinks (gpt-oss): with sinks != 0 query head h's softmax also
// counts the logit data_sinks[h], as is (neither scaled nor soft-capped),
// in its max and its denominator, with no value: every kernel starts that
// head's online softmax from max = sink, sum = 1 and zero accumulators, as
// if the sink were a key of value zero seen first (the split kernels in
// split 0 only, so that attn_combine merges it once).

layout(binding = 0) readonly buffer Q { float data_q[]; };
#include "kv_types.glsl" // bindings 1 and 2: the K and V pools
layout(binding = 3) readonly buffer S { int data_slot[]; };
layout(binding = 4) readonly buffer P { int data_pos[]; };
layout(binding = 5) writeonly buffer O { float data_o[]; };
layout(binding = 6) readonly buffer T { int data_table[]; };
layout(binding = 7) readonly buffer Sk { float data_sinks[]; }; // [heads] when sinks != 0

layout(push_constant) uniform Params {
	uint rows;
	uint heads;
	uint kv_heads;
	uint head_dim;
	uint n_ctx;
	uint n_slots;
	uint n_kv; // keys seen by non-causal rows
	uint causal;
	float scale;
	uint split_len; // keys per split (_split variants)
	uint n_split;
	uint tile_rows; // rows per tile of flash_attn_tiled; 0: serve every row
	uint window;    // causal sliding window in positions; 0: none
	float softcap;  // > 0: scores become softcap * tanh(score / softcap)
	uint page_shift;   // log2 of the positions per page
	uint table_stride; // page-table entries per slot
	uint n_pages;      // pages in the K and V pools
	uint sinks;        // 1: data_sinks holds one logit per query head
} p;

// kv_row returns the element offset of position j of slot in the paged
// cache [page][position in page][kv_head][head_dim]: page
// table[slot][j / page size]. A page id outside the pool (a broken
// invariant of the caller) is clamped into it, never read out of bounds.
uint kv_row(uint slot, uint j) {
	const int pg = data_table[slot * p.table_stride + (j >> p.page_shift)];
	const uint page = uint(clamp(pg, 0, int(p.n_pages) - 1));
	return ((page << p.page_shift) + (j & ((1u << p.page_shift) - 1u))) * (p.kv_heads * p.head_dim);
}

// tiled reports whether flash_attn_tiled serves row: whether the rows of
// its tile that have an in-range slot share one (tile_slot of
// attention_tiled.comp).
bool tiled(uint row) {
	if (p.tile_rows == 0) {
		return false;
	}
	const uint row0 = row - row % p.tile_rows;
	int s = -1;
	for (uint r = row0; r < min(row0 + p.tile_rows, p.rows); r++) {
		const int sr = data_slot[r];
		if (sr < 0 || uint(sr) >= p.n_slots) {
			continue;
		}
		if (s >= 0 && sr != s) {
			return false;
		}
		s = sr;
	}
	return true;
}

// tanh_safe is tanh(z) without overflow for large |z| (1 - 2/(e^2|z| + 1))
// nor cancellation for small |z| (its Taylor series, error below 1e-7).
float tanh_safe(float z) {
	const float a = abs(z);
	if (a < 0.25) {
		const float z2 = z * z;
		return z * (1.0 - z2 * (1.0 / 3.0 - z2 * (2.0 / 15.0 - z2 * (17.0 / 315.0))));
	}
	return sign(z) * (1.0 - 2.0 / (exp(2.0 * a) + 1.0));
}
