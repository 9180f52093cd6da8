package vk

import (
	"fmt"
	"unsafe"

	gv "github.com/goki/vulkan"
)

// BufferKind says where a Buffer lives and how the host reaches it.
type BufferKind int

const (
	// DeviceBuffer is for tensors: device-local memory, host-visible when the
	// device has host-visible device-local memory (UMA: lavapipe, iGPUs), else
	// written and read through staging buffers.
	DeviceBuffer BufferKind = iota
	// HostBuffer is host-visible, coherent, cached where possible: staging
	// and read-back (e.g. logits) buffers. Kernels may bind it too.
	HostBuffer
)

// Buffer is one VkBuffer bound to its own allocation. All buffers can be
// bound as storage buffers and used as copy source and destination. Close it
// when done (or let Device.Close do it); it must not be used afterwards.
type Buffer struct {
	d      *Device
	id     uint64
	buf    gv.Buffer
	mem    gv.DeviceMemory
	size   uint64
	heap   uint32
	alloc  uint64 // bytes allocated (memory requirements), for heap accounting
	mapped unsafe.Pointer
}

// Range is a byte range of a Buffer: what a kernel binding sees.
type Range struct {
	Buf    *Buffer
	Offset uint64
	Size   uint64
}

// NewBuffer allocates size bytes (rounded up to 4) of the given kind. Sizes
// over Limits.MaxAllocation or the heap's remaining budget are errors
// matching ErrOutOfMemory.
func (d *Device) NewBuffer(size uint64, kind BufferKind) (*Buffer, error) {
	if size == 0 {
		return nil, fmt.Errorf("vk: NewBuffer: zero size")
	}
	size = (size + 3) &^ 3
	if size > d.info.Limits.MaxAllocation {
		return nil, fmt.Errorf("vk: NewBuffer(%d bytes): over maxMemoryAllocationSize %d: %w", size, d.info.Limits.MaxAllocation, ErrOutOfMemory)
	}
	b := &Buffer{d: d, size: size}
	bci := &gv.BufferCreateInfo{
		SType:       gv.StructureTypeBufferCreateInfo,
		Size:        gv.DeviceSize(size),
		Usage:       gv.BufferUsageFlags(gv.BufferUsageStorageBufferBit | gv.BufferUsageUniformBufferBit | gv.BufferUsageTransferSrcBit | gv.BufferUsageTransferDstBit),
		SharingMode: gv.SharingModeExclusive,
	}
	var vbuf gv.Buffer
	if err := check("vkCreateBuffer", gv.CreateBuffer(d.dev, bci, nil, &vbuf)); err != nil {
		return nil, err
	}
	b.buf = vbuf
	var req gv.MemoryRequirements
	gv.GetBufferMemoryRequirements(d.dev, b.buf, &req)
	req.Deref()
	typ, ok := d.memoryType(uint32(req.MemoryTypeBits), kind)
	if !ok {
		gv.DestroyBuffer(d.dev, b.buf, nil)
		return nil, fmt.Errorf("vk: NewBuffer(%d bytes): no suitable memory type (bits %#x)", size, req.MemoryTypeBits)
	}
	b.heap = d.mem.MemoryTypes[typ].HeapIndex
	if h := d.info.Heaps; int(b.heap) < len(h) {
		budget := h[b.heap].Budget
		if budget == 0 {
			budget = h[b.heap].Size
		}
		if d.heapUsed[b.heap]+uint64(req.Size) > budget {
			gv.DestroyBuffer(d.dev, b.buf, nil)
			return nil, fmt.Errorf("vk: NewBuffer(%d bytes): heap %d budget %d exceeded (%d in use): %w", size, b.heap, budget, d.heapUsed[b.heap], ErrOutOfMemory)
		}
	}
	mai := &gv.MemoryAllocateInfo{
		SType:           gv.StructureTypeMemoryAllocateInfo,
		AllocationSize:  req.Size,
		MemoryTypeIndex: typ,
	}
	var vmem gv.DeviceMemory
	if err := check("vkAllocateMemory", gv.AllocateMemory(d.dev, mai, nil, &vmem)); err != nil {
		gv.DestroyBuffer(d.dev, b.buf, nil)
		return nil, fmt.Errorf("NewBuffer(%d bytes): %w", size, err)
	}
	b.mem = vmem
	if err := check("vkBindBufferMemory", gv.BindBufferMemory(d.dev, b.buf, b.mem, 0)); err != nil {
		gv.FreeMemory(d.dev, b.mem, nil)
		gv.DestroyBuffer(d.dev, b.buf, nil)
		return nil, err
	}
	visible := d.mem.MemoryTypes[typ].PropertyFlags&gv.MemoryPropertyFlags(gv.MemoryPropertyHostVisibleBit) != 0
	if visible && (kind == HostBuffer || !d.forceStaging) {
		var vmap unsafe.Pointer
		if err := check("vkMapMemory", gv.MapMemory(d.dev, b.mem, 0, gv.DeviceSize(gv.WholeSize), 0, &vmap)); err != nil {
			gv.FreeMemory(d.dev, b.mem, nil)
			gv.DestroyBuffer(d.dev, b.buf, nil)
			return nil, err
		}
		b.mapped = vmap
	}
	b.alloc = uint64(req.Size)
	d.heapUsed[b.heap] += b.alloc
	d.nextID++
	b.id = d.nextID
	d.buffers[b] = struct{}{}
	return b, nil
}

// memoryType picks a memory type index for kind among the allowed bits.
func (d *Device) memoryType(bits uint32, kind BufferKind) (uint32, bool) {
	const (
		local    = gv.MemoryPropertyFlags(gv.MemoryPropertyDeviceLocalBit)
		visible  = gv.MemoryPropertyFlags(gv.MemoryPropertyHostVisibleBit)
		coherent = gv.MemoryPropertyFlags(gv.MemoryPropertyHostCoherentBit)
		cached   = gv.MemoryPropertyFlags(gv.MemoryPropertyHostCachedBit)
	)
	var prefs []gv.MemoryPropertyFlags
	switch {
	case kind == HostBuffer:
		prefs = []gv.MemoryPropertyFlags{visible | coherent | cached, visible | coherent}
	case d.forceStaging || d.info.Type == TypeDiscrete:
		prefs = []gv.MemoryPropertyFlags{local}
	default:
		prefs = []gv.MemoryPropertyFlags{local | visible | coherent, visible | coherent, local}
	}
	for _, want := range prefs {
		for i := uint32(0); i < d.mem.MemoryTypeCount; i++ {
			if bits&(1<<i) == 0 {
				continue
			}
			f := d.mem.MemoryTypes[i].PropertyFlags
			if f&want != want {
				continue
			}
			return i, true
		}
	}
	return 0, false
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 { return b.size }

// Mapped returns the buffer's memory as a byte slice when it is host-visible
// (always for HostBuffer; for DeviceBuffer on UMA devices), else nil. The
// slice is valid until Close; do not touch it while a submitted graph that
// uses the buffer runs (Cmd.Submit returns only when it has finished).
func (b *Buffer) Mapped() []byte {
	if b.mapped == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.mapped), b.size)
}

// All returns the Range covering the whole buffer.
func (b *Buffer) All() Range { return Range{Buf: b, Size: b.size} }

// Range returns the Range [off, off+size).
func (b *Buffer) Range(off, size uint64) Range { return Range{Buf: b, Offset: off, Size: size} }

// Sub returns the sub-range [off, off+size) of r (offsets relative to r).
func (r Range) Sub(off, size uint64) Range {
	return Range{Buf: r.Buf, Offset: r.Offset + off, Size: size}
}

// Windows splits r into consecutive ranges of at most window bytes (the last
// may be shorter). window should be a multiple of the element or block size
// and of Limits.MinStorageOffsetAlign; Device.MaxBinding qualifies.
func (r Range) Windows(window uint64) []Range {
	if window == 0 || r.Size <= window {
		return []Range{r}
	}
	var out []Range
	for off := uint64(0); off < r.Size; off += window {
		n := min(window, r.Size-off)
		out = append(out, r.Sub(off, n))
	}
	return out
}

func (r Range) check(where string) error {
	if r.Buf == nil || r.Buf.buf == nil {
		return fmt.Errorf("vk: %s: nil or closed buffer", where)
	}
	if r.Offset > r.Buf.size || r.Size > r.Buf.size-r.Offset {
		return fmt.Errorf("vk: %s: range [%d, %d) outside buffer of %d bytes", where, r.Offset, r.Offset+r.Size, r.Buf.size)
	}
	return nil
}

// Write copies data into the buffer at byte offset off: directly when
// mapped, else through a temporary staging buffer, one submit per
// StagingChunk bytes (so not while a Cmd is recording). For loading weights and test inputs, not the
// per-step hot path (record Cmd.Copy from a HostBuffer there).
func (b *Buffer) Write(off uint64, data []byte) error {
	r := b.Range(off, uint64(len(data)))
	if err := r.check("Buffer.Write"); err != nil || len(data) == 0 {
		return err
	}
	if b.mapped != nil {
		copy(b.Mapped()[off:], data)
		return nil
	}
	return b.d.staged(r, func(st *Buffer, c *Cmd, part Range, at uint64) {
		copy(st.Mapped(), data[at:at+part.Size])
		c.Copy(part, st.Range(0, part.Size))
	}, nil)
}

// Read copies len(dst) bytes from the buffer at byte offset off into dst,
// through a temporary staging buffer when the buffer is not mapped.
func (b *Buffer) Read(off uint64, dst []byte) error {
	r := b.Range(off, uint64(len(dst)))
	if err := r.check("Buffer.Read"); err != nil || len(dst) == 0 {
		return err
	}
	if b.mapped != nil {
		copy(dst, b.Mapped()[off:])
		return nil
	}
	return b.d.staged(r, func(st *Buffer, c *Cmd, part Range, at uint64) {
		c.Copy(st.Range(0, part.Size), part)
	}, func(st *Buffer, part Range, at uint64) { copy(dst[at:at+part.Size], st.Mapped()) })
}

// StagingChunk bounds the staging buffer of Buffer.Write and Buffer.Read:
// larger transfers go through it a piece at a time.
const StagingChunk = 64 << 20

// staged moves r through one staging buffer of at most StagingChunk bytes,
// a piece at a time: rec records the copy of part (at bytes into r), one
// submit each, then after (if any) runs on the host.
func (d *Device) staged(r Range, rec func(st *Buffer, c *Cmd, part Range, at uint64), after func(st *Buffer, part Range, at uint64)) error {
	st, err := d.NewBuffer(min(r.Size, StagingChunk), HostBuffer)
	if err != nil {
		return fmt.Errorf("vk: staging buffer: %w", err)
	}
	defer st.Close()
	for at := uint64(0); at < r.Size; at += StagingChunk {
		part := r.Sub(at, min(StagingChunk, r.Size-at))
		c, err := d.Begin()
		if err != nil {
			return err
		}
		rec(st, c, part, at)
		if err := c.Submit(); err != nil {
			return err
		}
		if after != nil {
			after(st, part, at)
		}
	}
	return nil
}

// Close frees the buffer and recycles the descriptor sets that referenced
// it. Call it between graphs (not while a Cmd is recording); the Buffer must
// not be used afterwards.
func (b *Buffer) Close() {
	if b.buf == nil {
		return
	}
	d := b.d
	for p := range d.pipelines {
		p.forget(b.id)
	}
	if b.mapped != nil {
		gv.UnmapMemory(d.dev, b.mem)
		b.mapped = nil
	}
	gv.DestroyBuffer(d.dev, b.buf, nil)
	gv.FreeMemory(d.dev, b.mem, nil)
	d.heapUsed[b.heap] -= b.alloc
	b.buf, b.mem = nil, nil
	delete(d.buffers, b)
}
