// quant.glsl decodes weight blocks of every supported GGML type from a raw
// byte buffer bound as 32-bit words, so it needs neither 8-bit nor 16-bit
// storage (A_16BIT adds 16- and 8-bit views where the device has them). It
// declares the weight binding 0 (as uint, uvec2 and uvec4 arrays; the wide
// views serve aligned plain rows) and the includer defines
// exactly one DATA_A_<TYPE>. Every type is read in groups of four
// consecutive elements (all four always share one scale), through
//
//   vec4 dequant4(uint blk, uint j)
//
// where blk is the byte offset of the block and j the group within it
// (elements 4j..4j+3). QK is the number of elements of a block, QS its size in
// bytes. Plain types (F32, F16, BF16) use a pseudo-block of four elements.
//
// The layouts mirror ggml's block_* structs (ggml-common.h) and the CPU
// reference in gguf/quant (Dequantize).

#if defined(A_TEXEL)
// The _xt variants (CPU devices) read the weights through a uniform texel
// buffer of 32-bit words: a CPU driver (lavapipe) fetches texels of
// different addresses in all lanes with one vector gather, where a
// storage-buffer load is a loop over the lanes with a branch per lane.
layout(binding = 0) uniform usamplerBuffer data_at;
#define AW(i) texelFetch(data_at, int(i)).x
#define AW2(i) uvec2(AW(2u * (i)), AW(2u * (i) + 1u))
#define AW4(i) uvec4(AW(4u * (i)), AW(4u * (i) + 1u), AW(4u * (i) + 2u), AW(4u * (i) + 3u))
#else
layout(binding = 0) readonly buffer A { uint data_a[]; };
layout(binding = 0) readonly buffer A2 { uvec2 data_a2[]; };
layout(binding = 0) readonly buffer A4 { uvec4 data_a4[]; };
#define AW(i) data_a[(i)]
#define AW2(i) data_a2[(i)]
#define AW4(i) data_a4[(i)]
#endif

#extension GL_EXT_control_flow_attributes : enable

#if defined(A_16BIT)
// A_16BIT (the _s16 variants, devices with storageBuffer16BitAccess and
// storageBuffer8BitAccess) reads the blocks through 16- and 8-bit views of
// the same binding: an f16 scale is one load converted to f32 and a byte is
// one load, where the word view shifts and masks halves and bytes out of
// 32-bit words. Every offset is even (mulMat takes the variants only for
// weights at an even byte offset, and only the types of even block size,
// not MXFP4's 17 bytes, have them).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
layout(binding = 0) readonly buffer A16 { uint16_t data_a16[]; };
layout(binding = 0) readonly buffer AH { float16_t data_ah[]; };
layout(binding = 0) readonly buffer A8 { uint8_t data_a8[]; };

uint ld8(uint off) {
	return uint(data_a8[off]);
}

uint ld16(uint off) {
	return uint(data_a16[off >> 1]);
}

// ld32 returns the four bytes at an even offset: two 16-bit loads.
uint ld32(uint off) {
	const uint h = off >> 1;
	return uint(data_a16[h]) | (uint(data_a16[h + 1u]) << 16);
}

float ldh(uint off) {
	return float(data_ah[off >> 1]);
}
#else
// ld8 returns the byte at off.
uint ld8(uint off) {
	return (AW(off >> 2) >> ((off & 3u) << 3)) & 0xFFu;
}

// ld16 returns the little-endian 16-bit value at an even offset.
uint ld16(uint off) {
	return (AW(off >> 2) >> ((off & 2u) << 3)) & 0xFFFFu;
}

// ld32 returns four little-endian bytes at any offset. It always loads two
// words without branching (lavapipe pays dearly for divergent loads); the
// second is the next word only when the value straddles it, so it never
// reads past the bytes asked for.
uint ld32(uint off) {
	const uint w = off >> 2;
	const uint s = (off & 3u) << 3;
	const uint lo = AW(w);
	const uint hi = AW(w + min(off & 3u, 1u));
	// (hi << 1) << (31 - s) is hi << (32 - s), and 0 when s is 0.
	return (lo >> s) | ((hi << 1) << (31u - s));
}

// ldh returns the f16 at an even offset as a float.
float ldh(uint off) {
	return unpackHalf2x16(ld16(off)).x;
}
#endif

// bytes4 unpacks four unsigned bytes.
vec4 bytes4(uint v) {
	return vec4(float(v & 0xFFu), float((v >> 8) & 0xFFu), float((v >> 16) & 0xFFu), float(v >> 24));
}

// sbytes4 unpacks four signed bytes.
vec4 sbytes4(uint v) {
	const int s = int(v);
	return vec4(float(bitfieldExtract(s, 0, 8)), float(bitfieldExtract(s, 8, 8)),
		float(bitfieldExtract(s, 16, 8)), float(bitfieldExtract(s, 24, 8)));
}

#if defined(DATA_A_IQ4_NL) || defined(DATA_A_IQ4_XS)
// kvalues_iq4nl, the non-linear 4-bit code book of IQ4_NL and IQ4_XS
// (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113),
// as signed bytes in four words: a lookup is a select among four registers
// and a bit-field extract, not an indexed load from a local array.
const uvec4 kvalues_iq4nl = uvec4(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);

float iq4_value(uint i) {
	return float(bitfieldExtract(int(kvalues_iq4nl[i >> 2]), int(8u * (i & 3u)), 8));
}

vec4 iq4_lookup(uint v) {
	return vec4(iq4_value(v & 0xFu), iq4_value((v >> 8) & 0xFu),
		iq4_value((v >> 16) & 0xFu), iq4_value((v >> 24) & 0xFu));
}
#endif

#if defined(DATA_A_MXFP4)
// kvalues_mxfp4, the E2M1 values doubled as ggml keeps them (0, 1, 2, 3, 4,
// 6, 8, 12, then their negatives, code 8 being 0), as signed bytes in four
// words like kvalues_iq4nl. The block scale is halved to match
// (e8m0_half).
const uvec4 kvalues_mxfp4 = uvec4(0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu);

float mxfp4_value(uint i) {
	return float(bitfieldExtract(int(kvalues_mxfp4[i >> 2]), int(8u * (i & 3u)), 8));
}

vec4 mxfp4_lookup(uint v) {
	return vec4(mxfp4_value(v & 0xFu), mxfp4_value((v >> 8) & 0xFu),
		mxfp4_value((v >> 16) & 0xFu), mxfp4_value((v >> 24) & 0xFu));
}

// e8m0_half returns 2^(e-128), half the E8M0 exponent byte e, with the bit
// patterns of ggml's ggml_e8m0_to_fp32_half (gguf/quant e8m0ToFP32Half):
// subnormals for e < 2, and 2^127 for e = 255.
float e8m0_half(uint e) {
	return uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
}

// mxfp4_block returns the exponent byte of the 17-byte block at any byte
// offset blk and its 16 code bytes in q, loading the five words that hold
// the block once each (a 17-byte block always spans five) and no word past
// them.
uint mxfp4_block(uint blk, out uint q[4]) {
	const uint w0 = blk >> 2;
	uint wd[6];
	[[unroll]] for (uint i = 0u; i < 5u; i++) {
		wd[i] = AW(w0 + i);
	}
	wd[5] = wd[4];
	// The codes start at blk + 1: in word w0 at byte (blk + 1) % 4, or at
	// the start of word w0 + 1 when blk % 4 is 3.
	const bool next = (blk & 3u) == 3u;
	const uint s = ((blk + 1u) & 3u) << 3;
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const uint lo = next ? wd[i + 1u] : wd[i];
		const uint hi = next ? wd[i + 2u] : wd[i + 1u];
		// (hi << 1) << (31 - s) is hi << (32 - s), and 0 when s is 0.
		q[i] = (lo >> s) | ((hi << 1) << (31u - s));
	}
	return (wd[0] >> ((blk & 3u) << 3)) & 0xFFu;
}
#endif

#if defined(DATA_A_F32)
#define QK 4u
#define QS 16u
#define DATA_A_PLAIN 1
vec4 dequant4(uint blk, uint j) {
	return vec4(uintBitsToFloat(ld32(blk)), uintBitsToFloat(ld32(blk + 4u)),
		uintBitsToFloat(ld32(blk + 8u)), uintBitsToFloat(ld32(blk + 12u)));
}
float dequant1(uint off) {
	return uintBitsToFloat(ld32(off));
}
#define ESIZE 4u

#elif defined(DATA_A_F16)
#define QK 4u
#define QS 8u
#define DATA_A_PLAIN 1
vec4 dequant4(uint blk, uint j) {
	return vec4(unpackHalf2x16(ld32(blk)), unpackHalf2x16(ld32(blk + 4u)));
}
float dequant1(uint off) {
	return ldh(off);
}
#define ESIZE 2u

#elif defined(DATA_A_BF16)
#define QK 4u
#define QS 8u
#define DATA_A_PLAIN 1
vec4 dequant4(uint blk, uint j) {
	const uint a = ld32(blk);
	const uint b = ld32(blk + 4u);
	return vec4(uintBitsToFloat(a << 16), uintBitsToFloat(a & 0xFFFF0000u),
		uintBitsToFloat(b << 16), uintBitsToFloat(b & 0xFFFF0000u));
}
float dequant1(uint off) {
	return uintBitsToFloat(ld16(off) << 16);
}
#define ESIZE 2u

#elif defined(DATA_A_Q4_0)
// block_q4_0: f16 d; u8 qs[16]. x[i] = d*(lo(qs[i]) - 8), x[i+16] = d*(hi(qs[i]) - 8).
#define QK 32u
#define QS 18u
vec4 dequant4(uint blk, uint j) {
	const float d = ldh(blk);
	const uint q = (ld32(blk + 2u + 4u * (j & 3u)) >> (j >= 4u ? 4u : 0u)) & 0x0F0F0F0Fu;
	return d * (bytes4(q) - 8.0);
}

#elif defined(DATA_A_Q4_1)
// block_q4_1: f16 d, m; u8 qs[16]. x = d*q + m.
#define QK 32u
#define QS 20u
vec4 dequant4(uint blk, uint j) {
	const float d = ldh(blk);
	const float m = ldh(blk + 2u);
	const uint q = (ld32(blk + 4u + 4u * (j & 3u)) >> (j >= 4u ? 4u : 0u)) & 0x0F0F0F0Fu;
	return d * bytes4(q) + m;
}

#elif defined(DATA_A_Q5_0) || defined(DATA_A_Q5_1)
// block_q5_0: f16 d; u8 qh[4]; u8 qs[16]. Element e takes its fifth bit
// from bit e of qh. x = d*(q - 16).
// block_q5_1: f16 d, m; u8 qh[4]; u8 qs[16]. x = d*q + m.
#define QK 32u
#if defined(DATA_A_Q5_0)
#define QS 22u
#define Q5_QH 2u
#else
#define QS 24u
#define Q5_QH 4u
#endif
vec4 dequant4(uint blk, uint j) {
	const float d = ldh(blk);
	const uint qh = ld32(blk + Q5_QH) >> (4u * j);
	const uint hi = (qh & 1u) | ((qh & 2u) << 7) | ((qh & 4u) << 14) | ((qh & 8u) << 21);
	const uint q = ((ld32(blk + Q5_QH + 4u + 4u * (j & 3u)) >> (j >= 4u ? 4u : 0u)) & 0x0F0F0F0Fu) | (hi << 4);
#if defined(DATA_A_Q5_0)
	return d * (bytes4(q) - 16.0);
#else
	return d * bytes4(q) + ldh(blk + 2u);
#endif
}

#elif defined(DATA_A_Q8_0)
// block_q8_0: f16 d; i8 qs[32]. x = d*q.
#define QK 32u
#define QS 34u
vec4 dequant4(uint blk, uint j) {
	return ldh(blk) * sbytes4(ld32(blk + 2u + 4u * j));
}

#elif defined(DATA_A_Q2_K)
// block_q2_K: u8 scales[16]; u8 qs[64]; f16 d, dmin. Element e: 2-bit value
// at shift 2*((e%128)/32) of qs[32*(e/128) + e%32]; scale byte e/16 holds
// the scale (low nibble) and min (high nibble).
#define QK 256u
#define QS 84u
vec4 dequant4(uint blk, uint j) {
	const uint e = 4u * j;
	const uint q = (ld32(blk + 16u + 32u * (e >> 7) + (e & 31u)) >> (2u * ((e & 127u) >> 5))) & 0x03030303u;
	const uint sc = ld8(blk + (e >> 4));
	const float d = ldh(blk + 80u) * float(sc & 0xFu);
	const float m = ldh(blk + 82u) * float(sc >> 4);
	return d * bytes4(q) - m;
}

#elif defined(DATA_A_Q3_K)
// block_q3_K: u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d. Element e: low
// two bits as in Q2_K, high bit at bit 4*(e/128) + (e%128)/32 of hmask[e%32]
// (a clear bit subtracts 4); 16 six-bit scales packed as ggml's
// dequantize_row_q3_K unpacks them, each minus 32.
#define QK 256u
#define QS 110u
vec4 dequant4(uint blk, uint j) {
	const uint e = 4u * j;
	const uint l = e & 31u;
	const uint sh = (e & 127u) >> 5;
	const uint q = (ld32(blk + 32u + 32u * (e >> 7) + l) >> (2u * sh)) & 0x03030303u;
	const uint h = (ld32(blk + l) >> (4u * (e >> 7) + sh)) & 0x01010101u;
	const uint s = e >> 4;
	const uint lo = s < 8u ? (ld8(blk + 96u + s) & 0xFu) : (ld8(blk + 88u + s) >> 4);
	const uint hi = (ld8(blk + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
	const float d = ldh(blk + 108u) * float(int(lo | (hi << 4)) - 32);
	return d * (bytes4(q) + 4.0 * bytes4(h) - 4.0);
}

#elif defined(DATA_A_Q4_K) || defined(DATA_A_Q5_K)
// block_q4_K: f16 d, dmin; u8 scales[12]; u8 qs[128].
// block_q5_K: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128].
// Element e is in sub-block s = e/32 with its 6-bit scale and min unpacked as
// ggml's get_scale_min_k4; the nibble is qs[32*(s/2) + e%32] >> 4*(s%2); Q5_K
// adds bit s of qh[e%32] as 16.
#define QK 256u
#if defined(DATA_A_Q4_K)
#define QS 144u
#define QK_QS 16u
#else
#define QS 176u
#define QK_QS 48u
#endif
vec4 dequant4(uint blk, uint j) {
	const uint e = 4u * j;
	const uint s = e >> 5;
	const uint l = e & 31u;
	uint q = (ld32(blk + QK_QS + 32u * (s >> 1) + l) >> (4u * (s & 1u))) & 0x0F0F0F0Fu;
#if defined(DATA_A_Q5_K)
	q |= ((ld32(blk + 16u + l) >> s) & 0x01010101u) << 4;
#endif
	uint sc, mn;
	if (s < 4u) {
		sc = ld8(blk + 4u + s) & 63u;
		mn = ld8(blk + 8u + s) & 63u;
	} else {
		const uint b = ld8(blk + 8u + s);
		sc = (b & 0xFu) | ((ld8(blk + s) >> 6) << 4);
		mn = (b >> 4) | ((ld8(blk + 4u + s) >> 6) << 4);
	}
	return ldh(blk) * float(sc) * bytes4(q) - ldh(blk + 2u) * float(mn);
}

#elif defined(DATA_A_Q6_K)
// block_q6_K: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d. Element e with
// n = e/128, t = (e%128)/32, l = e%32: low nibble of ql[64n + 32(t%2) + l]
// shifted by 4(t/2), high two bits at shift 2t of qh[32n + l], minus 32;
// scale e/16.
#define QK 256u
#define QS 210u
vec4 dequant4(uint blk, uint j) {
	const uint e = 4u * j;
	const uint n = e >> 7;
	const uint t = (e & 127u) >> 5;
	const uint l = e & 31u;
	const uint lo = (ld32(blk + 64u * n + 32u * (t & 1u) + l) >> (4u * (t >> 1))) & 0x0F0F0F0Fu;
	const uint hi = (ld32(blk + 128u + 32u * n + l) >> (2u * t)) & 0x03030303u;
	const float d = ldh(blk + 208u) * float(bitfieldExtract(int(ld8(blk + 192u + (e >> 4))), 0, 8));
	return d * (bytes4(lo | (hi << 4)) - 32.0);
}

#elif defined(DATA_A_IQ4_NL)
// block_iq4_nl: f16 d; u8 qs[16]; like Q4_0 through the kvalues_iq4nl book.
#define QK 32u
#define QS 18u
vec4 dequant4(uint blk, uint j) {
	const uint q = (ld32(blk + 2u + 4u * (j & 3u)) >> (j >= 4u ? 4u : 0u)) & 0x0F0F0F0Fu;
	return ldh(blk) * iq4_lookup(q);
}

#elif defined(DATA_A_IQ4_XS)
// block_iq4_xs: f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]. Sub-block
// ib = e/32 has the 6-bit scale (scales_l nibble | 2 bits of scales_h) - 32
// and 32 codes laid out as in IQ4_NL.
#define QK 256u
#define QS 136u
vec4 dequant4(uint blk, uint j) {
	const uint e = 4u * j;
	const uint ib = e >> 5;
	const uint l = e & 31u;
	const uint ls = ((ld8(blk + 4u + (ib >> 1)) >> (4u * (ib & 1u))) & 0xFu) | (((ld16(blk + 2u) >> (2u * ib)) & 3u) << 4);
	const uint q = (ld32(blk + 8u + 16u * ib + (l & 15u)) >> (l >= 16u ? 4u : 0u)) & 0x0F0F0F0Fu;
	return ldh(blk) * float(int(ls) - 32) * iq4_lookup(q);
}

#elif defined(DATA_A_MXFP4)
// block_mxfp4: u8 e (E8M0); u8 qs[16]; like Q4_0 through the kvalues_mxfp4
// book, scaled by 2^(e-128). Blocks are 17 bytes, so at any byte offset.
#define QK 32u
#define QS 17u
vec4 dequant4(uint blk, uint j) {
	const uint q = (ld32(blk + 1u + 4u * (j & 3u)) >> (j >= 4u ? 4u : 0u)) & 0x0F0F0F0Fu;
	return e8m0_half(ld8(blk)) * mxfp4_lookup(q);
}

#else
#error "quant.glsl: define one DATA_A_<TYPE>"
#endif

// load_w4 returns elements 4g..4g+3 of the row whose first byte is at row,
// K elements long. Quantized rows are whole blocks; plain rows may end inside
// the group, and the elements past K read as zero. wide (uniform) says that
// the row starts at a multiple of 16 bytes and K is a multiple of 4, so plain
// groups are single aligned vector loads.
vec4 load_w4(uint row, uint g, uint K, bool wide) {
#if defined(DATA_A_PLAIN)
	if (wide) {
#if defined(DATA_A_F32)
		return uintBitsToFloat(AW4((row >> 4) + g));
#else
		const uvec2 v = AW2((row >> 3) + g);
#if defined(DATA_A_F16)
		return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
#else
		return vec4(uintBitsToFloat(v.x << 16), uintBitsToFloat(v.x & 0xFFFF0000u),
			uintBitsToFloat(v.y << 16), uintBitsToFloat(v.y & 0xFFFF0000u));
#endif
#endif
	}
	if (4u * g + 4u > K) {
		vec4 v = vec4(0.0);
		[[unroll]] for (uint i = 0u; i < 4u; i++) {
			if (4u * g + i < K) {
				v[i] = dequant1(row + (4u * g + i) * ESIZE);
			}
		}
		return v;
	}
	return dequant4(row + g * QS, 0u);
#else
	return dequant4(row + (g / (QK / 4u)) * QS, g % (QK / 4u));
#endif
}

// dequant32 decodes the 32-element sub-block sub of the quantized block at
// byte blk into v (v[i] holds elements 4i..4i+3 of the sub-block). It reads
// each byte of the sub-block once, where dequant4 re-reads scales and words
// per group, so the matvec kernel uses it for quantized types. Sub-block s
// of a 256-element block is elements 32s..32s+31.
#if !defined(DATA_A_PLAIN)
#define QSUB (QK / 32u)
// Q8_0, Q4_0 and IQ4_NL blocks are an f16 scale d then whole words of
// quants, at an even offset blk. Their bytes lie in the words from blk/4
// on: d is the low half of the first word (blk % 4 == 0; each quant word
// then straddles two words) or its high half (blk % 4 == 2; the quant
// words are aligned). dequant32 loads each of those words once, where ld32
// takes two loads per unaligned value (lavapipe turns every load of a
// lane-dependent address into a gather). Like ld32, it reads no word past
// the last one holding block bytes.
#if defined(DATA_A_Q8_0) || defined(DATA_A_Q4_0) || defined(DATA_A_IQ4_NL)
#if defined(DATA_A_Q8_0)
#define HB_WORDS 8u
#else
#define HB_WORDS 4u
#endif
#if defined(A_16BIT)
// half_block returns d of the block at blk and its HB_WORDS quant words in
// q: the scale through the f16 view, each word as two 16-bit loads.
float half_block(uint blk, out uint q[8]) {
	[[unroll]] for (uint i = 0u; i < HB_WORDS; i++) {
		q[i] = ld32(blk + 2u + 4u * i);
	}
	return float(data_ah[blk >> 1]);
}
#else
// half_block returns d of the block at blk and its HB_WORDS quant words in
// q, loading the HB_WORDS + 1 block words once each.
float half_block(uint blk, out uint q[8]) {
	const uint w0 = blk >> 2;
	const bool high = (blk & 2u) != 0u; // d is the high half of word w0
	uint wd[9];
	[[unroll]] for (uint i = 0u; i <= HB_WORDS; i++) {
		wd[i] = AW(w0 + i);
	}
	[[unroll]] for (uint i = 0u; i < HB_WORDS; i++) {
		q[i] = high ? wd[i + 1u] : (wd[i] >> 16) | (wd[i + 1u] << 16);
	}
	return unpackHalf2x16(high ? wd[0] >> 16 : wd[0]).x;
}
#endif
#endif

void dequant32(uint blk, uint sub, out vec4 v[8]) {
#if defined(DATA_A_Q4_0) || defined(DATA_A_IQ4_NL)
	uint qw[8];
	const float d = half_block(blk, qw);
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const uint q = qw[i];
#if defined(DATA_A_IQ4_NL)
		v[i] = d * iq4_lookup(q & 0x0F0F0F0Fu);
		v[4u + i] = d * iq4_lookup((q >> 4) & 0x0F0F0F0Fu);
#else
		v[i] = d * (bytes4(q & 0x0F0F0F0Fu) - 8.0);
		v[4u + i] = d * (bytes4((q >> 4) & 0x0F0F0F0Fu) - 8.0);
#endif
	}

#elif defined(DATA_A_Q4_1)
	const uint qs = blk + 4u;
	const float m = ldh(blk + 2u);
	const float d = ldh(blk);
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const uint q = ld32(qs + 4u * i);
		v[i] = d * bytes4(q & 0x0F0F0F0Fu) + m;
		v[4u + i] = d * bytes4((q >> 4) & 0x0F0F0F0Fu) + m;
	}

#elif defined(DATA_A_Q5_0) || defined(DATA_A_Q5_1)
	const float d = ldh(blk);
	const uint qh = ld32(blk + Q5_QH);
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		// Group i: elements 4i..4i+3, nibbles of qs[4(i%4)..] (high nibbles
		// for i >= 4) and bits 4i..4i+3 of qh.
		const uint h = qh >> (4u * i);
		const uint hi = (h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21);
		const uint q = ((ld32(blk + Q5_QH + 4u + 4u * (i & 3u)) >> (i >= 4u ? 4u : 0u)) & 0x0F0F0F0Fu) | (hi << 4);
#if defined(DATA_A_Q5_0)
		v[i] = d * (bytes4(q) - 16.0);
#else
		v[i] = d * bytes4(q) + ldh(blk + 2u);
#endif
	}

#elif defined(DATA_A_Q8_0)
	uint qw[8];
	const float d = half_block(blk, qw);
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		v[i] = d * sbytes4(qw[i]);
	}

#elif defined(DATA_A_Q2_K)
	// Sub-block s: 2-bit values at shift 2(s%4) of qs[32(s/4) + l]; scale
	// bytes 2s (l < 16) and 2s+1.
	const uint qs = blk + 16u + 32u * (sub >> 2);
	const uint sh = 2u * (sub & 3u);
	const float d = ldh(blk + 80u);
	const float dmin = ldh(blk + 82u);
	const uint sc = ld16(blk + 2u * sub);
	const float d0 = d * float(sc & 0xFu), m0 = dmin * float((sc >> 4) & 0xFu);
	const float d1 = d * float((sc >> 8) & 0xFu), m1 = dmin * float(sc >> 12);
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		const vec4 q = bytes4((ld32(qs + 4u * i) >> sh) & 0x03030303u);
		v[i] = i < 4u ? d0 * q - m0 : d1 * q - m1;
	}

#elif defined(DATA_A_Q3_K)
	const uint qs = blk + 32u + 32u * (sub >> 2);
	const uint sh = 2u * (sub & 3u);
	const uint hb = 4u * (sub >> 2) + (sub & 3u);
	const float d = ldh(blk + 108u);
	float dl[2];
	[[unroll]] for (uint k = 0u; k < 2u; k++) {
		const uint s = 2u * sub + k;
		const uint lo = s < 8u ? (ld8(blk + 96u + s) & 0xFu) : (ld8(blk + 88u + s) >> 4);
		const uint hi = (ld8(blk + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
		dl[k] = d * float(int(lo | (hi << 4)) - 32);
	}
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		const uint q = (ld32(qs + 4u * i) >> sh) & 0x03030303u;
		const uint h = (ld32(blk + 4u * i) >> hb) & 0x01010101u;
		v[i] = dl[i >> 2] * (bytes4(q) + 4.0 * bytes4(h) - 4.0);
	}

#elif defined(DATA_A_Q4_K) || defined(DATA_A_Q5_K)
	uint sc, mn;
	if (sub < 4u) {
		sc = ld8(blk + 4u + sub) & 63u;
		mn = ld8(blk + 8u + sub) & 63u;
	} else {
		const uint b = ld8(blk + 8u + sub);
		sc = (b & 0xFu) | ((ld8(blk + sub) >> 6) << 4);
		mn = (b >> 4) | ((ld8(blk + 4u + sub) >> 6) << 4);
	}
	const float d = ldh(blk) * float(sc);
	const float m = ldh(blk + 2u) * float(mn);
	const uint qs = blk + QK_QS + 32u * (sub >> 1);
	const uint sh = 4u * (sub & 1u);
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		uint q = (ld32(qs + 4u * i) >> sh) & 0x0F0F0F0Fu;
#if defined(DATA_A_Q5_K)
		q |= ((ld32(blk + 16u + 4u * i) >> sub) & 0x01010101u) << 4;
#endif
		v[i] = d * bytes4(q) - m;
	}

#elif defined(DATA_A_Q6_K)
	const uint n = sub >> 2;
	const uint t = sub & 3u;
	const uint ql = blk + 64u * n + 32u * (t & 1u);
	const uint qh = blk + 128u + 32u * n;
	const float d = ldh(blk + 208u);
	const uint sc = ld16(blk + 192u + 2u * sub);
	const float d0 = d * float(bitfieldExtract(int(sc), 0, 8));
	const float d1 = d * float(bitfieldExtract(int(sc), 8, 8));
	[[unroll]] for (uint i = 0u; i < 8u; i++) {
		const uint lo = (ld32(ql + 4u * i) >> (4u * (t >> 1))) & 0x0F0F0F0Fu;
		const uint hi = (ld32(qh + 4u * i) >> (2u * t)) & 0x03030303u;
		v[i] = (i < 4u ? d0 : d1) * (bytes4(lo | (hi << 4)) - 32.0);
	}

#elif defined(DATA_A_IQ4_XS)
	const uint ls = ((ld8(blk + 4u + (sub >> 1)) >> (4u * (sub & 1u))) & 0xFu) | (((ld16(blk + 2u) >> (2u * sub)) & 3u) << 4);
	const float d = ldh(blk) * float(int(ls) - 32);
	const uint qs = blk + 8u + 16u * sub;
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const uint q = ld32(qs + 4u * i);
		v[i] = d * iq4_lookup(q & 0x0F0F0F0Fu);
		v[4u + i] = d * iq4_lookup((q >> 4) & 0x0F0F0F0Fu);
	}

#elif defined(DATA_A_MXFP4)
	uint qw[4];
	const float d = e8m0_half(mxfp4_block(blk, qw));
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		v[i] = d * mxfp4_lookup(qw[i] & 0x0F0F0F0Fu);
		v[4u + i] = d * mxfp4_lookup((qw[i] >> 4) & 0x0F0F0F0Fu);
	}
#endif
}
#endif
