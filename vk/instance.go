// Package vk is a thin, safe Go layer over Vulkan compute (through
// github.com/goki/vulkan): instance and device choice, buffers and memory,
// compute pipelines from SPIR-V, cached descriptor sets, command recording
// with barriers, and one submit + fence wait per recorded graph.
//
// vk knows nothing about models. A Device is used from one goroutine at a
// time (the engine's scheduler); Buffers and Pipelines belong to the Device
// that made them and must be closed before it.
//
// Bindings. A storage-buffer binding can cover at most
// Limits.MaxStorageBufferRange bytes (128 MiB on lavapipe), while a Buffer
// can be as large as one allocation (Limits.MaxAllocation). Kernels see
// Ranges, not Buffers: a tensor that is larger than one binding is bound as
// several Ranges (Range.Windows), either in separate dispatches over chunks
// of the work, or as several bindings of one dispatch that the shader
// indexes by offset. Device.MaxBinding gives the largest aligned window.
package vk

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// ValidationLayer is the Khronos validation layer's name.
const ValidationLayer = "VK_LAYER_KHRONOS_validation"

// loader guards goki/vulkan's process-wide function-pointer table, which it
// fills in C globals; loading it twice concurrently would race.
var loader struct {
	once sync.Once
	err  error
}

func load() error {
	loader.once.Do(func() {
		gipa := C.vkllm_loader_gipa()
		if gipa == nil {
			loader.err = fmt.Errorf("vk: cannot load libvulkan.so.1 (install libvulkan1 and a driver, e.g. mesa-vulkan-drivers)")
			return
		}
		gv.SetGetInstanceProcAddr(gipa)
		if err := gv.Init(); err != nil {
			loader.err = fmt.Errorf("vk: vulkan init: %v", err)
		}
	})
	return loader.err
}

// Options choose and configure a device. The zero value picks the default
// device without validation.
type Options struct {
	// Device selects a device by index ("0") or case-insensitive name
	// substring ("llvmpipe"). Empty means $VKLLM_DEVICE, and if that is empty
	// too the default order: discrete > integrated > virtual > CPU.
	Device string
	// Validation enables VK_LAYER_KHRONOS_validation when it is installed
	// (also turned on by VKLLM_VALIDATION=1) and collects its warnings and
	// errors; see Device.ValidationMessages.
	Validation bool
	// RequireValidation makes Open fail when validation is asked for but the
	// layer is not installed.
	RequireValidation bool
	// ForceStaging uses device-local buffers filled through staging buffers
	// even on UMA devices, the path discrete GPUs take. For tests.
	ForceStaging bool
	// DeviceLocalBudget caps the bytes of DeviceBuffers placed in
	// device-local memory; 0 means $VKLLM_DEVICE_LOCAL_BUDGET, and when
	// that is unset too, the heaps' own budgets. On devices that are not
	// discrete the buffers past it fall back to host-visible memory (see
	// Device.Capacity): with it a UMA device such as lavapipe stands in for
	// an APU whose device-local heap is a small carve-out.
	DeviceLocalBudget uint64
	// PipelineCacheDir, when not empty, is the folder of the file that
	// keeps the device's compiled pipelines across processes (a
	// VkPipelineCache; see PipelineCacheFile for its name): Open loads it,
	// every pipeline is created through it, and SavePipelineCache writes
	// it back. A missing, corrupt or foreign file is ignored
	// (Device.PipelineCache says why). Empty: pipelines are compiled in
	// every process (the driver may still keep a cache of its own, as
	// Mesa's shader cache does).
	PipelineCacheDir string
	// PipelineCacheMaxBytes bounds the pipeline-cache file: a larger file
	// is ignored and larger data is not saved. 0 means
	// DefaultPipelineCacheMaxBytes.
	PipelineCacheMaxBytes int64
}

// DeviceType is a physical device's kind, in Vulkan's numbering.
type DeviceType int

// Device types, as VkPhysicalDeviceType.
const (
	TypeOther      DeviceType = 0
	TypeIntegrated DeviceType = 1
	TypeDiscrete   DeviceType = 2
	TypeVirtual    DeviceType = 3
	TypeCPU        DeviceType = 4
)

// String returns the type's lower-case name.
func (t DeviceType) String() string {
	switch t {
	case TypeIntegrated:
		return "integrated"
	case TypeDiscrete:
		return "discrete"
	case TypeVirtual:
		return "virtual"
	case TypeCPU:
		return "cpu"
	}
	return "other"
}

// rank orders device types for the default choice (lower is better).
func (t DeviceType) rank() int {
	switch t {
	case TypeDiscrete:
		return 0
	case TypeIntegrated:
		return 1
	case TypeVirtual:
		return 2
	case TypeCPU:
		return 3
	}
	return 4
}

// Features are the optional capabilities vkllm can use. None is required
// except Storage16 by kernels that read or write f16 buffers.
type Features struct {
	Storage16  bool `json:"storage_16bit"`       // storageBuffer16BitAccess
	Float16    bool `json:"shader_float16"`      // shaderFloat16 arithmetic
	Storage8   bool `json:"storage_8bit"`        // storageBuffer8BitAccess
	Int8       bool `json:"shader_int8"`         // shaderInt8
	IntegerDot bool `json:"integer_dot_product"` // shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product), enabled at Open
	// CoopMatrix: VK_KHR_cooperative_matrix (or, on drivers without it,
	// VK_NV_cooperative_matrix) with its cooperativeMatrix feature for
	// compute shaders and the Vulkan memory model, enabled at Open; see
	// DeviceInfo.CoopMatrixShapes.
	CoopMatrix          bool `json:"cooperative_matrix"`
	BufferDeviceAddress bool `json:"buffer_device_address"`
	PushDescriptor      bool `json:"push_descriptor"` // VK_KHR_push_descriptor
	MemoryBudget        bool `json:"memory_budget"`   // VK_EXT_memory_budget
	SubgroupArithmetic  bool `json:"subgroup_arithmetic"`
	SubgroupShuffle     bool `json:"subgroup_shuffle"`
	// SubgroupSizeControl: compute pipelines may require a subgroup size
	// (VK_EXT_subgroup_size_control's subgroupSizeControl with the compute
	// stage in requiredSubgroupSizeStages), enabled at Open.
	SubgroupSizeControl bool `json:"subgroup_size_control"`
	// FullSubgroups: compute pipelines may require full subgroups
	// (computeFullSubgroups), enabled at Open.
	FullSubgroups bool `json:"compute_full_subgroups"`
}

// Limits are the device limits vkllm respects.
type Limits struct {
	MaxStorageBufferRange   uint64    `json:"max_storage_buffer_range"`
	MaxAllocation           uint64    `json:"max_memory_allocation_size"`
	MinStorageOffsetAlign   uint64    `json:"min_storage_buffer_offset_alignment"`
	MaxUniformBufferRange   uint64    `json:"max_uniform_buffer_range"`
	MinUniformOffsetAlign   uint64    `json:"min_uniform_buffer_offset_alignment"`
	MaxTexelElements        uint64    `json:"max_texel_buffer_elements"`
	MinTexelOffsetAlign     uint64    `json:"min_texel_buffer_offset_alignment"`
	MaxWorkgroupSize        [3]uint32 `json:"max_workgroup_size"`
	MaxWorkgroupInvocations uint32    `json:"max_workgroup_invocations"`
	MaxWorkgroupCount       [3]uint32 `json:"max_workgroup_count"`
	MaxSharedMemory         uint32    `json:"max_shared_memory"`
	MaxPushConstants        uint32    `json:"max_push_constants"`
}

// Heap is one memory heap: its size, the driver's budget for this process
// (the size when VK_EXT_memory_budget is absent) and its current usage.
type Heap struct {
	Size        uint64 `json:"size"`
	Budget      uint64 `json:"budget"`
	Usage       uint64 `json:"usage"`
	DeviceLocal bool   `json:"device_local"`
}

// DeviceInfo describes one physical device.
type DeviceInfo struct {
	Index         int        `json:"index"`
	Name          string     `json:"name"`
	Type          DeviceType `json:"-"`
	TypeName      string     `json:"type"`
	DriverName    string     `json:"driver"`
	DriverInfo    string     `json:"driver_info"`
	DriverVersion uint32     `json:"driver_version"`
	APIVersion    string     `json:"api_version"`
	VendorID      uint32     `json:"vendor_id"`
	DeviceID      uint32     `json:"device_id"`
	SubgroupSize  uint32     `json:"subgroup_size"`
	// ComputeUnits is the count of the device's streaming multiprocessors
	// (NVIDIA: VK_NV_shader_sm_builtins' shaderSMCount) or compute units
	// (AMD: VK_AMD_shader_core_properties' shader engines x arrays per
	// engine x CUs per array); 0 when the driver exposes neither: core
	// Vulkan has no such count. See EstimateComputeUnits.
	ComputeUnits uint32 `json:"compute_units"`
	// MinSubgroupSize and MaxSubgroupSize bound the subgroup sizes a
	// compute pipeline may require (PipelineDesc.SubgroupSize); both are
	// SubgroupSize on devices without subgroup size control.
	MinSubgroupSize uint32   `json:"min_subgroup_size"`
	MaxSubgroupSize uint32   `json:"max_subgroup_size"`
	Heaps           []Heap   `json:"heaps"`
	Features        Features `json:"features"`
	Limits          Limits   `json:"limits"`
	// CoopMatrixExt names the cooperative-matrix extension in use
	// ("VK_KHR_cooperative_matrix" or "VK_NV_cooperative_matrix"; empty
	// where Features.CoopMatrix is false) and CoopMatrixShapes lists its
	// supported shapes, in the driver's order.
	CoopMatrixExt    string            `json:"coop_matrix_extension,omitempty"`
	CoopMatrixShapes []CoopMatrixShape `json:"coop_matrix_shapes,omitempty"`
	// PipelineCacheUUID is the driver's pipelineCacheUUID: compiled
	// pipelines saved by a driver with another one are not usable
	// (Options.PipelineCacheDir).
	PipelineCacheUUID [16]byte `json:"-"`
}

// ComponentType is a cooperative matrix's element type, numbered as
// VkComponentTypeKHR (and VkComponentTypeNV).
type ComponentType uint32

// The component types.
const (
	ComponentFloat16 ComponentType = 0
	ComponentFloat32 ComponentType = 1
	ComponentFloat64 ComponentType = 2
	ComponentSint8   ComponentType = 3
	ComponentSint16  ComponentType = 4
	ComponentSint32  ComponentType = 5
	ComponentSint64  ComponentType = 6
	ComponentUint8   ComponentType = 7
	ComponentUint16  ComponentType = 8
	ComponentUint32  ComponentType = 9
	ComponentUint64  ComponentType = 10
)

var componentNames = [...]string{"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"}

// String returns the type's short name ("f16", "s8"), or its number.
func (t ComponentType) String() string {
	if int(t) < len(componentNames) {
		return componentNames[t]
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// MarshalText writes the short name, for JSON.
func (t ComponentType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Scope is the set of invocations sharing one cooperative matrix, numbered
// as VkScopeKHR.
type Scope uint32

// The scopes.
const (
	ScopeDevice      Scope = 1
	ScopeWorkgroup   Scope = 2
	ScopeSubgroup    Scope = 3
	ScopeQueueFamily Scope = 5
)

// String returns the scope's lower-case name, or its number.
func (s Scope) String() string {
	switch s {
	case ScopeDevice:
		return "device"
	case ScopeWorkgroup:
		return "workgroup"
	case ScopeSubgroup:
		return "subgroup"
	case ScopeQueueFamily:
		return "queue-family"
	}
	return fmt.Sprintf("scope%d", uint32(s))
}

// MarshalText writes the name, for JSON.
func (s Scope) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// CoopMatrixShape is one multiply-add shape a device's cooperative matrices
// support: Result (M x N) = A (M x K) * B (K x N) + C (M x N), with the
// element types and the scope of the matrices. Saturating is KHR's
// saturatingAccumulation (integer types).
type CoopMatrixShape struct {
	M          uint32        `json:"m"`
	N          uint32        `json:"n"`
	K          uint32        `json:"k"`
	A          ComponentType `json:"a"`
	B          ComponentType `json:"b"`
	C          ComponentType `json:"c"`
	Result     ComponentType `json:"result"`
	Saturating bool          `json:"saturating,omitempty"`
	Scope      Scope         `json:"scope"`
}

// String writes the shape as "16x16x16 f16*f16+f32->f32 subgroup".
func (s CoopMatrixShape) String() string {
	sat := ""
	if s.Saturating {
		sat = " saturating"
	}
	return fmt.Sprintf("%dx%dx%d %v*%v+%v->%v %v%s", s.M, s.N, s.K, s.A, s.B, s.C, s.Result, s.Scope, sat)
}

// DeviceLocalBytes sums the sizes of the device-local heaps.
func (d *DeviceInfo) DeviceLocalBytes() uint64 {
	var n uint64
	for _, h := range d.Heaps {
		if h.DeviceLocal {
			n += h.Size
		}
	}
	return n
}

// EstimateComputeUnits returns ComputeUnits, or when the driver does not
// report it (guessed true) a conservative guess by the device type: 16
// for a discrete GPU (Intel's Arc cards have 8 to 32 Xe-cores), 8 for an
// integrated or virtual one, the host's CPUs for a CPU device (lavapipe
// runs a thread per CPU) and 4 otherwise. A low guess costs parallelism in
// work that sizes itself by it, a high one only extra partial results to
// merge; so the guesses sit at the low end of each kind.
func (d *DeviceInfo) EstimateComputeUnits() (n int, guessed bool) {
	if d.ComputeUnits > 0 {
		return int(d.ComputeUnits), false
	}
	switch d.Type {
	case TypeDiscrete:
		return 16, true
	case TypeIntegrated, TypeVirtual:
		return 8, true
	case TypeCPU:
		return runtime.NumCPU(), true
	}
	return 4, true
}

// instance owns a VkInstance and the C context that collects validation
// messages.
type instance struct {
	inst       gv.Instance
	ctx        *C.vkllm_ctx
	validation bool
	phys       []gv.PhysicalDevice
	infos      []DeviceInfo
}

func validationWanted(o Options) bool {
	return o.Validation || os.Getenv("VKLLM_VALIDATION") == "1"
}

func newInstance(o Options) (*instance, error) {
	if err := load(); err != nil {
		return nil, err
	}
	ctx := C.vkllm_ctx_new()
	if ctx == nil {
		return nil, fmt.Errorf("vk: cannot dlopen libvulkan.so.1")
	}
	in := &instance{ctx: ctx}
	var layers, exts []string
	if validationWanted(o) {
		if hasLayer(ctx, ValidationLayer) && hasInstanceExt(ctx, "VK_EXT_debug_utils", ValidationLayer) {
			layers = append(layers, ValidationLayer)
			exts = append(exts, "VK_EXT_debug_utils")
			in.validation = true
		} else if o.RequireValidation {
			C.vkllm_ctx_free(ctx)
			return nil, fmt.Errorf("vk: validation requested but %s (with VK_EXT_debug_utils) is not installed (apt install vulkan-validationlayers)", ValidationLayer)
		}
	}
	var next unsafe.Pointer
	if in.validation {
		// Synchronization validation makes a missing barrier a test failure.
		next = C.vkllm_validation_features(ctx)
	}
	ln, nl := cNames(layers)
	en, ne := cNames(exts)
	var cinst C.VkInstance
	r := C.vkllm_create_instance(ctx, C.uint32_t(gv.MakeVersion(1, 2, 0)), ln, nl, en, ne, next, &cinst)
	if err := check("vkCreateInstance", gv.Result(r)); err != nil {
		C.vkllm_ctx_free(ctx)
		if gv.Result(r) == gv.ErrorIncompatibleDriver {
			// The loader found no driver at all.
			return nil, fmt.Errorf("%w: no Vulkan driver is installed\n%s", err, DriverHint("/"))
		}
		return nil, err
	}
	in.inst = gv.Instance(unsafe.Pointer(cinst))
	if err := gv.InitInstance(in.inst); err != nil {
		gv.DestroyInstance(in.inst, nil)
		C.vkllm_ctx_free(ctx)
		return nil, fmt.Errorf("vk: loading instance functions: %v", err)
	}
	C.vkllm_ctx_set_instance(ctx, C.VkInstance(unsafe.Pointer(in.inst)))
	if in.validation {
		if r := C.vkllm_ctx_messenger(ctx); r != C.VK_SUCCESS {
			in.close()
			return nil, check("vkCreateDebugUtilsMessengerEXT", gv.Result(r))
		}
	}
	if err := in.enumerate(); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

// hasLayer reports whether the loader offers instance layer name.
func hasLayer(ctx *C.vkllm_ctx, name string) bool {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.vkllm_has_layer(ctx, cs) != 0
}

// hasInstanceExt reports whether the loader or layer offers instance
// extension name.
func hasInstanceExt(ctx *C.vkllm_ctx, name, layer string) bool {
	cs, cl := C.CString(name), C.CString(layer)
	defer C.free(unsafe.Pointer(cs))
	defer C.free(unsafe.Pointer(cl))
	return C.vkllm_has_instance_ext(ctx, cs, cl) != 0
}

// cNames lays names end to end, each NUL-terminated, for the glue's name
// lists; it returns the list (nil when empty) and the count.
func cNames(names []string) (*C.char, C.uint32_t) {
	if len(names) == 0 {
		return nil, 0
	}
	var b []byte
	for _, n := range names {
		b = append(append(b, n...), 0)
	}
	return (*C.char)(unsafe.Pointer(&b[0])), C.uint32_t(len(names))
}

func (in *instance) enumerate() error {
	var n uint32
	if err := check("vkEnumeratePhysicalDevices", gv.EnumeratePhysicalDevices(in.inst, &n, nil)); err != nil {
		return err
	}
	in.phys = make([]gv.PhysicalDevice, n)
	if n > 0 {
		if err := check("vkEnumeratePhysicalDevices", gv.EnumeratePhysicalDevices(in.inst, &n, in.phys)); err != nil {
			return err
		}
	}
	in.phys = in.phys[:n]
	for i, pd := range in.phys {
		var ci C.vkllm_info
		C.vkllm_query(in.ctx, C.VkPhysicalDevice(unsafe.Pointer(pd)), &ci)
		in.infos = append(in.infos, infoFromC(i, &ci))
	}
	return nil
}

func infoFromC(i int, ci *C.vkllm_info) DeviceInfo {
	api := uint32(ci.api_version)
	d := DeviceInfo{
		Index:             i,
		Name:              C.GoString(&ci.name[0]),
		Type:              DeviceType(ci.device_type),
		DriverName:        C.GoString(&ci.driver_name[0]),
		DriverInfo:        C.GoString(&ci.driver_info[0]),
		DriverVersion:     uint32(ci.driver_version),
		APIVersion:        fmt.Sprintf("%d.%d.%d", api>>22&0x7f, api>>12&0x3ff, api&0xfff),
		VendorID:          uint32(ci.vendor_id),
		DeviceID:          uint32(ci.device_id),
		PipelineCacheUUID: *(*[16]byte)(unsafe.Pointer(&ci.pipeline_cache_uuid[0])),
		SubgroupSize:      uint32(ci.subgroup_size),
		ComputeUnits:      uint32(ci.compute_units),
		Features: Features{
			Storage16:           ci.storage16 != 0,
			Float16:             ci.float16 != 0,
			Storage8:            ci.storage8 != 0,
			Int8:                ci.int8 != 0,
			IntegerDot:          ci.int_dot != 0,
			CoopMatrix:          ci.coop_api != 0,
			BufferDeviceAddress: ci.bda != 0,
			PushDescriptor:      ci.push_descriptor != 0,
			MemoryBudget:        ci.memory_budget != 0,
			SubgroupArithmetic:  ci.subgroup_ops&C.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT != 0 && ci.subgroup_stages&C.VK_SHADER_STAGE_COMPUTE_BIT != 0,
			SubgroupShuffle:     ci.subgroup_ops&C.VK_SUBGROUP_FEATURE_SHUFFLE_BIT != 0 && ci.subgroup_stages&C.VK_SHADER_STAGE_COMPUTE_BIT != 0,
		},
		Limits: Limits{
			MaxStorageBufferRange:   uint64(ci.max_storage_buffer_range),
			MaxAllocation:           uint64(ci.max_memory_allocation_size),
			MinStorageOffsetAlign:   uint64(ci.min_storage_offset_align),
			MaxUniformBufferRange:   uint64(ci.max_uniform_buffer_range),
			MinUniformOffsetAlign:   uint64(ci.min_uniform_offset_align),
			MaxTexelElements:        uint64(ci.max_texel_elements),
			MinTexelOffsetAlign:     uint64(ci.min_texel_offset_align),
			MaxWorkgroupInvocations: uint32(ci.max_wg_invocations),
			MaxSharedMemory:         uint32(ci.max_shared_memory),
			MaxPushConstants:        uint32(ci.max_push_constants),
		},
	}
	d.TypeName = d.Type.String()
	switch ci.coop_api {
	case 1:
		d.CoopMatrixExt = "VK_KHR_cooperative_matrix"
	case 2:
		d.CoopMatrixExt = "VK_NV_cooperative_matrix"
	}
	for i := 0; i < int(ci.coop_shape_count) && i < C.VKLLM_MAX_COOP_SHAPES; i++ {
		s := ci.coop_shapes[i]
		d.CoopMatrixShapes = append(d.CoopMatrixShapes, CoopMatrixShape{
			M: uint32(s.m), N: uint32(s.n), K: uint32(s.k),
			A: ComponentType(s.a), B: ComponentType(s.b), C: ComponentType(s.c), Result: ComponentType(s.result),
			Saturating: s.saturating != 0, Scope: Scope(s.scope),
		})
	}
	subgroupSizeFromC(ci, &d)
	for k := 0; k < 3; k++ {
		d.Limits.MaxWorkgroupSize[k] = uint32(ci.max_wg_size[k])
		d.Limits.MaxWorkgroupCount[k] = uint32(ci.max_wg_count[k])
	}
	if d.Limits.MinStorageOffsetAlign == 0 {
		d.Limits.MinStorageOffsetAlign = 1
	}
	if d.Limits.MinUniformOffsetAlign == 0 {
		d.Limits.MinUniformOffsetAlign = 1
	}
	if d.Limits.MinTexelOffsetAlign == 0 {
		d.Limits.MinTexelOffsetAlign = 1
	}
	if d.Limits.MaxAllocation == 0 { // pre-1.1 driver: no maintenance3 limit reported
		d.Limits.MaxAllocation = 1 << 30
	}
	for h := 0; h < int(ci.heap_count) && h < 16; h++ {
		d.Heaps = append(d.Heaps, Heap{
			Size:        uint64(ci.heap_size[h]),
			Budget:      uint64(ci.heap_budget[h]),
			Usage:       uint64(ci.heap_usage[h]),
			DeviceLocal: ci.heap_flags[h]&C.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT != 0,
		})
	}
	return d
}

// drain returns and clears the collected validation messages.
func (in *instance) drain() []string {
	if in.ctx == nil {
		return nil
	}
	buf := make([]byte, 1<<16)
	var written C.int
	n := C.vkllm_ctx_drain(in.ctx, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), &written)
	if n == 0 {
		return nil
	}
	msgs := strings.Split(strings.TrimRight(string(buf[:written]), "\n"), "\n")
	if int(n) > len(msgs) {
		msgs = append(msgs, fmt.Sprintf("(%d more validation messages dropped)", int(n)-len(msgs)))
	}
	return msgs
}

func (in *instance) close() {
	if in.ctx != nil {
		C.vkllm_ctx_free(in.ctx) // destroys the messenger before the instance
		in.ctx = nil
	}
	if in.inst != nil {
		gv.DestroyInstance(in.inst, nil)
		in.inst = nil
	}
}

// Devices lists the physical devices. It creates and destroys a Vulkan
// instance; only o.Validation is used.
func Devices(o Options) ([]DeviceInfo, error) {
	in, err := newInstance(Options{Validation: o.Validation})
	if err != nil {
		return nil, err
	}
	defer in.close()
	return in.infos, nil
}

// Select returns the index of the device that selector names: a decimal
// index, or a case-insensitive substring of exactly one device's name. An
// empty selector picks the best device by type (discrete > integrated >
// virtual > CPU, then by index). A selector that matches nothing or more
// than one device is an error listing the devices.
func Select(devs []DeviceInfo, selector string) (int, error) {
	if len(devs) == 0 {
		return -1, fmt.Errorf("vk: no Vulkan devices found\n%s", DriverHint("/"))
	}
	selector = strings.TrimSpace(selector)
	if selector == "" {
		order := make([]int, len(devs))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return devs[order[a]].Type.rank() < devs[order[b]].Type.rank() })
		return order[0], nil
	}
	if i, err := strconv.Atoi(selector); err == nil {
		if i < 0 || i >= len(devs) {
			return -1, fmt.Errorf("vk: device %d out of range; devices:\n%s", i, listing(devs))
		}
		return i, nil
	}
	want := strings.ToLower(selector)
	found := -1
	for i, d := range devs {
		if strings.Contains(strings.ToLower(d.Name), want) {
			if found >= 0 {
				return -1, fmt.Errorf("vk: device %q matches more than one device; use an index. Devices:\n%s", selector, listing(devs))
			}
			found = i
		}
	}
	if found < 0 {
		return -1, fmt.Errorf("vk: no device matches %q; devices:\n%s", selector, listing(devs))
	}
	return found, nil
}

func listing(devs []DeviceInfo) string {
	var b strings.Builder
	for _, d := range devs {
		fmt.Fprintf(&b, "  %d: %s (%s, %s)\n", d.Index, d.Name, d.Type, d.DriverName)
	}
	return b.String()
}
