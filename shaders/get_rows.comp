#version 450
// get_rows gathers rows of a weight matrix (any GGML type, see quant.glsl)
// selected by an int32 id buffer into f32 rows: y[i][k] = W[ids[i]][k]; the
// embedding lookup. A matrix larger than one binding is gathered in several
// dispatches, each bound to the rows [row_begin, row_end) and writing only
// the ids that fall there. An id outside [0, total_rows) yields a zero row
// (written by the dispatch whose row_begin is 0). CPU reference: engine/ops
// GetRowsRef.
// variant: get_rows_f32_f32 -DDATA_A_F32
// variant: get_rows_f16_f32 -DDATA_A_F16
// variant: get_rows_bf16_f32 -DDATA_A_BF16
// variant: get_rows_q4_0_f32 -DDATA_A_Q4_0
// variant: get_rows_q4_1_f32 -DDATA_A_Q4_1
// variant: get_rows_q5_0_f32 -DDATA_A_Q5_0
// variant: get_rows_q5_1_f32 -DDATA_A_Q5_1
// variant: get_rows_q8_0_f32 -DDATA_A_Q8_0
// variant: get_rows_q2_k_f32 -DDATA_A_Q2_K
// variant: get_rows_q3_k_f32 -DDATA_A_Q3_K
// variant: get_rows_q4_k_f32 -DDATA_A_Q4_K
// variant: get_rows_q5_k_f32 -DDATA_A_Q5_K
// variant: get_rows_q6_k_f32 -DDATA_A_Q6_K
// variant: get_rows_iq4_nl_f32 -DDATA_A_IQ4_NL
// variant: get_rows_iq4_xs_f32 -DDATA_A_IQ4_XS
// variant: get_rows_mxfp4_f32 -DDATA_A_MXFP4
layout(constant_id = 0) const uint WG = 64;
// FAST says that plain-type rows are 16-byte aligned and K a multiple of 4
// (quant.glsl's wide path).
layout(constant_id = 1) const bool FAST = false;
layout(local_size_x_id = 0) in;

layout(binding = 1) readonly buffer Ids { int data_ids[]; };
layout(binding = 2) writeonly buffer Y { float data_y[]; };

#include "quant.glsl"

// Params is mirrored by engine/ops GetRowsPush.
layout(push_constant) uniform Params {
	uint K;          // elements per row
	uint n_ids;      // ids to gather
	uint w_off;      // byte offset of row row_begin in A
	uint w_stride;   // bytes from one row to the next
	uint row_begin;  // first row bound in A
	uint row_end;    // one past the last row bound in A
	uint total_rows; // rows of the whole matrix
	uint ids_off;    // element offset of the first id
	uint y_off;      // element offset of output row 0
	uint y_stride;   // elements from one output row to the next
} p;

void main() {
	const uint i = gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y;
	const uint g = gl_GlobalInvocationID.x;
	const uint ngroups = (p.K + 3u) / 4u;
	if (i >= p.n_ids || g >= ngroups) {
		return;
	}
	const int id = data_ids[p.ids_off + i];
	vec4 v;
	if (id < 0 || uint(id) >= p.total_rows) {
		if (p.row_begin != 0u) {
			return;
		}
		v = vec4(0.0);
	} else {
		if (uint(id) < p.row_begin || uint(id) >= p.row_end) {
			return;
		}
		v = load_w4(p.w_off + (uint(id) - p.row_begin) * p.w_stride, g, p.K, FAST);
	}
	const uint yb = p.y_off + i * p.y_stride + 4u * g;
	for (uint j = 0u; j < 4u; j++) {
		if (4u * g + j < p.K) {
			data_y[yb + j] = v[j];
		}
	}
}
