package vk

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// MaxBindings is the most storage-buffer bindings one pipeline may declare.
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
	// Bindings is the number of storage buffers, set 0, bindings 0..n-1.
	Bindings int
	// PushSize is the size in bytes of the push-constant block (0 if none);
	// a multiple of 4, at most Limits.MaxPushConstants.
	PushSize uint32
	// Spec are the uint32 specialization constants with ids 0..len-1
	// (constant_id 0 is the workgroup size by convention; floats and ints
	// go in by their bit patterns).
	Spec []uint32
}

// Pipeline is a compute pipeline with its layout and a cache of descriptor
// sets keyed by the exact ranges bound, so recording a dispatch over buffers
// seen before allocates nothing. Close it before its Device (or let
// Device.Close do it); it must not be used afterwards.
type Pipeline struct {
	d         *Device
	name      string
	bindings  int
	pushSize  uint32
	module    gv.ShaderModule
	setLayout gv.DescriptorSetLayout
	layout    gv.PipelineLayout
	pipe      gv.Pipeline

	cache    map[setKey]gv.DescriptorSet
	free     []gv.DescriptorSet
	pools    []gv.DescriptorPool
	poolLeft int
	sets     []gv.DescriptorSet // scratch of length 1 for binding
}

type bindKey struct{ id, off, size uint64 }

type setKey [MaxBindings]bindKey

// NewPipeline creates a compute pipeline.
func (d *Device) NewPipeline(desc PipelineDesc) (*Pipeline, error) {
	where := "NewPipeline(" + desc.Name + ")"
	if desc.Bindings < 0 || desc.Bindings > MaxBindings {
		return nil, fmt.Errorf("vk: %s: %d bindings, want 0..%d", where, desc.Bindings, MaxBindings)
	}
	if desc.PushSize%4 != 0 || desc.PushSize > d.info.Limits.MaxPushConstants {
		return nil, fmt.Errorf("vk: %s: push-constant size %d, want a multiple of 4 up to %d", where, desc.PushSize, d.info.Limits.MaxPushConstants)
	}
	if len(desc.SPIRV) < 20 || len(desc.SPIRV)%4 != 0 || binary.LittleEndian.Uint32(desc.SPIRV) != 0x07230203 {
		return nil, fmt.Errorf("vk: %s: not SPIR-V (%d bytes)", where, len(desc.SPIRV))
	}
	p := &Pipeline{d: d, name: desc.Name, bindings: desc.Bindings, pushSize: desc.PushSize,
		cache: map[setKey]gv.DescriptorSet{}, sets: make([]gv.DescriptorSet, 1)}
	code := make([]uint32, len(desc.SPIRV)/4)
	for i := range code {
		code[i] = binary.LittleEndian.Uint32(desc.SPIRV[4*i:])
	}
	smci := &gv.ShaderModuleCreateInfo{
		SType:    gv.StructureTypeShaderModuleCreateInfo,
		CodeSize: uint64(len(desc.SPIRV)),
		PCode:    code,
	}
	var vmod gv.ShaderModule
	if err := check("vkCreateShaderModule("+desc.Name+")", gv.CreateShaderModule(d.dev, smci, nil, &vmod)); err != nil {
		return nil, err
	}
	p.module = vmod
	binds := make([]gv.DescriptorSetLayoutBinding, desc.Bindings)
	for i := range binds {
		binds[i] = gv.DescriptorSetLayoutBinding{
			Binding:         uint32(i),
			DescriptorType:  gv.DescriptorTypeStorageBuffer,
			DescriptorCount: 1,
			StageFlags:      gv.ShaderStageFlags(gv.ShaderStageComputeBit),
		}
	}
	dslci := &gv.DescriptorSetLayoutCreateInfo{
		SType:        gv.StructureTypeDescriptorSetLayoutCreateInfo,
		BindingCount: uint32(len(binds)),
		PBindings:    binds,
	}
	var vsl gv.DescriptorSetLayout
	if err := check("vkCreateDescriptorSetLayout("+desc.Name+")", gv.CreateDescriptorSetLayout(d.dev, dslci, nil, &vsl)); err != nil {
		p.Close()
		return nil, err
	}
	p.setLayout = vsl
	plci := &gv.PipelineLayoutCreateInfo{
		SType:          gv.StructureTypePipelineLayoutCreateInfo,
		SetLayoutCount: 1,
		PSetLayouts:    []gv.DescriptorSetLayout{p.setLayout},
	}
	if desc.PushSize > 0 {
		plci.PushConstantRangeCount = 1
		plci.PPushConstantRanges = []gv.PushConstantRange{{StageFlags: gv.ShaderStageFlags(gv.ShaderStageComputeBit), Size: desc.PushSize}}
	}
	var vpl gv.PipelineLayout
	if err := check("vkCreatePipelineLayout("+desc.Name+")", gv.CreatePipelineLayout(d.dev, plci, nil, &vpl)); err != nil {
		p.Close()
		return nil, err
	}
	p.layout = vpl
	stage := gv.PipelineShaderStageCreateInfo{
		SType:  gv.StructureTypePipelineShaderStageCreateInfo,
		Stage:  gv.ShaderStageComputeBit,
		Module: p.module,
		PName:  "main\x00",
	}
	var specData []uint32
	if len(desc.Spec) > 0 {
		entries := make([]gv.SpecializationMapEntry, len(desc.Spec))
		specData = append([]uint32(nil), desc.Spec...)
		for i := range entries {
			entries[i] = gv.SpecializationMapEntry{ConstantID: uint32(i), Offset: uint32(4 * i), Size: 4}
		}
		stage.PSpecializationInfo = []gv.SpecializationInfo{{
			MapEntryCount: uint32(len(entries)),
			PMapEntries:   entries,
			DataSize:      uint64(4 * len(specData)),
			PData:         unsafe.Pointer(&specData[0]),
		}}
	}
	pipes := make([]gv.Pipeline, 1)
	cpci := []gv.ComputePipelineCreateInfo{{
		SType:  gv.StructureTypeComputePipelineCreateInfo,
		Stage:  stage,
		Layout: p.layout,
	}}
	if err := check("vkCreateComputePipelines("+desc.Name+")", gv.CreateComputePipelines(d.dev, nil, 1, cpci, nil, pipes)); err != nil {
		p.Close()
		return nil, err
	}
	p.pipe = pipes[0]
	d.pipelines[p] = struct{}{}
	return p, nil
}

// Name returns the pipeline's name.
func (p *Pipeline) Name() string { return p.name }

// set returns a descriptor set for exactly these ranges, from the cache or
// newly written.
func (p *Pipeline) set(rs []Range) (gv.DescriptorSet, error) {
	var key setKey
	for i, r := range rs {
		key[i] = bindKey{r.Buf.id, r.Offset, r.Size}
	}
	if s, ok := p.cache[key]; ok {
		return s, nil
	}
	var s gv.DescriptorSet
	if n := len(p.free); n > 0 {
		s = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		var err error
		if s, err = p.allocSet(); err != nil {
			return nil, err
		}
	}
	writes := make([]gv.WriteDescriptorSet, len(rs))
	for i, r := range rs {
		writes[i] = gv.WriteDescriptorSet{
			SType:           gv.StructureTypeWriteDescriptorSet,
			DstSet:          s,
			DstBinding:      uint32(i),
			DescriptorCount: 1,
			DescriptorType:  gv.DescriptorTypeStorageBuffer,
			PBufferInfo:     []gv.DescriptorBufferInfo{{Buffer: r.Buf.buf, Offset: gv.DeviceSize(r.Offset), Range: gv.DeviceSize(r.Size)}},
		}
	}
	if len(writes) > 0 {
		gv.UpdateDescriptorSets(p.d.dev, uint32(len(writes)), writes, 0, nil)
	}
	p.cache[key] = s
	return s, nil
}

func (p *Pipeline) allocSet() (gv.DescriptorSet, error) {
	if p.poolLeft == 0 {
		n := uint32(max(p.bindings, 1)) * setsPerPool
		dpci := &gv.DescriptorPoolCreateInfo{
			SType:         gv.StructureTypeDescriptorPoolCreateInfo,
			MaxSets:       setsPerPool,
			PoolSizeCount: 1,
			PPoolSizes:    []gv.DescriptorPoolSize{{Type: gv.DescriptorTypeStorageBuffer, DescriptorCount: n}},
		}
		var pool gv.DescriptorPool
		if err := check("vkCreateDescriptorPool("+p.name+")", gv.CreateDescriptorPool(p.d.dev, dpci, nil, &pool)); err != nil {
			return nil, err
		}
		p.pools = append(p.pools, pool)
		p.poolLeft = setsPerPool
	}
	var s gv.DescriptorSet
	dsai := &gv.DescriptorSetAllocateInfo{
		SType:              gv.StructureTypeDescriptorSetAllocateInfo,
		DescriptorPool:     p.pools[len(p.pools)-1],
		DescriptorSetCount: 1,
		PSetLayouts:        []gv.DescriptorSetLayout{p.setLayout},
	}
	if err := check("vkAllocateDescriptorSets("+p.name+")", gv.AllocateDescriptorSets(p.d.dev, dsai, &s)); err != nil {
		return nil, err
	}
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

// Close destroys the pipeline, its layouts and descriptor pools.
func (p *Pipeline) Close() {
	d := p.d
	if p.pipe != nil {
		gv.DestroyPipeline(d.dev, p.pipe, nil)
		p.pipe = nil
	}
	for _, pool := range p.pools {
		gv.DestroyDescriptorPool(d.dev, pool, nil)
	}
	p.pools, p.cache, p.free, p.poolLeft = nil, map[setKey]gv.DescriptorSet{}, nil, 0
	if p.layout != nil {
		gv.DestroyPipelineLayout(d.dev, p.layout, nil)
		p.layout = nil
	}
	if p.setLayout != nil {
		gv.DestroyDescriptorSetLayout(d.dev, p.setLayout, nil)
		p.setLayout = nil
	}
	if p.module != nil {
		gv.DestroyShaderModule(d.dev, p.module, nil)
		p.module = nil
	}
	delete(d.pipelines, p)
}
