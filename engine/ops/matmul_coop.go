package ops

import (
	"strings"

	"github.com/vkllm/vkllm/vk"
)

// The cooperative-matrix matmul (shaders/matmul_coop.comp): MulMat's tiled
// products on the GPU's matrix units, with f16 weight and activation tiles
// and f32 accumulators. The output tile is the f32 kernel's, 64 x 64, made
// of four subgroups' 32 x 32 blocks of the device's matrix shape.
const (
	coopBM, coopBN = 64, 64 // output tile (BM, BN)
	coopBK         = 32     // depth of a step (BK)
	coopSub        = 32     // a subgroup's block is coopSub x coopSub (SM, SN)
	coopSubgroups  = 4      // subgroups per workgroup
	// coopShared is the kernel's shared memory: two f16 tiles of 64 rows
	// of BK+8, and the f32 output tile of 64 columns of BM+4.
	coopShared = 2*64*(coopBK+8)*2 + 64*(coopBM+4)*4
)

// coopPlan is how the cooperative-matrix matmul runs on a device.
type coopPlan struct {
	shape  vk.CoopMatrixShape
	suffix string // the variants' suffix: "_khr" or "_nv"
	wg     uint32 // coopSubgroups x the subgroup size
}

// chooseCoop returns the device's cooperative-matrix plan, or false when
// the device lacks what the kernel needs (see pickCoopShape).
func chooseCoop(dev *vk.Device) (coopPlan, bool) {
	info := dev.Info()
	f := dev.Features()
	if !f.CoopMatrix || !f.Float16 || info.Type == vk.TypeCPU {
		return coopPlan{}, false
	}
	suffix := "_khr"
	if info.CoopMatrixExt == "VK_NV_cooperative_matrix" {
		suffix = "_nv"
	}
	shape, wg, ok := pickCoopShape(dev.CoopMatrixShapes(), info.SubgroupSize, info.Limits)
	if !ok {
		return coopPlan{}, false
	}
	return coopPlan{shape: shape, suffix: suffix, wg: wg}, true
}

// pickCoopShape chooses the matrix shape of the cooperative-matrix matmul
// among a device's shapes and its workgroup size (coopSubgroups subgroups
// of sg invocations): f16 x f16 + f32 -> f32 in subgroup scope, M and N
// dividing a subgroup's 32 x 32 block, K dividing the 32-deep step, all
// at least 8 (so that a subgroup holds at most 4 x 4 accumulators, the
// kernel's bound); the workgroup and the kernel's shared memory must fit
// the limits. It prefers 16 x 16 x 16, the shape every vendor offers,
// then the largest M*N*K.
func pickCoopShape(shapes []vk.CoopMatrixShape, sg uint32, lim vk.Limits) (vk.CoopMatrixShape, uint32, bool) {
	wg := coopSubgroups * sg
	if sg == 0 || wg > lim.MaxWorkgroupSize[0] || wg > lim.MaxWorkgroupInvocations || coopShared > lim.MaxSharedMemory {
		return vk.CoopMatrixShape{}, 0, false
	}
	fits := func(d uint32) bool { return d >= 8 && d <= coopSub && coopSub%d == 0 }
	best, found := vk.CoopMatrixShape{}, false
	score := func(s vk.CoopMatrixShape) uint32 {
		if s.M == 16 && s.N == 16 && s.K == 16 {
			return 1 << 30
		}
		return s.M * s.N * s.K
	}
	for _, s := range shapes {
		if s.A != vk.ComponentFloat16 || s.B != vk.ComponentFloat16 || s.C != vk.ComponentFloat32 ||
			s.Result != vk.ComponentFloat32 || s.Scope != vk.ScopeSubgroup || s.Saturating {
			continue
		}
		if !fits(s.M) || !fits(s.N) || !fits(s.K) {
			continue
		}
		if !found || score(s) > score(best) {
			best, found = s, true
		}
	}
	return best, wg, found
}

// CoopMatrix reports whether MulMat's tiled products (more than the
// matvec crossover's columns: prompt processing, wide batches) run on the
// GPU's matrix units: on by default where the device offers a suitable
// f16 cooperative-matrix shape (CoopMatrixShape), off elsewhere. The
// products then round the weights and activations to f16 (accumulating in
// f32), as llama.cpp's Vulkan backend does.
func (k *Kernels) CoopMatrix() bool { return k.coopOn }

// SetCoopMatrix turns the cooperative-matrix matmul on or off; turning it
// on has no effect on devices without a suitable shape, which keep the f32
// tiled kernel. Call it before PrepareWeight.
func (k *Kernels) SetCoopMatrix(on bool) { k.coopOn = on && k.coopOK }

// CoopMatrixShape returns the matrix shape the cooperative-matrix matmul
// uses on this device, or false where it has none.
func (k *Kernels) CoopMatrixShape() (vk.CoopMatrixShape, bool) { return k.coop.shape, k.coopOK }

// coopKernel returns the cooperative-matrix variant of the f32 matmul
// variant matmul ("matmul_q4_0_f32" -> "matmul_coop_q4_0_f32_khr").
func (k *Kernels) coopKernel(matmul string) string {
	return "matmul_coop_" + strings.TrimPrefix(matmul, "matmul_") + k.coop.suffix
}

// coopSpec returns the cooperative-matrix matmul's specialization
// constants (shaders/matmul_coop.comp): workgroup size, fast loads,
// accumulate, and the M, N, K of the shape.
func (k *Kernels) coopSpec(fast, acc uint32) [6]uint32 {
	s := k.coop.shape
	return [6]uint32{k.coop.wg, fast, acc, s.M, s.N, s.K}
}
