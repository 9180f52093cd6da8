package vk

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// MaxBindings is the most buffer bindings one pipeline may declare.
const MaxBindings = 12

// setsPerPool is how many descriptor sets each descriptor pool holds.
const setsPerPool = 128

// maxCachedSets bounds a pipeline's descriptor-set cache: past it, Begin
// recycles all of the pipeline's sets (nothing is in flight then).
const maxCachedSets = 1024

// PipelineDesc describes a compute pipeline.
type PipelineDesc struct {
	// Name names the pipeline in errors (the shader variant's name).
	Name string
	// SPIRV is the compiled compute shader (entry point "main").
	SPIRV []byte
	// Bindings is the number of buffers, set 0, bindings 0..n-1: storage
	// buffers, except those whose bit is set in Uniform.
	Bindings int
	// Uniform marks bindings (bit i for binding i) that are uniform buffers:
	// read-only, at most Limits.MaxUniformBufferRange bytes, bound at
	// multiples of Limits.MinUniformOffsetAlign. A CPU driver (lavapipe)
	// loads a uniform buffer at an address every invocation shares once for
	// all of them, even inside loops, where a storage buffer load is one
	// load per invocation.
	Uniform uint32
	// Texel marks bindings that are uniform texel buffers of 32-bit words
	// (R32_UINT views, usamplerBuffer in the shader): read-only, at most
	// Limits.MaxTexelElements words, bound at multiples of
	// Limits.MinTexelOffsetAlign, a multiple of 4 bytes long. A CPU driver
	// (lavapipe) fetches texels of different addresses in all lanes with one
	// vector gather, where a storage-buffer load is a loop over the lanes.
	Texel uint32
	// PushSize is the size in bytes of the push-constant block (0 if none);
	// a multiple of 4, at most Limits.MaxPushConstants.
	PushSize uint32
	// Spec are the uint32 specialization constants with ids 0..len-1
	// (constant_id 0 is the workgroup size by convention; floats and ints
	// go in by their bit patterns).
	Spec []uint32
	// SubgroupSize, if not 0, is the subgroup size the pipeline requires
	// (VkPipelineShaderStageRequiredSubgroupSizeCreateInfo): a power of two
	// within [DeviceInfo.MinSubgroupSize, MaxSubgroupSize] on a device with
	// Features.SubgroupSizeControl; NewPipeline fails otherwise.
	SubgroupSize uint32
	// FullSubgroups requires every subgroup to be full
	// (REQUIRE_FULL_SUBGROUPS): Features.FullSubgroups and a workgroup size
	// Spec[0] that is a multiple of the subgroup size.
	FullSubgroups bool
}

// Pipeline is a compute pipeline with its layout and a cache of descriptor
// sets keyed by the exact ranges bound, so recording a dispatch over buffers
// seen before allocates nothing. Close it before its Device (or let
// Device.Close do it); it must not be used afterwards.
type Pipeline struct {
	d         *Device
	name      string
	bindings  int
	uniform   uint32
	texel     uint32
	pushSize  uint32
	core      *pipeCore // shared with the pipelines of an equal description
	setLayout gv.DescriptorSetLayout
	layout    gv.PipelineLayout
	pipe      gv.Pipeline

	cache    map[setKey]gv.DescriptorSet
	free     []gv.DescriptorSet
	pools    []gv.DescriptorPool
	poolLeft int
	sets     []gv.DescriptorSet // scratch of length 1 for binding
}

// pipeCore is what NewPipeline compiles: the shader module, layouts and
// pipeline. Pipelines of equal descriptions share one (a driver compiling
// SPIR-V to machine code, lavapipe's LLVM, spends most of a model's load
// there, and every model on a device asks for the same kernels); each
// Pipeline keeps its own descriptor sets. The last Close retires it
// (Device.retire).
type pipeCore struct {
	key       pipeKey
	refs      int
	module    gv.ShaderModule
	setLayout gv.DescriptorSetLayout
	layout    gv.PipelineLayout
	pipe      gv.Pipeline
	// used is set at the first recorded dispatch (Device.FirstDispatches).
	used atomic.Bool
}

// maxIdleCores is how many compiled pipelines that no Pipeline uses a
// device keeps for the next NewPipeline of their description (a model
// loaded again, or another one of the same shapes, as tests do all the
// time): lavapipe spends seconds compiling a model's kernels even when
// Mesa's disk cache has them. Past it the longest idle one is destroyed.
const maxIdleCores = 512

// retire keeps a core no Pipeline uses among the idle ones, destroying the
// longest idle past the device's bound.
func (d *Device) retire(c *pipeCore) {
	d.idle = append(d.idle, c)
	if len(d.idle) > d.idleCap {
		old := d.idle[0]
		d.idle = slices.Delete(d.idle, 0, 1)
		old.destroy(d)
		delete(d.cores, old.key)
	}
}

// revive takes c, about to be used again, off the idle list.
func (d *Device) revive(c *pipeCore) {
	if c.refs == 0 {
		if i := slices.Index(d.idle, c); i >= 0 {
			d.idle = slices.Delete(d.idle, i, i+1)
		}
	}
}

// pipeKey is everything a compiled pipeline depends on.
type pipeKey struct {
	name                 string
	code                 [sha256.Size]byte
	bindings             int
	uniform, texel, push uint32
	nSpec                int
	spec                 [C.VKLLM_MAX_SPEC]uint32
	subgroupSize         uint32
	fullSubgroups        bool
}

// destroy destroys the core's Vulkan objects.
func (c *pipeCore) destroy(d *Device) {
	if c.pipe != nil {
		gv.DestroyPipeline(d.dev, c.pipe, nil)
	}
	if c.layout != nil {
		gv.DestroyPipelineLayout(d.dev, c.layout, nil)
	}
	if c.setLayout != nil {
		gv.DestroyDescriptorSetLayout(d.dev, c.setLayout, nil)
	}
	if c.module != nil {
		gv.DestroyShaderModule(d.dev, c.module, nil)
	}
}

type bindKey struct{ id, off, size uint64 }

type setKey [MaxBindings]bindKey

// NewPipeline creates a compute pipeline.
func (d *Device) NewPipeline(desc PipelineDesc) (*Pipeline, error) {
	if err := d.validate(desc); err != nil {
		return nil, err
	}
	key := keyOf(desc)
	core := d.cores[key]
	if core != nil {
		d.revive(core)
	} else {
		var err error
		if core, err = d.compile(desc); err != nil {
			return nil, err
		}
		core.key = key
		d.cores[key] = core
	}
	core.refs++
	p := &Pipeline{d: d, name: desc.Name, bindings: desc.Bindings, uniform: desc.Uniform, texel: desc.Texel, pushSize: desc.PushSize,
		core: core, setLayout: core.setLayout, layout: core.layout, pipe: core.pipe,
		cache: map[setKey]gv.DescriptorSet{}, sets: make([]gv.DescriptorSet, 1)}
	d.pipelines[p] = struct{}{}
	return p, nil
}

// Precompile compiles the pipelines of descs that the device does not hold
// yet, on up to GOMAXPROCS threads at once (a driver compiles each on the
// calling thread), and keeps them for the NewPipeline calls of their
// descriptions, which then compile nothing. A model's load asks for a few
// hundred kernels; one at a time they take seconds on lavapipe. A
// description that fails validation stops it before anything is compiled;
// where compiling fails, the pipelines compiled are kept and the errors
// are returned joined.
func (d *Device) Precompile(descs []PipelineDesc) error {
	var todo []PipelineDesc
	var keys []pipeKey
	seen := map[pipeKey]bool{}
	for _, desc := range descs {
		if err := d.validate(desc); err != nil {
			return err
		}
		key := keyOf(desc)
		if d.cores[key] == nil && !seen[key] {
			seen[key] = true
			todo, keys = append(todo, desc), append(keys, key)
		}
	}
	cores := make([]*pipeCore, len(todo))
	errs := make([]error, len(todo))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(todo); i = int(next.Add(1) - 1) {
				cores[i], errs[i] = d.compile(todo[i])
			}
		}()
	}
	wg.Wait()
	for i, c := range cores {
		if c != nil {
			c.key = keys[i]
			d.cores[c.key] = c
			d.idle = append(d.idle, c)
		}
	}
	return errors.Join(errs...)
}

// validate checks a description before anything is created from it.
func (d *Device) validate(desc PipelineDesc) error {
	where := "NewPipeline(" + desc.Name + ")"
	if desc.Bindings < 0 || desc.Bindings > MaxBindings {
		return fmt.Errorf("vk: %s: %d bindings, want 0..%d", where, desc.Bindings, MaxBindings)
	}
	if desc.PushSize%4 != 0 || desc.PushSize > d.info.Limits.MaxPushConstants {
		return fmt.Errorf("vk: %s: push-constant size %d, want a multiple of 4 up to %d", where, desc.PushSize, d.info.Limits.MaxPushConstants)
	}
	if len(desc.SPIRV) < 20 || len(desc.SPIRV)%4 != 0 || binary.LittleEndian.Uint32(desc.SPIRV) != 0x07230203 {
		return fmt.Errorf("vk: %s: not SPIR-V (%d bytes)", where, len(desc.SPIRV))
	}
	if desc.Uniform>>desc.Bindings != 0 {
		return fmt.Errorf("vk: %s: uniform mask %#x names bindings past %d", where, desc.Uniform, desc.Bindings)
	}
	if desc.Texel>>desc.Bindings != 0 || desc.Texel&desc.Uniform != 0 {
		return fmt.Errorf("vk: %s: texel mask %#x names bindings past %d or uniform ones", where, desc.Texel, desc.Bindings)
	}
	if err := d.checkSubgroupSize(desc); err != nil {
		return err
	}
	if len(desc.Spec) > C.VKLLM_MAX_SPEC {
		return fmt.Errorf("vk: %s: %d specialization constants, want at most %d", where, len(desc.Spec), C.VKLLM_MAX_SPEC)
	}
	return nil
}

// keyOf returns the key of a validated description.
func keyOf(desc PipelineDesc) pipeKey {
	key := pipeKey{name: desc.Name, code: sha256.Sum256(desc.SPIRV), bindings: desc.Bindings, uniform: desc.Uniform, texel: desc.Texel,
		push: desc.PushSize, nSpec: len(desc.Spec), subgroupSize: desc.SubgroupSize, fullSubgroups: desc.FullSubgroups}
	copy(key.spec[:], desc.Spec)
	return key
}

// compile creates the shader module, layouts and pipeline of desc.
func (d *Device) compile(desc PipelineDesc) (*pipeCore, error) {
	code := make([]uint32, len(desc.SPIRV)/4)
	for i := range code {
		code[i] = binary.LittleEndian.Uint32(desc.SPIRV[4*i:])
	}
	spec := make([]uint32, max(len(desc.Spec), 1)) // never empty, so &spec[0] is valid
	copy(spec, desc.Spec)
	var out C.vkllm_pipeline
	r := C.vkllm_create_pipeline(d.in.ctx, C.VkDevice(unsafe.Pointer(d.dev)),
		(*C.uint32_t)(unsafe.Pointer(&code[0])), C.size_t(len(desc.SPIRV)),
		C.uint32_t(desc.Bindings), C.uint32_t(desc.Uniform), C.uint32_t(desc.Texel), C.uint32_t(desc.PushSize),
		(*C.uint32_t)(unsafe.Pointer(&spec[0])), C.uint32_t(len(desc.Spec)),
		C.uint32_t(desc.SubgroupSize), C.uint32_t(b2u(desc.FullSubgroups)), d.pcache.cache, &out)
	runtime.KeepAlive(code)
	runtime.KeepAlive(spec)
	c := &pipeCore{}
	if out.step > 0 {
		c.module = gv.ShaderModule(unsafe.Pointer(out.module))
	}
	if out.step > 1 {
		c.setLayout = gv.DescriptorSetLayout(unsafe.Pointer(out.set_layout))
	}
	if out.step > 2 {
		c.layout = gv.PipelineLayout(unsafe.Pointer(out.layout))
	}
	steps := [...]string{"vkCreateShaderModule", "vkCreateDescriptorSetLayout", "vkCreatePipelineLayout", "vkCreateComputePipelines"}
	if err := check(steps[min(int(out.step), 3)]+"("+desc.Name+")", gv.Result(r)); err != nil {
		c.destroy(d)
		return nil, err
	}
	c.pipe = gv.Pipeline(unsafe.Pointer(out.pipeline))
	return c, nil
}

// CompiledPipelines reports how many compiled pipelines the device holds,
// and how many of them no Pipeline uses (kept for a NewPipeline of their
// description): pipelines of equal descriptions count once (pipeCore).
func (d *Device) CompiledPipelines() (all, idle int) { return len(d.cores), len(d.idle) }

// Name returns the pipeline's name.
func (p *Pipeline) Name() string { return p.name }

// set returns a descriptor set for exactly these ranges, from the cache or
// newly written.
func (p *Pipeline) set(rs []Range) (gv.DescriptorSet, error) {
	var key setKey
	for i, r := range rs {
		key[i] = bindKey{r.Buf.id, r.Offset, r.Size}
		r.Buf.used = true
	}
	if s, ok := p.cache[key]; ok {
		return s, nil
	}
	var s gv.DescriptorSet
	if n := len(p.free); n > 0 {
		s = p.free[n-1]
		p.free = p.free[:n-1]
		p.d.setEpoch++ // a kept graph may bind s as it was
	} else {
		var err error
		if s, err = p.allocSet(); err != nil {
			return nil, err
		}
	}
	var writes [MaxBindings]C.vkllm_binding
	for i, r := range rs {
		w := &writes[i]
		w._type = C.uint32_t(p.descType(i))
		if p.texel>>i&1 != 0 {
			v, err := r.Buf.view(r.Offset, r.Size)
			if err != nil {
				p.free = append(p.free, s)
				return nil, err
			}
			w.view = C.VkBufferView(unsafe.Pointer(v))
		} else {
			w.buffer = C.VkBuffer(unsafe.Pointer(r.Buf.buf))
			w.offset, w._range = C.uint64_t(r.Offset), C.uint64_t(r.Size)
		}
	}
	if len(rs) > 0 {
		C.vkllm_write_set(p.d.in.ctx, C.VkDevice(unsafe.Pointer(p.d.dev)), C.VkDescriptorSet(unsafe.Pointer(s)), C.uint32_t(len(rs)), &writes[0])
	}
	p.cache[key] = s
	return s, nil
}

// descType is binding i's descriptor type.
func (p *Pipeline) descType(i int) gv.DescriptorType {
	if p.uniform>>i&1 != 0 {
		return gv.DescriptorTypeUniformBuffer
	}
	if p.texel>>i&1 != 0 {
		return gv.DescriptorTypeUniformTexelBuffer
	}
	return gv.DescriptorTypeStorageBuffer
}

func (p *Pipeline) allocSet() (gv.DescriptorSet, error) {
	if p.poolLeft == 0 {
		nu, nt := uint32(bits.OnesCount32(p.uniform)), uint32(bits.OnesCount32(p.texel))
		ns := uint32(max(p.bindings-int(nu+nt), 1))
		var pool C.VkDescriptorPool
		r := C.vkllm_create_descriptor_pool(p.d.in.ctx, C.VkDevice(unsafe.Pointer(p.d.dev)), setsPerPool,
			C.uint32_t(ns*setsPerPool), C.uint32_t(nu*setsPerPool), C.uint32_t(nt*setsPerPool), &pool)
		if err := check("vkCreateDescriptorPool("+p.name+")", gv.Result(r)); err != nil {
			return nil, err
		}
		p.pools = append(p.pools, gv.DescriptorPool(unsafe.Pointer(pool)))
		p.poolLeft = setsPerPool
	}
	var cs C.VkDescriptorSet
	r := C.vkllm_alloc_set(p.d.in.ctx, C.VkDevice(unsafe.Pointer(p.d.dev)), C.VkDescriptorPool(unsafe.Pointer(p.pools[len(p.pools)-1])),
		C.VkDescriptorSetLayout(unsafe.Pointer(p.setLayout)), &cs)
	if err := check("vkAllocateDescriptorSets("+p.name+")", gv.Result(r)); err != nil {
		return nil, err
	}
	s := gv.DescriptorSet(unsafe.Pointer(cs))
	p.poolLeft--
	return s, nil
}

// forget moves cached sets that reference buffer id to the free list; they
// are rewritten before reuse. Called when the buffer closes, when no work
// that uses them is in flight.
func (p *Pipeline) forget(id uint64) {
	for k, s := range p.cache {
		for i := 0; i < p.bindings; i++ {
			if k[i].id == id {
				delete(p.cache, k)
				p.free = append(p.free, s)
				break
			}
		}
	}
}

// recycle moves every cached set to the free list when the cache has grown
// past maxCachedSets. Only call it when no recorded work uses the sets.
func (p *Pipeline) recycle() {
	if len(p.cache) <= maxCachedSets {
		return
	}
	for k, s := range p.cache {
		p.free = append(p.free, s)
		delete(p.cache, k)
	}
}

// CachedSets reports how many descriptor sets the pipeline holds (cached and
// free), for tests of the no-allocation hot path.
func (p *Pipeline) CachedSets() int { return len(p.cache) + len(p.free) }

// Close destroys the pipeline's descriptor pools and, unless another
// pipeline of an equal description shares them, its layouts and compiled
// pipeline. Closing it again does nothing.
func (p *Pipeline) Close() {
	d := p.d
	if p.core == nil {
		return
	}
	d.setEpoch++
	for _, pool := range p.pools {
		gv.DestroyDescriptorPool(d.dev, pool, nil)
	}
	p.pools, p.cache, p.free, p.poolLeft = nil, map[setKey]gv.DescriptorSet{}, nil, 0
	if p.core.refs--; p.core.refs == 0 {
		d.retire(p.core)
	}
	p.core, p.setLayout, p.layout, p.pipe = nil, nil, nil, nil
	delete(d.pipelines, p)
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
