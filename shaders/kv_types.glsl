// kv_types.glsl declares the K (binding 1) and V (binding 2) page pools of
// the attention kernels in their element type and reads them: K_Q8_0 /
// K_Q4_0 (V_Q8_0 / V_Q4_0) select the reference's q8_0 / q4_0 blocks of 32
// values (an f16 scale, then 32 int8, or 16 bytes of 4-bit values offset
// by 8: value j in the low nibble of byte j % 16 for j < 16, the high one
// after), dequantized here; without them the pool is f16. Offsets are in
// elements of the f16 layout ([page * page size + position][kv_dim]), so
// callers address every type alike; quantized pools need kv_dim % 32 == 0
// (blocks never straddle positions). CPU reference: engine/ops
// RefAttention over DequantizeKV.
#extension GL_EXT_shader_16bit_storage : require

#if defined(K_Q8_0) || defined(K_Q4_0)
layout(binding = 1) readonly buffer KQ { uint16_t data_kq[]; };
layout(binding = 1) readonly buffer KD { float16_t data_kd[]; };
#else
layout(binding = 1) readonly buffer K { float16_t data_k[]; };
layout(binding = 1) readonly buffer K4 { f16vec4 data_k4[]; }; // same cache, 4 at a time
#endif
#if defined(V_Q8_0) || defined(V_Q4_0)
layout(binding = 2) readonly buffer VQ { uint16_t data_vq[]; };
layout(binding = 2) readonly buffer VD { float16_t data_vd[]; };
#else
layout(binding = 2) readonly buffer V { float16_t data_v[]; };
layout(binding = 2) readonly buffer V4 { f16vec4 data_v4[]; };
#endif

// Halfwords per block: the scale, then 16 (q8_0) or 8 (q4_0) of values.
#define Q8_0_HW 17u
#define Q4_0_HW 9u

// q8_0_4 returns the four int8 values in the bytes lo | hi << 16 (two
// halfwords of a q8_0 block) times the block's scale d.
vec4 q8_0_4(uint lo, uint hi, float d) {
	const int w = int(lo | (hi << 16));
	return vec4(bitfieldExtract(w, 0, 8), bitfieldExtract(w, 8, 8), bitfieldExtract(w, 16, 8), bitfieldExtract(w, 24, 8)) * d;
}

// q4_0_4 returns the four values in the nibbles at shift (0 or 4) of the
// four bytes lo | hi << 16.
vec4 q4_0_4(uint lo, uint hi, uint shift, float d) {
	const uint w = (lo | (hi << 16)) >> shift;
	return (vec4(w & 15u, (w >> 8) & 15u, (w >> 16) & 15u, (w >> 24) & 15u) - 8.0) * d;
}

// load_k4e returns K elements e..e+3 (e % 4 == 0).
vec4 load_k4e(uint e) {
#if defined(K_Q8_0)
	const uint b = (e >> 5) * Q8_0_HW, i = e & 31u;
	return q8_0_4(uint(data_kq[b + 1u + i / 2u]), uint(data_kq[b + 2u + i / 2u]), float(data_kd[b]));
#elif defined(K_Q4_0)
	const uint b = (e >> 5) * Q4_0_HW, i = e & 31u, j = i & 15u;
	return q4_0_4(uint(data_kq[b + 1u + j / 2u]), uint(data_kq[b + 2u + j / 2u]), i >= 16u ? 4u : 0u, float(data_kd[b]));
#else
	return vec4(data_k4[e / 4u]);
#endif
}

// load_k1 returns K element e.
float load_k1(uint e) {
#if defined(K_Q8_0) || defined(K_Q4_0)
	return load_k4e(e & ~3u)[e & 3u];
#else
	return float(data_k[e]);
#endif
}

// load_v4e and load_v1 are load_k4e and load_k1 of V.
vec4 load_v4e(uint e) {
#if defined(V_Q8_0)
	const uint b = (e >> 5) * Q8_0_HW, i = e & 31u;
	return q8_0_4(uint(data_vq[b + 1u + i / 2u]), uint(data_vq[b + 2u + i / 2u]), float(data_vd[b]));
#elif defined(V_Q4_0)
	const uint b = (e >> 5) * Q4_0_HW, i = e & 31u, j = i & 15u;
	return q4_0_4(uint(data_vq[b + 1u + j / 2u]), uint(data_vq[b + 2u + j / 2u]), i >= 16u ? 4u : 0u, float(data_vd[b]));
#else
	return vec4(data_v4[e / 4u]);
#endif
}

float load_v1(uint e) {
#if defined(V_Q8_0) || defined(V_Q4_0)
	return load_v4e(e & ~3u)[e & 3u];
#else
	return float(data_v[e]);
#endif
}
