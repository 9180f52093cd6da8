#version 450
// subgroup_size writes each invocation's gl_SubgroupSize and
// gl_NumSubgroups: vk's test of pipelines that require a subgroup size
// (vk.PipelineDesc.SubgroupSize).
#extension GL_KHR_shader_subgroup_basic : enable

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) writeonly buffer O { uvec2 data_o[]; };

void main() {
	data_o[gl_GlobalInvocationID.x] = uvec2(gl_SubgroupSize, gl_NumSubgroups);
}
