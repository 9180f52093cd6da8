package vk

import (
	"errors"
	"fmt"
	"strings"
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
	kind   BufferKind
	local  bool   // placed as device-local memory (counts against Options.DeviceLocalBudget)
	alloc  uint64 // bytes allocated (memory requirements), for heap accounting
	mapped unsafe.Pointer
	// used says that a descriptor set or a kept graph may refer to the
	// buffer: closing it then makes kept graphs stale.
	used bool
	// views are the R32_UINT texel views of ranges bound as texel buffers.
	views map[[2]uint64]gv.BufferView
}

// Range is a byte range of a Buffer: what a kernel binding sees.
type Range struct {
	Buf    *Buffer
	Offset uint64
	Size   uint64
}

// NewBuffer allocates size bytes (rounded up to 4) of the given kind. A
// DeviceBuffer that does not fit the device-local budget falls back to
// host-visible memory on devices that are not discrete (see
// Device.Capacity). Sizes over Limits.MaxAllocation or every candidate
// heap's remaining budget are errors matching ErrOutOfMemory.
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
		Usage:       gv.BufferUsageFlags(gv.BufferUsageStorageBufferBit | gv.BufferUsageUniformBufferBit | gv.BufferUsageUniformTexelBufferBit | gv.BufferUsageTransferSrcBit | gv.BufferUsageTransferDstBit),
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
	cands := memoryCandidates(d.types, uint32(req.MemoryTypeBits), kind, d.discrete())
	if len(cands) == 0 {
		gv.DestroyBuffer(d.dev, b.buf, nil)
		return nil, fmt.Errorf("vk: NewBuffer(%d bytes): no suitable memory type (bits %#x)", size, req.MemoryTypeBits)
	}
	// The first placement that fits its budget and that the driver
	// grants; a refusal (out of device memory) moves on to the next.
	var tried []string
	var place placement
	for _, p := range cands {
		if !fits(p, d.types, d.heaps, d.localUsed, d.localCap, uint64(req.Size)) {
			tried = append(tried, d.overBudget(p, uint64(req.Size)))
			continue
		}
		mai := &gv.MemoryAllocateInfo{
			SType:           gv.StructureTypeMemoryAllocateInfo,
			AllocationSize:  req.Size,
			MemoryTypeIndex: p.typ,
		}
		var vmem gv.DeviceMemory
		if err := check("vkAllocateMemory", gv.AllocateMemory(d.dev, mai, nil, &vmem)); err != nil {
			if errors.Is(err, ErrOutOfMemory) {
				tried = append(tried, fmt.Sprintf("memory type %d: %v", p.typ, err))
				continue
			}
			gv.DestroyBuffer(d.dev, b.buf, nil)
			return nil, fmt.Errorf("NewBuffer(%d bytes): %w", size, err)
		}
		b.mem, place = vmem, p
		break
	}
	if b.mem == nil {
		gv.DestroyBuffer(d.dev, b.buf, nil)
		return nil, fmt.Errorf("vk: NewBuffer(%d bytes): %s: %w", size, strings.Join(tried, "; "), ErrOutOfMemory)
	}
	typ := place.typ
	b.heap, b.kind, b.local = d.types[typ].heap, kind, place.local
	if err := check("vkBindBufferMemory", gv.BindBufferMemory(d.dev, b.buf, b.mem, 0)); err != nil {
		gv.FreeMemory(d.dev, b.mem, nil)
		gv.DestroyBuffer(d.dev, b.buf, nil)
		return nil, err
	}
	visible := d.types[typ].flags&memVisible != 0
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
	d.heaps[b.heap].used += b.alloc
	if b.local {
		d.localUsed += b.alloc
	}
	d.nextID++
	b.id = d.nextID
	d.buffers[b] = struct{}{}
	return b, nil
}

// overBudget says which budget placement p of size bytes exceeds.
func (d *Device) overBudget(p placement, size uint64) string {
	h := d.types[p.typ].heap
	if hs := d.heaps[h]; hs.used+size > hs.budget {
		return fmt.Sprintf("memory type %d: heap %d budget %d exceeded (%d in use)", p.typ, h, hs.budget, hs.used)
	}
	return fmt.Sprintf("memory type %d: device-local budget %d exceeded (%d in use)", p.typ, d.localCap, d.localUsed)
}

// Placement says where the buffer lives: its memory heap, and whether it
// is a DeviceBuffer that fell back to host-visible memory because the
// device-local budget was spent (see Device.Capacity).
func (b *Buffer) Placement() (heap int, fallback bool) {
	return int(b.heap), b.kind == DeviceBuffer && !b.local
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
	if b.used {
		d.setEpoch++ // kept graphs may use b
	}
	for p := range d.pipelines {
		p.forget(b.id)
	}
	if b.mapped != nil {
		gv.UnmapMemory(d.dev, b.mem)
		b.mapped = nil
	}
	for _, v := range b.views {
		gv.DestroyBufferView(d.dev, v, nil)
	}
	b.views = nil
	gv.DestroyBuffer(d.dev, b.buf, nil)
	gv.FreeMemory(d.dev, b.mem, nil)
	d.heaps[b.heap].used -= b.alloc
	if b.local {
		d.localUsed -= b.alloc
	}
	b.buf, b.mem = nil, nil
	delete(d.buffers, b)
}

// view returns the R32_UINT texel view of size bytes at off, made once.
func (b *Buffer) view(off, size uint64) (gv.BufferView, error) {
	key := [2]uint64{off, size}
	if v, ok := b.views[key]; ok {
		return v, nil
	}
	info := &gv.BufferViewCreateInfo{
		SType:  gv.StructureTypeBufferViewCreateInfo,
		Buffer: b.buf,
		Format: gv.FormatR32Uint,
		Offset: gv.DeviceSize(off),
		Range:  gv.DeviceSize(size),
	}
	var v gv.BufferView
	if err := check("vkCreateBufferView", gv.CreateBufferView(b.d.dev, info, nil, &v)); err != nil {
		return nil, err
	}
	if b.views == nil {
		b.views = map[[2]uint64]gv.BufferView{}
	}
	b.views[key] = v
	return v, nil
}
