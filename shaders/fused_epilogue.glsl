// fused_epilogue.glsl: the epilogues of the fused matrix-vector kernels
// (matvec_fused.comp, float; matvec_idot.comp, integer dot), included twice
// by each. With FUSED_DECLS defined (before the Params block; EPI_ID is the
// specialization id of EPI) it declares the outputs, the bias and EPI, and
// defines FUSED_PARAMS, the push-constant fields to put at the end of
// Params; otherwise (after Params) it defines xcol, store_out and
// store_glu.
// Without FUSED the kernel is a plain product: store_out stores (or adds,
// ACC) to Y and GLU is false.
#if defined(FUSED_DECLS)
#if defined(FUSED)
layout(binding = 3) writeonly buffer Y1 { float data_y1[]; };
layout(binding = 4) writeonly buffer Y2 { float data_y2[]; };
layout(binding = 5) readonly buffer B { float data_b[]; };
#define EPI_SPLIT 1u
#define EPI_SWIGLU 2u
#define EPI_GEGLU 3u
#define EPI_SWIGLU_OAI 4u
layout(constant_id = EPI_ID) const uint EPI = EPI_SPLIT;
#define GLU (EPI != EPI_SPLIT)
// The push constants of the fused epilogues, after MatVecPush's (engine/ops
// FusedPush):
//   s1, s2: split: the first rows of the second and third outputs
//   y1_off, y1_stride, y2_off, y2_stride: split: the second and third
//     outputs, as y_off and y_stride
//   b_off: split: element offset of row 0's bias in B; has_bias: add B
//   pair_off: GLU: bytes from a gate row to its up row
#define FUSED_PARAMS uint s1, s2; uint y1_off, y1_stride; uint y2_off, y2_stride; uint b_off; uint has_bias; uint pair_off;
#else
#define GLU false
#define FUSED_PARAMS
#endif
#if defined(MUL_MAT_ID)
// The matvec_id variants (and matvec_fused_id, the gate and up expert
// products with the GLU epilogue): workgroup z = chunk * na + j selects
// an expert of the bound window (experts e0..e0+ne-1) and its pass of
// columns chunk*NCOLS.. of the expert's column list: expert e0 + j where
// na = ne, else the window's j-th active expert; na is at most the batch's
// pairs, so a decode step launches workgroups for the experts it can use,
// not for all. Binding ID_BIND holds the
// routes (engine/ops MoERoute): the count of each expert's columns at
// [0, experts), then each expert's list of pairs (row*k + slot, in
// ascending order) at list_off + expert*list_stride, then at act_off each
// expert's rank among the active experts (experts+1 entries, the last
// their number) and at act_list the active experts in ascending order.
// Binding ID_BIND+1 holds the experts' biases
// ([experts][M] f32, added where id_bias is set; in matvec_fused_id the
// gate's, and ID_BIND+2 the up's).
#if defined(FUSED)
#define ID_BIND 6
#else
#define ID_BIND 3
#endif
#if defined(X_UNIFORM)
// The _xt variants (CPU devices) read the routes from a uniform buffer too:
// the pairs' activation offsets are then known to be the same in every
// invocation, so the activations' uniform-buffer loads stay shared (see
// matvec.comp's X_UNIFORM).
layout(binding = ID_BIND, std140) uniform IDS { uvec4 data_ids4[4096]; };
#define IDS_AT(i) data_ids4[(i) >> 2][(i) & 3u]
#else
layout(binding = ID_BIND) readonly buffer IDS { uint data_ids[]; };
#define IDS_AT(i) data_ids[(i)]
#endif
layout(binding = ID_BIND + 1) readonly buffer IB { float data_ib[]; };
#if defined(FUSED)
layout(binding = ID_BIND + 2) readonly buffer IB2 { float data_ib2[]; };
#endif
// The push constants of matvec_id, after MatVecPush's (and FUSED_PARAMS)
// (engine/ops IDPush, IDFusedPush):
//   x_div: a pair's activation column is pair / x_div (k: one column per
//     row shared by its k pairs; 1: one column per pair)
//   list_off, list_stride: where the lists start and the distance between
//     two experts' lists (the batch's rows)
//   e0, ne: the window's first expert and its experts
//   w_estride: bytes from one expert's matrix to the next
//   id_bias: add the expert's bias rows
//   act_off, act_list: where the ranks and the active list start
//   na: the grid's expert slots per pass of columns
#define ID_PARAMS uint x_div; uint list_off; uint list_stride; uint e0; uint ne; uint w_estride; uint id_bias; uint act_off; uint act_list; uint na;
#else
#define ID_PARAMS
#endif
#undef FUSED_DECLS
#else

// A pass runs NCOLS columns, a bucket (1, 2, 4, 8 or 16: engine/ops
// colBucket) of at least its real column count p.N, so that a few
// specializations serve every batch size: column c reads activation column
// min(c, N-1), always in the binding, and store_out and store_glu store
// only columns below N. xcol returns where column c's activations start
// (p.x_off and p.x_stride in the kernel's units).
// w_base is the byte offset of the pass's matrix in the weight binding.
uint w_base;

#if defined(MUL_MAT_ID)
uint id_e;          // the workgroup's expert (an index into the routes)
uint id_n;          // its columns in this pass, 1..NCOLS
uint id_pair[16];   // the pass's pairs (padding columns repeat the last)

// id_setup reads the workgroup's expert and pairs; false when its slot has
// no active expert or the expert no columns in this pass (the whole
// workgroup returns: an unused expert's weights are never read).
bool id_setup(uint ncols) {
	const uint j = gl_WorkGroupID.z % p.na;
	const uint c0 = (gl_WorkGroupID.z / p.na) * ncols;
	uint e = j;
	if (p.na < p.ne) {
		// Fewer slots than experts: slot j takes the window's j-th active
		// expert. (With a slot per expert each keeps its own, so the busy
		// workgroups stay spread over the grid as the experts are.)
		const uint a = IDS_AT(p.act_off + p.e0) + j;
		if (a >= IDS_AT(p.act_off + p.e0 + p.ne)) {
			return false;
		}
		e = IDS_AT(p.act_list + a) - p.e0;
	}
	id_e = p.e0 + e;
	const uint cnt = IDS_AT(id_e);
	if (c0 >= cnt) {
		return false;
	}
	id_n = min(cnt - c0, ncols);
	const uint base = p.list_off + id_e * p.list_stride + c0;
	for (uint c = 0u; c < ncols; c++) {
		id_pair[c] = IDS_AT(base + min(c, id_n - 1u));
	}
	w_base = p.w_off + e * p.w_estride;
	return true;
}

uint xcol(uint c) {
	return p.x_off + (id_pair[c] / p.x_div) * p.x_stride;
}
#else
uint xcol(uint c) {
	return p.x_off + min(c, p.N - 1u) * p.x_stride;
}
#endif

// store_out stores row's value v of column c (the split epilogue's
// outputs and bias in the fused variants).
void store_out(uint row, uint c, float v) {
#if defined(MUL_MAT_ID)
	if (c >= id_n) {
		return; // a padding column
	}
	if (p.id_bias != 0u) {
		v += data_ib[id_e * p.M + row];
	}
	store_y(p.y_off + id_pair[c] * p.y_stride + row, v);
	return;
#endif
	if (c >= p.N) {
		return; // a padding column
	}
#if defined(FUSED)
	if (p.has_bias != 0u) {
		v += data_b[p.b_off + row];
	}
	if (row < p.s1) {
		data_y[p.y_off + c * p.y_stride + row] = v;
	} else if (row < p.s2) {
		data_y1[p.y1_off + c * p.y1_stride + row - p.s1] = v;
	} else {
		data_y2[p.y2_off + c * p.y2_stride + row - p.s2] = v;
	}
#else
	store_y(p.y_off + c * p.y_stride + row, v);
#endif
}

// store_glu stores output row's silu(g)*u or gelu(g)*u of column c (the
// GLU epilogues).
void store_glu(uint row, uint c, float g, float u) {
#if defined(FUSED)
#if defined(MUL_MAT_ID)
	if (c >= id_n) {
		return; // a padding column
	}
	if (p.id_bias != 0u) {
		g += data_ib[id_e * p.M + row];
		u += data_ib2[id_e * p.M + row];
	}
	const uint at = p.y_off + id_pair[c] * p.y_stride + row;
#else
	if (c >= p.N) {
		return; // a padding column
	}
	const uint at = p.y_off + c * p.y_stride + row;
#endif
	float v;
	if (EPI == EPI_GEGLU) {
		// 0.5 * (1 + tanh(z)) == 1 / (1 + exp(-2z)), as geglu.comp.
		const float z = 0.7978845608028654 * g * (1.0 + 0.044715 * g * g);
		v = g / (1.0 + exp(-2.0 * z)) * u;
	} else if (EPI == EPI_SWIGLU_OAI) {
		// gpt-oss's clamped SwiGLU, as swiglu.comp's _oai variant.
		g = min(g, 7.0);
		u = clamp(u, -7.0, 7.0);
		v = g / (1.0 + exp(-1.702 * g)) * (u + 1.0);
	} else {
		v = g / (1.0 + exp(-g)) * u;
	}
	data_y[at] = v;
#endif
}
#endif
