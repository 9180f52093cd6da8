package vk

import (
	"reflect"
	"testing"
)

// Memory layouts the placement logic meets (flags as the drivers report
// them).
var (
	// lavapipe: one heap, device-local, every type host-visible.
	lavapipeTypes = []memType{{memLocal | memVisible | memCoherent | memCached, 0}}
	// An APU such as the Steam Deck's: a 1 GiB device-local carve-out
	// (heap 0) and the system memory the GPU reads too (heap 1).
	apuTypes = []memType{
		{memLocal, 0},
		{memVisible | memCoherent, 1},
		{memLocal | memVisible | memCoherent, 0},
		{memVisible | memCoherent | memCached, 1},
	}
	apuHeaps = []heapState{{budget: 1 << 30, deviceLocal: true}, {budget: 12 << 30}}
	// A discrete GPU: VRAM (heap 0, with a small host-visible window)
	// and system memory (heap 1).
	discreteTypes = []memType{
		{memLocal, 0},
		{memVisible | memCoherent, 1},
		{memVisible | memCoherent | memCached, 1},
		{memLocal | memVisible | memCoherent, 2},
	}
	discreteHeaps = []heapState{{budget: 24 << 30, deviceLocal: true}, {budget: 32 << 30}, {budget: 256 << 20, deviceLocal: true}}
)

func TestMemoryCandidates(t *testing.T) {
	all := ^uint32(0)
	tests := []struct {
		name     string
		types    []memType
		bits     uint32
		kind     BufferKind
		discrete bool
		want     []placement
	}{
		{"lavapipe device", lavapipeTypes, all, DeviceBuffer, false, []placement{{0, true}, {0, false}}},
		{"lavapipe host", lavapipeTypes, all, HostBuffer, false, []placement{{0, false}}},
		{"lavapipe staging", lavapipeTypes, all, DeviceBuffer, true, []placement{{0, true}}},
		// Visible device-local first, then plain device-local; then the
		// system heap, cached first.
		{"apu device", apuTypes, all, DeviceBuffer, false, []placement{{2, true}, {0, true}, {3, false}, {1, false}}},
		{"apu device, types 1 and 2 only", apuTypes, 0b0110, DeviceBuffer, false, []placement{{2, true}, {1, false}}},
		{"apu host", apuTypes, all, HostBuffer, false, []placement{{3, false}, {1, false}, {2, false}}},
		{"discrete device", discreteTypes, all, DeviceBuffer, true, []placement{{0, true}, {3, true}}},
		{"discrete host", discreteTypes, all, HostBuffer, true, []placement{{2, false}, {1, false}, {3, false}}},
		{"nothing allowed", apuTypes, 0, DeviceBuffer, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := memoryCandidates(tc.types, tc.bits, tc.kind, tc.discrete)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("memoryCandidates(%s) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

// TestPlacementFallback places device buffers one after another as
// NewBuffer does: the first candidate that fits its budgets. On the APU
// they fill the carve-out, then spill into system memory; with a
// device-local budget, lavapipe's one heap does the same.
func TestPlacementFallback(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name     string
		types    []memType
		heaps    []heapState
		discrete bool
		localCap uint64
		sizes    []uint64
		want     []placement // {0, false} with typ 99: refused
		capacity uint64
	}{
		{"apu", apuTypes, apuHeaps, false, 0, []uint64{600 * mib, 600 * mib, 300 * mib},
			[]placement{{2, true}, {3, false}, {2, true}}, 13 << 30},
		{"apu capped", apuTypes, apuHeaps, false, 256 * mib, []uint64{200 * mib, 100 * mib, 50 * mib},
			[]placement{{2, true}, {3, false}, {2, true}}, 256*mib + 12<<30},
		{"lavapipe capped", lavapipeTypes, []heapState{{budget: 2 << 30, deviceLocal: true}}, false, 64 * mib,
			[]uint64{48 * mib, 48 * mib, 16 * mib, 2 << 30}, []placement{{0, true}, {0, false}, {0, true}, {99, false}}, 2 << 30},
		// Discrete GPUs never spill to system memory: what fits neither
		// VRAM nor its small visible window is refused.
		{"discrete", discreteTypes, discreteHeaps, true, 0, []uint64{20 << 30, 5 << 30, 4 << 30, 200 * mib, 100 * mib},
			[]placement{{0, true}, {99, false}, {0, true}, {3, true}, {99, false}}, 24<<30 + 256*mib},
		{"discrete capped", discreteTypes, discreteHeaps, true, 1 << 30, nil, nil, 1 << 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			heaps := append([]heapState(nil), tc.heaps...)
			var localUsed uint64
			for i, size := range tc.sizes {
				got := placement{typ: 99}
				for _, p := range memoryCandidates(tc.types, ^uint32(0), DeviceBuffer, tc.discrete) {
					if fits(p, tc.types, heaps, localUsed, tc.localCap, size) {
						got = p
						heaps[tc.types[p.typ].heap].used += size
						if p.local {
							localUsed += size
						}
						break
					}
				}
				if got != tc.want[i] {
					t.Errorf("buffer %d (%d MiB) placed %v, want %v", i, size/mib, got, tc.want[i])
				}
			}
			if got := capacity(tc.types, tc.heaps, tc.discrete, tc.localCap); got != tc.capacity {
				t.Errorf("capacity = %d MiB, want %d MiB", got/mib, tc.capacity/mib)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"1024", 1024},
		{"64MiB", 64 << 20},
		{" 2 GiB ", 2 << 30},
		{"512M", 512 << 20},
		{"3KB", 3 << 10},
		{"0", 0},
		{"-1", 0},
		{"1.5GiB", 0},
		{"lots", 0},
	}
	for _, tc := range tests {
		got, ok := parseBytes(tc.in)
		if ok != (tc.want != 0) || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v, want %d", tc.in, got, ok, tc.want)
		}
	}
}
