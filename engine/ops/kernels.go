package ops

import (
	"fmt"
	"math/bits"
	"runtime"
	"strings"
	"unsafe"

	"github.com/vkllm/vkllm/shaders"
	"github.com/vkllm/vkllm/vk"
)

// maxSpec is the most specialization constants a kernel may take.
const maxSpec = 7

type pipeKey struct {
	name     string
	bindings int
	push     uint32
	spec     [maxSpec]uint32
	sgSize   uint32 // required subgroup size, 0 for the driver's choice
}

// Kernels creates and caches the compute pipelines of one device and records
// kernels into a vk.Cmd. Pipelines are made on first use (from
// shaders.SPIRV(name)) and kept until Close. Like its Device, a Kernels is
// used from one goroutine at a time.
type Kernels struct {
	dev   *vk.Device
	pipes map[pipeKey]*vk.Pipeline
	// pending collects the pipelines asked for inside PrepareAll, to be
	// compiled together; nil outside it.
	pending map[pipeKey]vk.PipelineDesc
	wg      uint32
	sg      bool
	// rowThreads caps the matvec invocations per weight row (see
	// cpuRowThreads).
	rowThreads uint32
	// attnWG is the attention workgroup size: min(wg, 128) on GPUs,
	// cpuAttnWG on CPU devices.
	attnWG uint32
	// matvecCols is the most activation columns MulMat gives the matvec
	// kernel: gpuMatVecPass on GPUs, cpuMatVecCols on CPU devices.
	matvecCols int
	// matvecPass is the most activation columns one matvec dispatch
	// takes: gpuMatVecPass on GPUs, MatVecMaxCols on CPU devices (where
	// the activation loads dominate and a wider pass rereads and decodes
	// the weights less often).
	matvecPass int
	// rowKernels selects the kernels that give each invocation a row of
	// its own, with no reduction and no barrier (flash_attn_rows over
	// flash_attn for the rows flash_attn_tiled leaves, rms_norm_rows): on
	// CPU devices.
	rowKernels bool
	// cpuRows lets one matvec invocation compute several rows (see
	// rowsPerLane): on CPU devices.
	cpuRows bool
	// texel has the CPU matvec read the weights through a uniform texel
	// buffer (the _xt variants): lavapipe fetches the texels of all lanes
	// with one gather, where a storage-buffer load is a loop over the
	// lanes with a branch each (BenchmarkMatVecRows: 20-40% less CPU time).
	texel bool
	// cpuThreads is the number of threads a CPU device runs workgroups on
	// (lavapipe starts one per CPU).
	cpuThreads int
	// attnNames are the attention pipelines' names by K and V type.
	attnNames [3][3]attnNames
	// splitUnits is the compute units AttentionSplits fills; 0 turns
	// splits off (CPU devices; see SetComputeUnits).
	splitUnits int
	// intDot sends the matvecs of the types with an integer-dot kernel
	// through Q8_1 activations (matvec_idot.go): GPUs with
	// shaderIntegerDotProduct.
	intDot bool
	// q8 is the integer-dot path's activation scratch.
	q8 q8State
	// coop is the cooperative-matrix matmul's plan where the device has a
	// suitable shape (coopOK); coopOn sends MulMat's tiled products to it
	// (matmul_coop.go).
	coop           coopPlan
	coopOK, coopOn bool
	// units is the compute units the GPU matvec's rows-per-group rule
	// fills (gpuGroupRows): the device's estimate, or SetComputeUnits'.
	units int
	// groupRows, when not 0, overrides gpuGroupRows (tests).
	groupRows uint32
	// views16 lets the GPU matvec kernels read weight blocks through 16-
	// and 8-bit storage views (useViews16): devices with both
	// storageBuffer16BitAccess and storageBuffer8BitAccess.
	views16 bool
	// sgSize is the subgroup size the matvec subgroup kernels require
	// (matvecSubgroupSize), 0 to leave it to the driver.
	sgSize uint32
	// idStorage makes the expert products (MatVecID, MatVecIDGLU) take
	// their storage-buffer variants where the _xt ones would run (tests).
	idStorage bool
}

// cpuMatVecCols is MulMat's crossover on CPU devices, past any batch: they
// take matvec passes of MatVecMaxCols columns at every width. Since the
// matvec kernel reads its weights through texel buffers and its
// activations as uniforms, the passes beat the tiled kernel by 2-3.4x on
// lavapipe even at 256 columns (BenchmarkMulMatWide, ms per product,
// tiled / passes: Q8_0 1024x1024 n=64 21.7 / 6.4, n=256 58.5 / 22.6;
// Q8_0 2048x2048 n=256 224 / 109; Q4_K 2048x2048 n=256 249 / 123; F16
// 2048x2048 n=256 232 / 100). The tiled kernel computes whole 64-column
// tiles and its loads are per-lane gathers there.
const cpuMatVecCols = 1 << 16

// cpuRowThreads is the matvec invocations-per-row cap on CPU devices. A CPU
// driver (lavapipe) runs a subgroup as SIMD lanes and turns loads from
// lane-dependent addresses into gathers and every barrier into a context
// switch. With one invocation per row the activation loads have the same
// address in every lane (one scalar load, not a gather) and nothing is
// reduced. BenchmarkMatVecVocab/Q8_0 (50257 x 256) on one lavapipe thread:
// 44 ms with the GPU layout (up to 32 per row), 26-28 ms with two per row,
// 15-20 ms with one.
const cpuRowThreads = 1

// cpuRowsWG is the workgroup size of the row kernels (rowKernels): one
// subgroup of a CPU device's SIMD lanes, so that a few rows already keep
// every thread busy.
const cpuRowsWG = 8

// cpuRowsMaxCols is the widest row rms_norm_rows takes (two loops over the
// row in one invocation): lavapipe ends a shader's loops after 65535
// iterations in all, so wider rows take the workgroup kernel.
const cpuRowsMaxCols = 16384

// cpuRowsMaxKeys is the longest context flash_attn_rows takes: its loops
// over the head dimension are unrolled, so each key is one iteration of
// the 65535; CPU devices refuse longer contexts (Attention's error).
const cpuRowsMaxKeys = 65000

// cpuTiledMaxKeys is the longest context flash_attn_tiled takes on CPU
// devices: its loops over a key tile run inside the walk over the keys,
// and past about 20,000 keys they pass the 65535 iterations (measured:
// 16384 keys right, 32768 wrong; TestAttentionLongContext).
const cpuTiledMaxKeys = 16384

// cpuAttnWG is the attention workgroup size on CPU devices: smaller key
// tiles mean cheaper reductions and barriers there (lavapipe, head_dim 32,
// 512-token prefill: 2.1x faster than 128; decode at 512 keys: 1.2x).
const cpuAttnWG = 32

// New returns the kernels of dev. It does not take ownership of dev.
func New(dev *vk.Device) *Kernels {
	lim := dev.Limits()
	wg := uint32(256)
	for wg > 32 && (wg > lim.MaxWorkgroupSize[0] || wg > lim.MaxWorkgroupInvocations || wg*4*4 > lim.MaxSharedMemory) {
		wg /= 2
	}
	k := &Kernels{dev: dev, pipes: map[pipeKey]*vk.Pipeline{}, wg: wg, sg: dev.Features().SubgroupArithmetic,
		rowThreads: matvecWG, attnWG: min(wg, 128), matvecCols: gpuMatVecPass, matvecPass: gpuMatVecPass,
		cpuThreads: runtime.NumCPU(), attnNames: newAttnNames()}
	if dev.Info().Type == vk.TypeCPU {
		k.rowThreads, k.attnWG, k.matvecCols, k.cpuRows = cpuRowThreads, min(wg, cpuAttnWG), cpuMatVecCols, true
		k.matvecPass, k.rowKernels = MatVecMaxCols, true
		k.texel = dev.Limits().MaxTexelElements >= 1<<16 // R32_UINT texel buffers are required of every device
	}
	k.SetComputeUnits(0)
	k.views16 = dev.Features().Storage16 && dev.Features().Storage8
	if !k.cpuRows {
		k.sgSize = matvecSubgroupSize(dev.Info())
	}
	// On CPU devices (lavapipe) the float kernels with several rows per
	// invocation and uniform activations are faster than the integer
	// path (BenchmarkMatVecRows).
	k.intDot = dev.Features().IntegerDot && !k.cpuRows
	k.coop, k.coopOK = chooseCoop(dev)
	k.coopOn = k.coopOK
	return k
}

// SetGPUMatVec makes MatVec and MulMat use the GPU matvec layout on any
// device, CPU devices included (tests run the GPU kernels on lavapipe so):
// up to 32 invocations per row, 1-4 rows per group of them
// (gpuGroupRows), the 16- and 8-bit storage views where the device has
// them, the required subgroup size, passes of gpuMatVecPass columns.
// SetGPUMatVec(false) restores the device's layout. Call it before
// PrepareWeight, SetIntegerDot and Q8ScratchBytes.
func (k *Kernels) SetGPUMatVec(on bool) {
	if on || k.dev.Info().Type != vk.TypeCPU {
		k.rowThreads, k.cpuRows, k.matvecCols, k.matvecPass = matvecWG, false, gpuMatVecPass, gpuMatVecPass
		k.sgSize = matvecSubgroupSize(k.dev.Info())
		return
	}
	k.rowThreads, k.cpuRows, k.matvecCols, k.matvecPass = cpuRowThreads, true, cpuMatVecCols, MatVecMaxCols
	k.sgSize = 0
}

// MaxContext is the most positions Attention attends over on this device:
// cpuRowsMaxKeys on CPU devices (their driver bounds a shader's loop
// iterations), 0 (no bound of the kernels) elsewhere.
func (k *Kernels) MaxContext() int {
	if k.rowKernels {
		return cpuRowsMaxKeys
	}
	return 0
}

// Device returns the device the kernels run on.
func (k *Kernels) Device() *vk.Device { return k.dev }

// WG is the default workgroup size (a power of two, at most 256, within the
// device's workgroup and shared-memory limits): pass it as specialization
// constant 0.
func (k *Kernels) WG() uint32 { return k.wg }

// Subgroups reports whether reduction kernels use their subgroup-arithmetic
// ("_sg") variants. SetSubgroups(false) forces the shared-memory fallback.
func (k *Kernels) Subgroups() bool { return k.sg }

// SetSubgroups enables or disables the subgroup variants; enabling has no
// effect on devices without subgroup arithmetic in compute shaders.
func (k *Kernels) SetSubgroups(on bool) { k.sg = on && k.dev.Features().SubgroupArithmetic }

// Pipeline returns the pipeline for the shader variant name with the given
// number of storage-buffer bindings, push-constant size in bytes and
// specialization constants (ids 0..len-1), creating it on first use.
func (k *Kernels) Pipeline(name string, bindings int, pushSize uint32, spec ...uint32) (*vk.Pipeline, error) {
	if len(spec) > maxSpec {
		return nil, fmt.Errorf("ops: pipeline %s: %d specialization constants, at most %d", name, len(spec), maxSpec)
	}
	sgSize, full := k.requiredSubgroupSize(name, spec)
	key := pipeKey{name: name, bindings: bindings, push: pushSize, sgSize: sgSize}
	copy(key.spec[:], spec)
	if p, ok := k.pipes[key]; ok {
		return p, nil
	}
	code, err := shaders.SPIRV(name)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	desc := vk.PipelineDesc{Name: name, SPIRV: code, Bindings: bindings, Uniform: uniformBindings(name), Texel: texelBindings(name),
		PushSize: pushSize, Spec: append([]uint32(nil), spec...), SubgroupSize: sgSize, FullSubgroups: full}
	if k.pending != nil {
		k.pending[key] = desc
		return nil, nil
	}
	p, err := k.dev.NewPipeline(desc)
	if err != nil {
		return nil, err
	}
	k.pipes[key] = p
	return p, nil
}

// PrepareAll runs prepare (PrepareWeight and PrepareFused calls) with the
// pipelines they ask for collected instead of created, then compiles them
// all at once (vk.Device.Precompile: on every core) and creates them. Only
// the Prepare functions may run inside it: Pipeline returns nil there.
func (k *Kernels) PrepareAll(prepare func() error) error {
	k.pending = map[pipeKey]vk.PipelineDesc{}
	err := prepare()
	pending := k.pending
	k.pending = nil
	if err != nil {
		return err
	}
	descs := make([]vk.PipelineDesc, 0, len(pending))
	for _, d := range pending {
		descs = append(descs, d)
	}
	if err := k.dev.Precompile(descs); err != nil {
		return fmt.Errorf("ops: %w", err)
	}
	for key, desc := range pending {
		p, err := k.dev.NewPipeline(desc)
		if err != nil {
			return err
		}
		k.pipes[key] = p
	}
	return nil
}

// uniformBindings returns the uniform-buffer bindings of variant name (see
// vk.PipelineDesc.Uniform): binding 1, the activations, for the matvec
// variants named "_xu" and "_xt", and the routes of the expert products'
// _xt variants (binding 3 of matvec_id, 6 of matvec_fused_id); none
// otherwise.
func uniformBindings(name string) uint32 {
	if !strings.HasSuffix(name, "_xu") && !strings.HasSuffix(name, "_xt") {
		return 0
	}
	switch {
	case strings.HasPrefix(name, "matvec_id_"):
		return 1<<1 | 1<<3
	case strings.HasPrefix(name, "matvec_fused_id_"):
		return 1<<1 | 1<<6
	}
	return 1 << 1
}

// texelBindings returns the texel-buffer bindings of variant name (see
// vk.PipelineDesc.Texel): binding 0, the weights, for the "_xt" variants.
func texelBindings(name string) uint32 {
	if strings.HasSuffix(name, "_xt") {
		return 1
	}
	return 0
}

// matvecSubgroupSize returns the subgroup size the matvec kernels that
// reduce with subgroup adds require on a device (vk.PipelineDesc.
// SubgroupSize): the largest power of two up to the matvec workgroup
// (matvecWG, 32) that the device's subgroup size control allows, so that
// the workgroup is one or a few full subgroups (32 on NVIDIA, Intel and AMD
// RDNA, whose wave32 a workgroup of 32 fills; AMD GCN, whose only size is
// 64, keeps the driver's choice), or 0 where the device has no control or
// no such size.
func matvecSubgroupSize(info vk.DeviceInfo) uint32 {
	for s := uint32(matvecWG); s > 0 && s >= info.MinSubgroupSize; s /= 2 {
		if info.SubgroupSizeOK(s) {
			return s
		}
	}
	return 0
}

// requiredSubgroupSize returns the subgroup size (0: the driver's) and
// whether full subgroups are required for the pipeline of variant name
// with specialization constants spec: the matvec subgroup variants
// ("matvec_..._sg...") take k.sgSize, full where the device allows it and
// the workgroup size spec[0] is a multiple of it.
func (k *Kernels) requiredSubgroupSize(name string, spec []uint32) (uint32, bool) {
	if k.sgSize == 0 || !strings.HasPrefix(name, "matvec_") || !strings.Contains(name, "_sg") || len(spec) == 0 {
		return 0, false
	}
	return k.sgSize, k.dev.Features().FullSubgroups && spec[0]%k.sgSize == 0
}

// Close destroys the pipelines. The Kernels must not be used afterwards.
func (k *Kernels) Close() {
	for key, p := range k.pipes {
		p.Close()
		delete(k.pipes, key)
	}
}

// Record records one dispatch of the shader variant name: push is the Go
// struct mirroring the shader's push-constant block (its size is the
// pipeline's push size), spec the specialization constants (spec[0] is the
// workgroup size by convention), groups the workgroup counts (see Groups)
// and bindings one vk.Range per binding, in binding order.
func Record[T any](k *Kernels, c *vk.Cmd, name string, spec []uint32, groups [3]uint32, push *T, bindings ...vk.Range) error {
	p, err := k.Pipeline(name, len(bindings), uint32(unsafe.Sizeof(*push)), spec...)
	if err != nil {
		return err
	}
	return c.Dispatch(p, groups, vk.Bytes(push), bindings...)
}

// Groups spreads n workgroups over x and y so that neither exceeds the
// device's limit; shaders recover the linear index with group_id() from
// common.glsl and must bounds-check it (x*y may exceed n).
func (k *Kernels) Groups(n uint32) [3]uint32 {
	if n == 0 {
		n = 1
	}
	maxX := k.dev.Limits().MaxWorkgroupCount[0]
	if maxX == 0 || n <= maxX {
		return [3]uint32{n, 1, 1}
	}
	y := (n + maxX - 1) / maxX
	x := (n + y - 1) / y
	return [3]uint32{x, y, 1}
}

// elemChunk is the largest element count per binding for an element of
// size bytes that keeps every chunk offset a multiple of 256 bytes.
func (k *Kernels) elemChunk(size uint64) uint64 {
	return k.dev.MaxBinding() / size &^ 63
}

func ceilDiv(a, b uint32) uint32 { return (a + b - 1) / b }

func isPow2(x uint32) bool { return x != 0 && bits.OnesCount32(x) == 1 }

// sized checks that r holds at least n bytes.
func sized(op, what string, r vk.Range, n uint64) error {
	if r.Buf == nil {
		return fmt.Errorf("ops: %s: %s: no buffer", op, what)
	}
	if r.Size < n {
		return fmt.Errorf("ops: %s: %s is %d bytes, want at least %d", op, what, r.Size, n)
	}
	return nil
}

// window returns the binding for bytes [off, off+size) of r. A dispatch
// that starts at the beginning of r binds from r's offset to the end of its
// buffer (up to one binding's worth), so the cached descriptor set depends
// only on the buffer and the offset, not on the sizes of the step (batch
// rows, context length); kernels bound their work by the counts in their
// push constants and touch nothing past the caller's range. Other chunks of
// a tensor larger than one binding bind exactly their bytes.
func (k *Kernels) window(r vk.Range, off, size uint64) vk.Range {
	if off == 0 && r.Buf != nil {
		end := min(r.Buf.Size(), r.Offset+k.dev.MaxBinding())
		if end >= r.Offset+size {
			return vk.Range{Buf: r.Buf, Offset: r.Offset, Size: end - r.Offset}
		}
	}
	return r.Sub(off, size)
}
