package vk

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// Subgroup size control (VK_EXT_subgroup_size_control, core in Vulkan
// 1.3): a compute pipeline may require one subgroup size within
// [DeviceInfo.MinSubgroupSize, MaxSubgroupSize] (PipelineDesc.SubgroupSize)
// and that every subgroup be full (PipelineDesc.FullSubgroups), where
// otherwise the driver picks the size (AMD RDNA: wave32 or wave64; Intel:
// SIMD8, 16 or 32) and may leave a subgroup partly empty.

// subgroupSizeFromC copies the subgroup-size-control part of ci into d.
// The control counts only where compute shaders may use it.
func subgroupSizeFromC(ci *C.vkllm_info, d *DeviceInfo) {
	compute := ci.sg_required_stages&C.VK_SHADER_STAGE_COMPUTE_BIT != 0
	d.Features.SubgroupSizeControl = ci.sg_size_control != 0 && compute && ci.sg_min_size > 0
	d.Features.FullSubgroups = ci.sg_full_subgroups != 0
	d.MinSubgroupSize, d.MaxSubgroupSize = uint32(ci.sg_min_size), uint32(ci.sg_max_size)
	if !d.Features.SubgroupSizeControl {
		d.MinSubgroupSize, d.MaxSubgroupSize = d.SubgroupSize, d.SubgroupSize
	}
}

// subgroupSizeChain links the subgroup-size-control features into the
// device-creation chain when the device has them, returning the extension
// to enable ("" if none) and the node to free after vkCreateDevice (nil if
// none).
func subgroupSizeChain(chain unsafe.Pointer, ci *C.vkllm_info, f Features) (ext string, node unsafe.Pointer, err error) {
	if chain == nil || !(f.SubgroupSizeControl || f.FullSubgroups) {
		return "", nil, nil
	}
	node = C.vkllm_chain_subgroup_size(chain, ci)
	if node == nil {
		return "", nil, fmt.Errorf("vk: out of host memory building the feature chain")
	}
	return "VK_EXT_subgroup_size_control", node, nil
}

// SubgroupSizeOK reports whether a compute pipeline may require subgroups
// of size n (a power of two within the device's range, where it has
// subgroup size control).
func (d *DeviceInfo) SubgroupSizeOK(n uint32) bool {
	return d.Features.SubgroupSizeControl && bits.OnesCount32(n) == 1 && n >= d.MinSubgroupSize && n <= d.MaxSubgroupSize
}

// checkSubgroupSize validates desc's subgroup requirements against the
// device: the size must be one the device allows, and full subgroups need
// computeFullSubgroups and a workgroup size (Spec[0], by convention) that
// is a multiple of the subgroup size.
func (d *Device) checkSubgroupSize(desc PipelineDesc) error {
	where := "NewPipeline(" + desc.Name + ")"
	if desc.SubgroupSize != 0 && !d.info.SubgroupSizeOK(desc.SubgroupSize) {
		if !d.info.Features.SubgroupSizeControl {
			return fmt.Errorf("vk: %s: subgroup size %d required, but %s has no subgroup size control for compute shaders", where, desc.SubgroupSize, d.info.Name)
		}
		return fmt.Errorf("vk: %s: subgroup size %d, want a power of two in [%d, %d]", where, desc.SubgroupSize, d.info.MinSubgroupSize, d.info.MaxSubgroupSize)
	}
	if desc.FullSubgroups {
		if !d.info.Features.FullSubgroups {
			return fmt.Errorf("vk: %s: full subgroups required, but %s lacks computeFullSubgroups", where, d.info.Name)
		}
		sg := desc.SubgroupSize
		if sg == 0 {
			sg = d.info.MaxSubgroupSize
		}
		if len(desc.Spec) == 0 || sg == 0 || desc.Spec[0]%sg != 0 {
			return fmt.Errorf("vk: %s: full subgroups need a workgroup size (Spec[0]) that is a multiple of the subgroup size %d", where, sg)
		}
	}
	return nil
}
