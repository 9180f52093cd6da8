package vk

import (
	"os"
	"strconv"
	"strings"

	gv "github.com/goki/vulkan"
)

// Memory placement. A DeviceBuffer goes to device-local memory. On a
// device that is not discrete (an integrated GPU or APU such as the Steam
// Deck's, lavapipe) the device-local heap can be a small carve-out of the
// system memory while the rest of it is a host-visible heap the GPU reads
// as well, so there a DeviceBuffer that does not fit the device-local
// budget falls back to a host-visible memory type (cached first), as the
// reference implementation's Vulkan backend does. A discrete GPU gets no
// such fallback: system memory behind PCIe is an order of magnitude
// slower than its own, and a model that does not fit is refused instead.

const (
	memLocal    = gv.MemoryPropertyFlags(gv.MemoryPropertyDeviceLocalBit)
	memVisible  = gv.MemoryPropertyFlags(gv.MemoryPropertyHostVisibleBit)
	memCoherent = gv.MemoryPropertyFlags(gv.MemoryPropertyHostCoherentBit)
	memCached   = gv.MemoryPropertyFlags(gv.MemoryPropertyHostCachedBit)
)

// memType is one memory type as the placement logic sees it.
type memType struct {
	flags gv.MemoryPropertyFlags
	heap  uint32
}

// placement is one memory type a buffer may take. local says it counts
// against the device-local budget (Options.DeviceLocalBudget); a
// DeviceBuffer placed with local false is a fallback to host-visible
// memory.
type placement struct {
	typ   uint32
	local bool
}

// memoryCandidates lists the memory types (among those allowed by bits)
// that a buffer of kind may take, best first. discrete is true for
// discrete GPUs and with Options.ForceStaging: device buffers then take
// device-local memory only. A memory type may appear twice, once as
// device-local and once as fallback, when a heap is both (lavapipe).
func memoryCandidates(types []memType, bits uint32, kind BufferKind, discrete bool) []placement {
	var out []placement
	add := func(local bool, skip gv.MemoryPropertyFlags, prefs ...gv.MemoryPropertyFlags) {
		for _, want := range prefs {
			for i, t := range types {
				if bits&(1<<i) == 0 || t.flags&want != want || t.flags&skip != 0 {
					continue
				}
				p := placement{typ: uint32(i), local: local}
				dup := false
				for _, q := range out {
					dup = dup || q == p
				}
				if !dup {
					out = append(out, p)
				}
			}
		}
	}
	switch {
	case kind == HostBuffer:
		add(false, 0, memVisible|memCoherent|memCached, memVisible|memCoherent)
	case discrete:
		add(true, 0, memLocal)
	default:
		add(true, 0, memLocal|memVisible|memCoherent, memLocal)
		// The fallback is system memory: the host-visible types that are
		// not device-local, or where every type is (lavapipe, most
		// Intel iGPUs: all of it is system memory), those.
		n := len(out)
		add(false, memLocal, memVisible|memCoherent|memCached, memVisible|memCoherent)
		if len(out) == n {
			add(false, 0, memVisible|memCoherent|memCached, memVisible|memCoherent)
		}
	}
	return out
}

// heapState is one heap's budget (its size when VK_EXT_memory_budget is
// absent) and the bytes this Device has allocated from it.
type heapState struct {
	budget, used uint64
	deviceLocal  bool
}

// fits reports whether size more bytes fit placement p: its heap's budget,
// and for a device-local placement the device-local budget localCap (0:
// none) beside the localUsed bytes placed so far.
func fits(p placement, types []memType, heaps []heapState, localUsed, localCap, size uint64) bool {
	h := types[p.typ].heap
	if int(h) >= len(heaps) || heaps[h].used+size > heaps[h].budget {
		return false
	}
	return !p.local || localCap == 0 || localUsed+size <= localCap
}

// capacity is the bytes DeviceBuffers can take altogether: the heaps the
// device-local placements reach (their sum capped at localCap when set)
// and those the fallback placements reach, each heap counted once.
func capacity(types []memType, heaps []heapState, discrete bool, localCap uint64) uint64 {
	var localHeaps, fallbackHeaps uint64 // bit sets of heap indices
	for _, p := range memoryCandidates(types, ^uint32(0), DeviceBuffer, discrete) {
		if p.local {
			localHeaps |= 1 << types[p.typ].heap
		} else {
			fallbackHeaps |= 1 << types[p.typ].heap
		}
	}
	var total, localOnly uint64
	for i, h := range heaps {
		if (localHeaps|fallbackHeaps)>>i&1 == 0 {
			continue
		}
		total += h.budget
		if fallbackHeaps>>i&1 == 0 {
			localOnly += h.budget
		}
	}
	if localCap > 0 && localOnly > localCap {
		total -= localOnly - localCap
	}
	return total
}

// HeapUse is what a Device has allocated from one memory heap.
type HeapUse struct {
	Heap        int    `json:"heap"`
	DeviceLocal bool   `json:"device_local"` // the heap is device-local
	Size        uint64 `json:"size"`
	// Device is the bytes of DeviceBuffers placed as device-local memory,
	// Fallback those placed in host-visible memory because the
	// device-local budget was spent, Host the HostBuffers.
	Device   uint64 `json:"device"`
	Fallback uint64 `json:"fallback"`
	Host     uint64 `json:"host"`
}

// HeapUse returns what the device has allocated from each heap, in heap
// order (heaps it has not touched included).
func (d *Device) HeapUse() []HeapUse {
	out := make([]HeapUse, len(d.heaps))
	for i, h := range d.heaps {
		out[i] = HeapUse{Heap: i, DeviceLocal: h.deviceLocal, Size: uint64(d.mem.MemoryHeaps[i].Size)}
	}
	for b := range d.buffers {
		u := &out[b.heap]
		switch {
		case b.kind == HostBuffer:
			u.Host += b.alloc
		case b.local:
			u.Device += b.alloc
		default:
			u.Fallback += b.alloc
		}
	}
	return out
}

// Capacity is the bytes that DeviceBuffers can take on this device: its
// device-local heaps (at most Options.DeviceLocalBudget when set) and, on
// devices that are not discrete, the host-visible heaps device buffers
// fall back to. Model-fit checks compare against it.
func (d *Device) Capacity() uint64 {
	return capacity(d.types, d.heapBudgets(), d.discrete(), d.localCap)
}

// discrete reports whether device buffers take device-local memory only.
func (d *Device) discrete() bool { return d.forceStaging || d.info.Type == TypeDiscrete }

// Discrete reports whether DeviceBuffers live in device-local memory that
// the host should not read or write in place: on a discrete GPU (and with
// Options.ForceStaging) the host reaches them over the bus, if at all, so
// results a kernel writes for the host are better copied into a HostBuffer
// in the command buffer (Cmd.CopyRegions), and per-step inputs staged in a
// HostBuffer and copied in. On UMA devices (integrated GPUs, lavapipe)
// kernels read and write host-visible memory at full speed.
func (d *Device) Discrete() bool { return d.discrete() }

// heapBudgets returns the heaps with their sizes as budgets, for
// Capacity: the driver's budget moves with other programs' use.
func (d *Device) heapBudgets() []heapState {
	out := make([]heapState, len(d.heaps))
	for i, h := range d.heaps {
		out[i] = heapState{budget: uint64(d.mem.MemoryHeaps[i].Size), deviceLocal: h.deviceLocal}
	}
	return out
}

// DeviceLocalBudgetEnv names the environment variable that sets
// Options.DeviceLocalBudget when the field is zero: bytes, optionally with
// a binary unit (512MiB, 2GiB).
const DeviceLocalBudgetEnv = "VKLLM_DEVICE_LOCAL_BUDGET"

// parseBytes reads a byte count with an optional K/M/GiB (or KB/MB/GB,
// also taken as binary) unit.
func parseBytes(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		m      uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > (1<<60)/mult {
		return 0, false
	}
	return n * mult, true
}

// localBudget returns o.DeviceLocalBudget, else $VKLLM_DEVICE_LOCAL_BUDGET.
func localBudget(o Options) (uint64, error) {
	if o.DeviceLocalBudget > 0 {
		return o.DeviceLocalBudget, nil
	}
	s := os.Getenv(DeviceLocalBudgetEnv)
	if s == "" {
		return 0, nil
	}
	n, ok := parseBytes(s)
	if !ok {
		return 0, &envError{DeviceLocalBudgetEnv, s}
	}
	return n, nil
}

type envError struct{ name, val string }

func (e *envError) Error() string {
	return "vk: $" + e.name + "=" + strconv.Quote(e.val) + ": want a byte count such as 536870912 or 512MiB"
}
