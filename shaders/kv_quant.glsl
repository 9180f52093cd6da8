// kv_quant.glsl quantizes blocks of 32 values for the KV cache's q8_0 and
// q4_0 pools as the reference's quantize_row_q8_0 / q4_0 do, into the
// halfword layout kv_types.glsl reads (the f16 scale, then the values).
// Used by kv_write.comp and rope_kv.comp. CPU reference: gguf/quant
// QuantizeTo.

// round_away is C's roundf (half away from zero; v - trunc(v) is exact)
// clamped to [-127, 127], as the reference's q8_0.
int round_away(float v) {
	const float t = trunc(v);
	const float r = abs(v - t) >= 0.5 ? t + sign(v) : t;
	return int(clamp(r, -127.0, 127.0));
}

// q8_0_block returns the scale of the 32 values v and their int8 values,
// two per halfword (value 2j in the low byte of hw[j]).
float q8_0_block(const float v[32], out uint hw[16]) {
	float amax = 0.0;
	[[unroll]] for (uint j = 0u; j < 32u; j++) {
		amax = max(amax, abs(v[j]));
	}
	const float d = amax / 127.0;
	const float id = d != 0.0 ? 1.0 / d : 0.0;
	[[unroll]] for (uint j = 0u; j < 32u; j += 2u) {
		const int q0 = round_away(v[j] * id), q1 = round_away(v[j + 1u] * id);
		hw[j / 2u] = (uint(q0) & 255u) | ((uint(q1) & 255u) << 8);
	}
	return d;
}

// q4_0_block returns the scale of the 32 values v and their 4-bit values
// offset by 8: value j in the low nibble of byte j for j < 16, value j+16
// in its high nibble, two bytes per halfword.
float q4_0_block(const float v[32], out uint hw[8]) {
	float amax = 0.0, vmax = 0.0;
	[[unroll]] for (uint j = 0u; j < 32u; j++) {
		if (abs(v[j]) > amax) {
			amax = abs(v[j]);
			vmax = v[j];
		}
	}
	const float d = vmax / -8.0;
	const float id = d != 0.0 ? 1.0 / d : 0.0;
	[[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
		uint w = 0u;
		[[unroll]] for (uint c = 0u; c < 2u; c++) {
			const uint lo = uint(clamp(int(trunc(v[j + c] * id + 8.5)), 0, 15));
			const uint hi = uint(clamp(int(trunc(v[j + c + 16u] * id + 8.5)), 0, 15));
			w |= (lo | (hi << 4)) << (8u * c);
		}
		hw[j / 2u] = w;
	}
	return d;
}
