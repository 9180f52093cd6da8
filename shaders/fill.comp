#version 450
// fill writes a constant into every element of a buffer. It is the smallest
// kernel and proves the build path (glslc -> spv -> go:embed -> pipeline).
// variant: fill_f32

layout(local_size_x_id = 0) in;

layout(binding = 0) writeonly buffer Dst { float data_d[]; };

layout(push_constant) uniform Params {
	uint n;
	float value;
} p;

void main() {
	const uint i = gl_GlobalInvocationID.x;
	if (i >= p.n) {
		return;
	}
	data_d[i] = p.value;
}
