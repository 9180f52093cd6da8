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
#undef FUSED_DECLS
#else

// A pass runs NCOLS columns, a bucket (1, 2, 4, 8 or 16: engine/ops
// colBucket) of at least its real column count p.N, so that a few
// specializations serve every batch size: column c reads activation column
// min(c, N-1), always in the binding, and store_out and store_glu store
// only columns below N. xcol returns where column c's activations start
// (p.x_off and p.x_stride in the kernel's units).
uint xcol(uint c) {
	return p.x_off + min(c, p.N - 1u) * p.x_stride;
}

// store_out stores row's value v of column c (the split epilogue's
// outputs and bias in the fused variants).
void store_out(uint row, uint c, float v) {
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
	if (c >= p.N) {
		return; // a padding column
	}
	float v;
	if (EPI == EPI_GEGLU) {
		// 0.5 * (1 + tanh(z)) == 1 / (1 + exp(-2z)), as geglu.comp.
		const float z = 0.7978845608028654 * g * (1.0 + 0.044715 * g * g);
		v = g / (1.0 + exp(-2.0 * z)) * u;
	} else {
		v = g / (1.0 + exp(-g)) * u;
	}
	data_y[p.y_off + c * p.y_stride + row] = v;
#endif
}
#endif
