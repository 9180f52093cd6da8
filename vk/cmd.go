package vk

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// maxPush is the size of the recorder's push-constant scratch.
const maxPush = 256

// Cmd records one graph of dispatches and copies into the Device's command
// buffer; Submit runs it with one queue submit and one fence wait. Between
// consecutive commands Cmd inserts a compute/transfer -> compute/transfer
// memory barrier, so each command sees the writes of the ones before it
// (call NoBarrier before a command that is known to be independent of the
// previous one to skip it). After an error every later call is a no-op and
// Submit returns the first error (like bufio.Writer).
//
// A Device has one Cmd: Begin returns it, Submit or Abort ends it. Host
// reads of buffers written by the graph are valid after Submit returns.
type Cmd struct {
	d         *Device
	cb        gv.CommandBuffer
	recording bool
	any       bool // a command was recorded since Begin
	skipNext  bool
	err       error
	push      unsafe.Pointer // C memory for push constants (no Go pointer to cgo)
	regions   unsafe.Pointer // C memory for maxRegions VkBufferCopy (CopyRegions)
	groups    int            // dispatches recorded, for tests and stats
	label     string         // see Label
	kept      bool           // recording a graph to keep (BeginKept)
	epoch     uint64         // bumped by every barrier and Begin (see Epoch)
}

func newCmd(d *Device) *Cmd {
	return &Cmd{d: d, cb: d.cmdBuf, push: C.malloc(maxPush), regions: C.malloc(C.size_t(maxRegions * C.sizeof_VkBufferCopy))}
}

func (c *Cmd) free() {
	if c.push != nil {
		C.free(c.push)
		c.push = nil
	}
	if c.regions != nil {
		C.free(c.regions)
		c.regions = nil
	}
}

// Begin starts recording the Device's command buffer. It is an error to
// Begin again before Submit, Keep or Abort.
func (d *Device) Begin() (*Cmd, error) { return d.begin(d.cmdBuf, false) }

// BeginKept starts recording a graph to keep (Keep) and submit as many
// times as it stays valid (Recording.Submit), instead of recording the same
// commands again: a decode step of one batch shape whose inputs come from
// buffers. Not while profiling (Device.Profile times one-time graphs only).
func (d *Device) BeginKept() (*Cmd, error) {
	if d.prof != nil {
		return nil, fmt.Errorf("vk: BeginKept: the device is profiling; record one-time graphs (Begin)")
	}
	if d.cmd.recording {
		return nil, fmt.Errorf("vk: BeginKept: a graph is already being recorded")
	}
	var cb gv.CommandBuffer
	if n := len(d.keptFree); n > 0 {
		cb, d.keptFree = d.keptFree[n-1], d.keptFree[:n-1]
	} else {
		var err error
		if cb, err = d.newCommandBuffer(); err != nil {
			return nil, err
		}
	}
	c, err := d.begin(cb, true)
	if err != nil {
		d.keptFree = append(d.keptFree, cb)
	}
	return c, err
}

func (d *Device) begin(cb gv.CommandBuffer, kept bool) (*Cmd, error) {
	c := d.cmd
	if c.recording {
		return nil, fmt.Errorf("vk: Begin: a graph is already being recorded")
	}
	for p := range d.pipelines {
		p.recycle()
	}
	if err := check("vkResetCommandBuffer", gv.ResetCommandBuffer(cb, 0)); err != nil {
		return nil, err
	}
	ccb := C.VkCommandBuffer(unsafe.Pointer(cb))
	var r C.VkResult
	if kept {
		r = C.vkllm_begin_reusable(d.in.ctx, ccb)
	} else {
		r = C.vkllm_begin(d.in.ctx, ccb)
	}
	if err := check("vkBeginCommandBuffer", gv.Result(r)); err != nil {
		return nil, err
	}
	c.cb, c.kept = cb, kept
	c.recording, c.any, c.skipNext, c.err, c.groups, c.label = true, false, false, nil, 0, ""
	c.epoch++
	if d.prof != nil {
		d.prof.begin(c.cb)
	}
	return c, nil
}

// Label names what the commands recorded after it work on (a weight: "attn_q",
// "output"), until the next Label; "" clears it. A profile (Device.Profile)
// sums the times of labelled commands per pipeline and label. Labels cost
// nothing when the device is not profiling.
func (c *Cmd) Label(label string) { c.label = label }

// Profiling reports whether the device times each command (Device.Profile).
func (c *Cmd) Profiling() bool { return c.d.prof != nil }

// Err returns the first error recorded so far.
func (c *Cmd) Err() error { return c.err }

// Dispatches returns the number of dispatches recorded since Begin.
func (c *Cmd) Dispatches() int { return c.groups }

func (c *Cmd) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	return c.err
}

const (
	stageRW  = C.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | C.VK_PIPELINE_STAGE_TRANSFER_BIT
	accessW  = C.VK_ACCESS_SHADER_WRITE_BIT | C.VK_ACCESS_TRANSFER_WRITE_BIT
	accessRW = C.VK_ACCESS_SHADER_READ_BIT | C.VK_ACCESS_SHADER_WRITE_BIT | C.VK_ACCESS_TRANSFER_READ_BIT | C.VK_ACCESS_TRANSFER_WRITE_BIT
)

// before inserts the barrier between the previous command and the next.
func (c *Cmd) before() {
	if c.any && !c.skipNext {
		c.Barrier()
	}
	c.any, c.skipNext = true, false
}

// Barrier records a full compute/transfer memory barrier now.
func (c *Cmd) Barrier() {
	if c.err != nil || !c.recording {
		return
	}
	C.vkllm_barrier(c.d.in.ctx, C.VkCommandBuffer(unsafe.Pointer(c.cb)), stageRW, stageRW, accessW, accessRW)
	c.epoch++
}

// Epoch identifies the span of commands between two barriers: it changes
// at every barrier and every Begin, never returning to an earlier value, so
// commands recorded under one Epoch may run concurrently. A kernel that
// keeps scratch between calls uses it to tell whether a later command may
// still overlap an earlier one.
func (c *Cmd) Epoch() uint64 { return c.epoch }

// SkipsBarrier reports whether NoBarrier was called since the last command:
// the next command then joins the current Epoch.
func (c *Cmd) SkipsBarrier() bool { return c.skipNext }

// NoBarrier skips the automatic barrier before the next command: use it for
// a command that neither reads nor writes what the previous one wrote (for
// example the second of two kernels writing disjoint outputs from the same
// inputs).
func (c *Cmd) NoBarrier() { c.skipNext = true }

// Dispatch records p over groups workgroups with push-constant bytes push
// (len must equal the pipeline's PushSize; see Bytes) and one Range per
// binding. Each Range must be non-empty, at most Limits.MaxStorageBufferRange
// bytes and start at a multiple of Limits.MinStorageOffsetAlign.
func (c *Cmd) Dispatch(p *Pipeline, groups [3]uint32, push []byte, bindings ...Range) error {
	if c.err != nil {
		return c.err
	}
	if !c.recording {
		return c.fail(fmt.Errorf("vk: Dispatch(%s): not recording (call Begin)", p.name))
	}
	if p.pipe == nil {
		return c.fail(fmt.Errorf("vk: Dispatch(%s): pipeline closed", p.name))
	}
	if len(bindings) != p.bindings {
		return c.fail(fmt.Errorf("vk: Dispatch(%s): %d bindings, want %d", p.name, len(bindings), p.bindings))
	}
	if uint32(len(push)) != p.pushSize {
		return c.fail(fmt.Errorf("vk: Dispatch(%s): %d push-constant bytes, want %d", p.name, len(push), p.pushSize))
	}
	lim := &c.d.info.Limits
	for i, g := range groups {
		if g == 0 || g > lim.MaxWorkgroupCount[i] {
			return c.fail(fmt.Errorf("vk: Dispatch(%s): workgroup count %v, want 1..%v per dimension", p.name, groups, lim.MaxWorkgroupCount))
		}
	}
	for i, r := range bindings {
		if err := r.check(p.name); err != nil {
			return c.fail(fmt.Errorf("%w (binding %d)", err, i))
		}
		if p.uniform>>i&1 != 0 {
			if r.Size == 0 || r.Size > lim.MaxUniformBufferRange {
				return c.fail(fmt.Errorf("vk: Dispatch(%s): uniform binding %d is %d bytes, want 1..%d (maxUniformBufferRange)", p.name, i, r.Size, lim.MaxUniformBufferRange))
			}
			if r.Offset%lim.MinUniformOffsetAlign != 0 {
				return c.fail(fmt.Errorf("vk: Dispatch(%s): uniform binding %d offset %d not a multiple of minUniformBufferOffsetAlignment %d", p.name, i, r.Offset, lim.MinUniformOffsetAlign))
			}
			continue
		}
		if p.texel>>i&1 != 0 {
			if r.Size == 0 || r.Size%4 != 0 || r.Size/4 > lim.MaxTexelElements {
				return c.fail(fmt.Errorf("vk: Dispatch(%s): texel binding %d is %d bytes, want a multiple of 4 up to %d words (maxTexelBufferElements)", p.name, i, r.Size, lim.MaxTexelElements))
			}
			if r.Offset%lim.MinTexelOffsetAlign != 0 {
				return c.fail(fmt.Errorf("vk: Dispatch(%s): texel binding %d offset %d not a multiple of minTexelBufferOffsetAlignment %d", p.name, i, r.Offset, lim.MinTexelOffsetAlign))
			}
			continue
		}
		if r.Size == 0 || r.Size > lim.MaxStorageBufferRange {
			return c.fail(fmt.Errorf("vk: Dispatch(%s): binding %d is %d bytes, want 1..%d (maxStorageBufferRange; split it with Range.Windows)", p.name, i, r.Size, lim.MaxStorageBufferRange))
		}
		if r.Offset%lim.MinStorageOffsetAlign != 0 {
			return c.fail(fmt.Errorf("vk: Dispatch(%s): binding %d offset %d not a multiple of minStorageBufferOffsetAlignment %d", p.name, i, r.Offset, lim.MinStorageOffsetAlign))
		}
	}
	set, err := p.set(bindings)
	if err != nil {
		return c.fail(fmt.Errorf("vk: Dispatch(%s): %w", p.name, err))
	}
	if !p.core.used.Load() && p.core.used.CompareAndSwap(false, true) {
		c.d.firstDispatches.Add(1)
		if f := c.d.onFirst.Load(); f != nil {
			(*f)(p.name)
		}
	}
	c.before()
	gv.CmdBindPipeline(c.cb, gv.PipelineBindPointCompute, p.pipe)
	p.sets[0] = set
	if p.bindings > 0 {
		gv.CmdBindDescriptorSets(c.cb, gv.PipelineBindPointCompute, p.layout, 0, 1, p.sets, 0, nil)
	}
	if len(push) > 0 {
		copy(unsafe.Slice((*byte)(c.push), maxPush), push)
		gv.CmdPushConstants(c.cb, p.layout, gv.ShaderStageFlags(gv.ShaderStageComputeBit), 0, uint32(len(push)), c.push)
	}
	gv.CmdDispatch(c.cb, groups[0], groups[1], groups[2])
	c.groups++
	if c.d.prof != nil {
		c.d.prof.after(c.cb, p.name, c.label)
	}
	return nil
}

// Copy records a copy of min(dst.Size, src.Size) bytes from src to dst.
// Offsets and size must be multiples of 4 for Fill; Copy has no alignment
// rule.
func (c *Cmd) Copy(dst, src Range) {
	if c.err != nil {
		return
	}
	if err := dst.check("Copy dst"); err != nil {
		c.fail(err)
		return
	}
	if err := src.check("Copy src"); err != nil {
		c.fail(err)
		return
	}
	one := [1]CopyRegion{{SrcOffset: src.Offset, DstOffset: dst.Offset, Size: min(dst.Size, src.Size)}}
	c.CopyRegions(dst.Buf, src.Buf, one[:])
}

// CopyRegion is one region of CopyRegions: Size bytes from SrcOffset of
// the source buffer to DstOffset of the destination.
type CopyRegion struct {
	SrcOffset, DstOffset, Size uint64
}

// maxRegions is how many regions one recorded vkCmdCopyBuffer takes;
// CopyRegions records more as several.
const maxRegions = 128

// CopyRegions records one copy command (vkCmdCopyBuffer) of every region
// from src to dst; empty regions are skipped, and the regions' destinations
// must not overlap each other. Copies have no alignment rule. It allocates
// nothing: the hot path (per-step inputs and read-back) uses it.
func (c *Cmd) CopyRegions(dst, src *Buffer, regions []CopyRegion) {
	if c.err != nil {
		return
	}
	if !c.recording {
		c.fail(fmt.Errorf("vk: CopyRegions: not recording (call Begin)"))
		return
	}
	if c.kept {
		dst.used, src.used = true, true
	}
	for i, r := range regions {
		if err := src.Range(r.SrcOffset, r.Size).check("CopyRegions src"); err != nil {
			c.fail(fmt.Errorf("%w (region %d)", err, i))
			return
		}
		if err := dst.Range(r.DstOffset, r.Size).check("CopyRegions dst"); err != nil {
			c.fail(fmt.Errorf("%w (region %d)", err, i))
			return
		}
	}
	scratch := unsafe.Slice((*C.VkBufferCopy)(c.regions), maxRegions)
	n, recorded := 0, false
	flush := func() {
		if n == 0 {
			return
		}
		c.before()
		C.vkllm_copy(c.d.in.ctx, C.VkCommandBuffer(unsafe.Pointer(c.cb)), C.VkBuffer(unsafe.Pointer(src.buf)), C.VkBuffer(unsafe.Pointer(dst.buf)), C.uint32_t(n), &scratch[0])
		if c.d.prof != nil {
			c.d.prof.after(c.cb, "copy", c.label)
		}
		c.NoBarrier() // the next batch of regions of this same copy
		n, recorded = 0, true
	}
	for _, r := range regions {
		if r.Size == 0 {
			continue
		}
		scratch[n] = C.VkBufferCopy{srcOffset: C.VkDeviceSize(r.SrcOffset), dstOffset: C.VkDeviceSize(r.DstOffset), size: C.VkDeviceSize(r.Size)}
		if n++; n == maxRegions {
			flush()
		}
	}
	flush()
	if recorded {
		c.skipNext = false
	}
}

// Fill records filling dst with the 32-bit pattern v (offset and size must
// be multiples of 4). Useful to poison outputs in tests.
func (c *Cmd) Fill(dst Range, v uint32) {
	if c.err != nil {
		return
	}
	if err := dst.check("Fill"); err != nil {
		c.fail(err)
		return
	}
	if dst.Offset%4 != 0 || dst.Size%4 != 0 {
		c.fail(fmt.Errorf("vk: Fill: offset %d and size %d must be multiples of 4", dst.Offset, dst.Size))
		return
	}
	if c.kept {
		dst.Buf.used = true
	}
	c.before()
	gv.CmdFillBuffer(c.cb, dst.Buf.buf, gv.DeviceSize(dst.Offset), gv.DeviceSize(dst.Size), v)
	if c.d.prof != nil {
		c.d.prof.after(c.cb, "fill", c.label)
	}
}

// Abort ends recording without submitting.
func (c *Cmd) Abort() {
	if c.recording {
		gv.EndCommandBuffer(c.cb)
		c.recording = false
		c.release()
	}
}

// release gives a kept graph's command buffer back after an error or an
// Abort, and points the recorder at the one-time buffer again.
func (c *Cmd) release() {
	if c.kept {
		c.d.keptFree = append(c.d.keptFree, c.cb)
	}
	c.cb, c.kept = c.d.cmdBuf, false
}

// end ends recording: the first recording error, or the final barrier that
// makes the graph's writes visible to the host and vkEndCommandBuffer.
func (c *Cmd) end(op string) error {
	if !c.recording {
		return fmt.Errorf("vk: %s: not recording", op)
	}
	if c.err != nil {
		c.Abort()
		return c.err
	}
	if c.any {
		C.vkllm_barrier(c.d.in.ctx, C.VkCommandBuffer(unsafe.Pointer(c.cb)), stageRW, C.VK_PIPELINE_STAGE_HOST_BIT, accessW, C.VK_ACCESS_HOST_READ_BIT)
	}
	c.recording = false
	if err := check("vkEndCommandBuffer", gv.EndCommandBuffer(c.cb)); err != nil {
		c.release()
		return err
	}
	return nil
}

// Submit ends recording, submits the graph, waits for it to finish and makes
// its writes visible to the host. It returns the first recording error (the
// graph is then not submitted) or the failing Vulkan call's error (errors.Is
// ErrDeviceLost / ErrOutOfMemory). A graph begun with BeginKept is submitted
// once and not kept.
func (c *Cmd) Submit() error {
	if err := c.end("Submit"); err != nil {
		return err
	}
	cb := c.cb
	defer c.release()
	if err := c.d.run(cb); err != nil {
		return err
	}
	if c.d.prof != nil {
		return c.d.prof.collect(c.d.dev)
	}
	return nil
}

// run submits cb, waits for it and resets the fence.
func (d *Device) run(cb gv.CommandBuffer) error {
	in := d.in
	r := C.vkllm_submit(in.ctx, C.VkQueue(unsafe.Pointer(d.queue)), C.VkCommandBuffer(unsafe.Pointer(cb)), C.VkFence(unsafe.Pointer(d.fence)))
	if err := check("vkQueueSubmit", gv.Result(r)); err != nil {
		return err
	}
	dev, fence := C.VkDevice(unsafe.Pointer(d.dev)), C.VkFence(unsafe.Pointer(d.fence))
	if err := check("vkWaitForFences", gv.Result(C.vkllm_wait(in.ctx, dev, fence))); err != nil {
		return err
	}
	return check("vkResetFences", gv.Result(C.vkllm_reset(in.ctx, dev, fence)))
}

// Bytes returns the memory of *v as a byte slice, for push constants: v
// must point to a struct of 4-byte fields that mirrors the shader's
// push-constant block.
func Bytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}
