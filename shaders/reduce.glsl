// reduce.glsl: workgroup-wide sum and max of one float per invocation. Every
// invocation of the workgroup must call them (uniform control flow); all get
// the result. With USE_SUBGROUP they reduce within each subgroup first
// (gl_SubgroupSize is whatever the device has; never assumed) and combine
// the per-subgroup partials; otherwise a shared-memory tree (WG is a power
// of two).

shared float red_buf[WG];

float wg_sum(float v) {
#ifdef USE_SUBGROUP
	v = subgroupAdd(v);
	if (subgroupElect()) {
		red_buf[gl_SubgroupID] = v;
	}
	barrier();
	float s = 0.0;
	for (uint i = 0; i < gl_NumSubgroups; i++) {
		s += red_buf[i];
	}
	barrier();
	return s;
#else
	const uint t = gl_LocalInvocationID.x;
	red_buf[t] = v;
	barrier();
	[[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
		if (t < s) {
			red_buf[t] += red_buf[t + s];
		}
		barrier();
	}
	const float r = red_buf[0];
	barrier();
	return r;
#endif
}

float wg_max(float v) {
#ifdef USE_SUBGROUP
	v = subgroupMax(v);
	if (subgroupElect()) {
		red_buf[gl_SubgroupID] = v;
	}
	barrier();
	float m = NEG_INF;
	for (uint i = 0; i < gl_NumSubgroups; i++) {
		m = max(m, red_buf[i]);
	}
	barrier();
	return m;
#else
	const uint t = gl_LocalInvocationID.x;
	red_buf[t] = v;
	barrier();
	[[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
		if (t < s) {
			red_buf[t] = max(red_buf[t], red_buf[t + s]);
		}
		barrier();
	}
	const float r = red_buf[0];
	barrier();
	return r;
#endif
}
