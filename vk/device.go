package vk

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// Device is an open logical device with one compute queue. Use it from one
// goroutine at a time. Close it after closing its Buffers and Pipelines.
type Device struct {
	in     *instance
	info   DeviceInfo
	phys   gv.PhysicalDevice
	dev    gv.Device
	queue  gv.Queue
	family uint32

	mem          gv.PhysicalDeviceMemoryProperties
	forceStaging bool
	types        []memType   // the memory types, for memoryCandidates
	heaps        []heapState // budgets and this Device's use of each heap
	localCap     uint64      // Options.DeviceLocalBudget (0: none)
	localUsed    uint64      // bytes placed as device-local memory

	pool   gv.CommandPool
	cmdBuf gv.CommandBuffer
	fence  gv.Fence
	cmd    *Cmd // the one recorder, reused by Begin
	// keptFree holds command buffers for BeginKept; setEpoch changes
	// whenever a kept Recording may have become stale (a descriptor set
	// rewritten from the free list, a buffer or pipeline closed).
	keptFree []gv.CommandBuffer
	setEpoch uint64
	prof     *profiler // timestamps of every dispatch, after Profile

	nextID    uint64
	pipelines map[*Pipeline]struct{}
	cores     map[pipeKey]*pipeCore // compiled pipelines, shared (pipeCore)
	idle      []*pipeCore           // cores no Pipeline uses, longest idle first
	idleCap   int                   // maxIdleCores; tests lower it
	buffers   map[*Buffer]struct{}
	closed    bool
	pcache    pipelineCache
	// firstDispatches counts the compiled pipelines whose first dispatch
	// was recorded (FirstDispatches).
	firstDispatches atomic.Int64
	onFirst         atomic.Pointer[func(name string)]
}

// FirstDispatches returns how many compiled pipelines have had their first
// dispatch recorded on d. Drivers that build a pipeline's machine code at
// its first dispatch (lavapipe runs LLVM then) pay for it in the first
// submit that runs it, so a pass that raised the count may have been
// slowed by compilation: the scheduler leaves such a step out of its
// step-cost model.
func (d *Device) FirstDispatches() int64 { return d.firstDispatches.Load() }

// OnFirstDispatch makes d call f with the pipeline's name at each compiled
// pipeline's first recorded dispatch from now on (nil stops it). A server
// sets it once its warm-up is done, so that a kernel compiled on the
// request path is logged by name.
func (d *Device) OnFirstDispatch(f func(name string)) {
	if f == nil {
		d.onFirst.Store(nil)
		return
	}
	d.onFirst.Store(&f)
}

// Open creates a device chosen by o.Device (or $VKLLM_DEVICE, or the default
// order). Close it when done.
func Open(o Options) (*Device, error) {
	in, err := newInstance(o)
	if err != nil {
		return nil, err
	}
	sel := o.Device
	if sel == "" {
		sel = os.Getenv("VKLLM_DEVICE")
	}
	idx, err := Select(in.infos, sel)
	if err != nil {
		in.close()
		return nil, err
	}
	localCap, err := localBudget(o)
	if err != nil {
		in.close()
		return nil, err
	}
	d := &Device{
		in:           in,
		info:         in.infos[idx],
		phys:         in.phys[idx],
		forceStaging: o.ForceStaging,
		localCap:     localCap,
		pipelines:    map[*Pipeline]struct{}{},
		cores:        map[pipeKey]*pipeCore{},
		idleCap:      maxIdleCores,
		buffers:      map[*Buffer]struct{}{},
	}
	if err := d.create(); err != nil {
		d.destroy()
		in.close()
		return nil, err
	}
	if err := d.openPipelineCache(o.PipelineCacheDir, o.PipelineCacheMaxBytes); err != nil {
		d.destroy()
		in.close()
		return nil, err
	}
	return d, nil
}

func (d *Device) create() error {
	fams := d.queueFamilies()
	d.family = ^uint32(0)
	// Prefer a compute family without graphics (async compute), else any.
	for pass := 0; pass < 2 && d.family == ^uint32(0); pass++ {
		for i, f := range fams {
			if f.flags&gv.QueueFlags(gv.QueueComputeBit) == 0 || f.count == 0 {
				continue
			}
			if pass == 0 && f.flags&gv.QueueFlags(gv.QueueGraphicsBit) != 0 {
				continue
			}
			d.family = uint32(i)
			break
		}
	}
	if d.family == ^uint32(0) {
		return fmt.Errorf("vk: device %d (%s) has no compute queue", d.info.Index, d.info.Name)
	}

	var ci C.vkllm_info
	C.vkllm_query(d.in.ctx, C.VkPhysicalDevice(unsafe.Pointer(d.phys)), &ci)
	var chain unsafe.Pointer
	if strings.HasPrefix(d.info.APIVersion, "1.0.") || strings.HasPrefix(d.info.APIVersion, "1.1.") {
		// The 1.1/1.2 feature structs need a 1.2 device; run without them.
	} else {
		chain = C.vkllm_feature_chain(&ci)
		if chain == nil {
			return fmt.Errorf("vk: out of host memory building the feature chain")
		}
		defer C.vkllm_free_chain(chain)
	}
	var layers []string
	if d.in.validation {
		layers = []string{ValidationLayer}
	}
	var exts []string
	if d.info.Features.MemoryBudget {
		exts = append(exts, "VK_EXT_memory_budget")
	}
	if d.info.Features.IntegerDot && chain != nil {
		// The shaders' OpSDot (SPV_KHR_integer_dot_product) needs the
		// extension on a Vulkan 1.2 instance; the feature is in the chain.
		exts = append(exts, "VK_KHR_shader_integer_dot_product")
	}
	if d.info.CoopMatrixExt != "" {
		if chain == nil {
			// Unreachable: vkllm_query sets coop_api only on 1.2 devices.
			d.info.Features.CoopMatrix, d.info.CoopMatrixExt, d.info.CoopMatrixShapes = false, "", nil
		} else {
			// The feature (and the Vulkan memory model) is in the chain.
			exts = append(exts, d.info.CoopMatrixExt)
		}
	}
	sgExt, sgNode, err := subgroupSizeChain(chain, &ci, d.info.Features)
	if err != nil {
		return err
	}
	if sgNode != nil {
		defer C.free(sgNode)
		exts = append(exts, sgExt)
	}
	ln, nl := cNames(layers)
	en, ne := cNames(exts)
	var cdev C.VkDevice
	r := C.vkllm_create_device(d.in.ctx, C.VkPhysicalDevice(unsafe.Pointer(d.phys)), C.uint32_t(d.family), chain, ln, nl, en, ne, &cdev)
	if err := check("vkCreateDevice", gv.Result(r)); err != nil {
		return err
	}
	d.dev = gv.Device(unsafe.Pointer(cdev))
	var q gv.Queue
	gv.GetDeviceQueue(d.dev, d.family, 0, &q)
	d.queue = q
	mem := new(gv.PhysicalDeviceMemoryProperties)
	gv.GetPhysicalDeviceMemoryProperties(d.phys, mem)
	mem.Deref()
	d.mem = *mem
	for i := range d.mem.MemoryTypes[:d.mem.MemoryTypeCount] {
		d.mem.MemoryTypes[i].Deref()
		t := d.mem.MemoryTypes[i]
		d.types = append(d.types, memType{flags: t.PropertyFlags, heap: t.HeapIndex})
	}
	for i := range d.mem.MemoryHeaps[:d.mem.MemoryHeapCount] {
		d.mem.MemoryHeaps[i].Deref()
		h := d.mem.MemoryHeaps[i]
		budget := uint64(h.Size)
		if i < len(d.info.Heaps) && d.info.Heaps[i].Budget > 0 {
			budget = d.info.Heaps[i].Budget
		}
		d.heaps = append(d.heaps, heapState{budget: budget, deviceLocal: h.Flags&gv.MemoryHeapFlags(gv.MemoryHeapDeviceLocalBit) != 0})
	}

	pci := &gv.CommandPoolCreateInfo{
		SType:            gv.StructureTypeCommandPoolCreateInfo,
		Flags:            gv.CommandPoolCreateFlags(gv.CommandPoolCreateResetCommandBufferBit),
		QueueFamilyIndex: d.family,
	}
	var vpool gv.CommandPool
	if err := check("vkCreateCommandPool", gv.CreateCommandPool(d.dev, pci, nil, &vpool)); err != nil {
		return err
	}
	d.pool = vpool
	cb, err := d.newCommandBuffer()
	if err != nil {
		return err
	}
	d.cmdBuf = cb
	fci := &gv.FenceCreateInfo{SType: gv.StructureTypeFenceCreateInfo}
	var vfence gv.Fence
	if err := check("vkCreateFence", gv.CreateFence(d.dev, fci, nil, &vfence)); err != nil {
		return err
	}
	d.fence = vfence
	d.cmd = newCmd(d)
	return nil
}

// Info describes the device.
func (d *Device) Info() DeviceInfo { return d.info }

// Limits returns the device's limits.
func (d *Device) Limits() Limits { return d.info.Limits }

// Features returns the device's optional features (those enabled at Open).
func (d *Device) Features() Features { return d.info.Features }

// CoopMatrixShapes returns the shapes the device's cooperative matrices
// support (none unless Features().CoopMatrix), a copy in the driver's
// order. Info().CoopMatrixExt names the extension they come from.
func (d *Device) CoopMatrixShapes() []CoopMatrixShape {
	return append([]CoopMatrixShape(nil), d.info.CoopMatrixShapes...)
}

// DisableFeatures turns off every feature set in off, for the users of
// the device that ask Features afterwards (the kernels choose their paths
// from it when they are created): a path found broken on this driver
// (engine.SelfCheck) takes its portable variant instead. The extensions
// stay enabled; nothing already created changes.
func (d *Device) DisableFeatures(off Features) {
	f, o := reflect.ValueOf(&d.info.Features).Elem(), reflect.ValueOf(off)
	for i := range f.NumField() {
		if o.Field(i).Bool() {
			f.Field(i).SetBool(false)
		}
	}
	if off.CoopMatrix {
		d.info.CoopMatrixExt, d.info.CoopMatrixShapes = "", nil
	}
}

// Validating reports whether the validation layer is active.
func (d *Device) Validating() bool { return d.in.validation }

// MaxBinding is the largest byte size one storage-buffer binding may cover,
// rounded down to a multiple of 256 (so windows of this size keep any
// element type and offset alignment).
func (d *Device) MaxBinding() uint64 {
	m := d.info.Limits.MaxStorageBufferRange
	if m > 1<<32-1 {
		m = 1<<32 - 1
	}
	return m &^ 255
}

// ValidationMessages returns and clears the validation layer's warnings and
// errors collected since the last call. Tests fail on any.
func (d *Device) ValidationMessages() []string { return d.in.drain() }

// Close waits for the device to go idle, destroys every Pipeline and Buffer
// still open, the device and the instance. It does not save the pipeline
// cache: call SavePipelineCache first for that. With validation on it returns an
// error listing the validation messages not yet drained (including leaks
// reported at destruction). The Device must not be used afterwards.
func (d *Device) Close() error {
	if d.closed {
		return nil
	}
	var errs []error
	if d.dev != nil {
		if err := check("vkDeviceWaitIdle", gv.DeviceWaitIdle(d.dev)); err != nil {
			errs = append(errs, err)
		}
	}
	d.destroy()
	if msgs := d.in.drain(); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("vk: validation: %s", strings.Join(msgs, "\n")))
	}
	d.in.close()
	d.closed = true
	return errors.Join(errs...)
}

// queueFamily is what Device uses of a VkQueueFamilyProperties.
type queueFamily struct {
	flags         gv.QueueFlags
	count         uint32
	timestampBits uint32 // timestampValidBits
}

// queueFamilies returns the physical device's queue families.
func (d *Device) queueFamilies() []queueFamily {
	const max = 64
	var flags, counts, ts [max]C.uint32_t
	n := int(C.vkllm_queue_families(d.in.ctx, C.VkPhysicalDevice(unsafe.Pointer(d.phys)), max, &flags[0], &counts[0], &ts[0]))
	fams := make([]queueFamily, min(n, max))
	for i := range fams {
		fams[i] = queueFamily{gv.QueueFlags(flags[i]), uint32(counts[i]), uint32(ts[i])}
	}
	return fams
}

// newCommandBuffer allocates a primary command buffer from d's pool (freed
// with it).
func (d *Device) newCommandBuffer() (gv.CommandBuffer, error) {
	bufs := make([]gv.CommandBuffer, 1)
	aci := &gv.CommandBufferAllocateInfo{
		SType:              gv.StructureTypeCommandBufferAllocateInfo,
		CommandPool:        d.pool,
		Level:              gv.CommandBufferLevelPrimary,
		CommandBufferCount: 1,
	}
	if err := check("vkAllocateCommandBuffers", gv.AllocateCommandBuffers(d.dev, aci, bufs)); err != nil {
		return nil, err
	}
	return bufs[0], nil
}

func (d *Device) destroy() {
	if d.prof != nil {
		d.prof.close(d.dev)
		d.prof = nil
	}
	for p := range d.pipelines {
		p.Close()
	}
	for _, c := range d.idle {
		c.destroy(d)
	}
	d.idle, d.cores = nil, map[pipeKey]*pipeCore{}
	for b := range d.buffers {
		b.Close()
	}
	if d.cmd != nil {
		d.cmd.free()
	}
	d.closePipelineCache()
	if d.fence != nil {
		gv.DestroyFence(d.dev, d.fence, nil)
		d.fence = nil
	}
	if d.pool != nil {
		gv.DestroyCommandPool(d.dev, d.pool, nil) // frees cmdBuf
		d.pool = nil
	}
	if d.dev != nil {
		gv.DestroyDevice(d.dev, nil)
		d.dev = nil
	}
}
