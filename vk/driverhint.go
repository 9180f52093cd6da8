package vk

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// PCI vendor ids of the GPU makers DriverHint knows.
const (
	vendorAMD    = 0x1002
	vendorIntel  = 0x8086
	vendorNVIDIA = 0x10de
)

// GPUVendors returns the PCI vendor ids of the display devices under root,
// a file system root ("/" on a running machine; tests pass a fake tree),
// sorted and without repeats: those of the DRM devices
// (sys/class/drm/*/device/vendor) and of the PCI devices whose class is a
// display controller (sys/bus/pci/devices/*/class 0x03xxxx), which a GPU
// without a loaded kernel driver still has. Files that are missing or do
// not parse are skipped.
func GPUVendors(root string) []uint16 {
	var ids []uint16
	add := func(vendorFile string) {
		b, err := os.ReadFile(vendorFile)
		if err != nil {
			return
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 16)
		if err != nil || v == 0 || v == 0xffff {
			return
		}
		if !slices.Contains(ids, uint16(v)) {
			ids = append(ids, uint16(v))
		}
	}
	drm, _ := filepath.Glob(filepath.Join(root, "sys/class/drm/*/device/vendor"))
	for _, f := range drm {
		add(f)
	}
	pci, _ := filepath.Glob(filepath.Join(root, "sys/bus/pci/devices/*/class"))
	for _, f := range pci {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		c, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 32)
		if err != nil || c>>16 != 0x03 {
			continue
		}
		add(filepath.Join(filepath.Dir(f), "vendor"))
	}
	slices.Sort(ids)
	return ids
}

// DriverHint says which Vulkan driver to install for the GPUs under root
// (see GPUVendors): a line per GPU maker found, or the CPU driver when
// none is, then where the loader looks for drivers. It is the advice of
// the error when the loader finds no driver at all
// (VK_ERROR_INCOMPATIBLE_DRIVER) or no device.
func DriverHint(root string) string {
	var b strings.Builder
	ids := GPUVendors(root)
	known := false
	for _, id := range ids {
		switch id {
		case vendorAMD:
			b.WriteString("AMD GPU found (PCI vendor 0x1002): install Mesa's RADV driver: apt install mesa-vulkan-drivers (Debian, Ubuntu), dnf install mesa-vulkan-drivers (Fedora), pacman -S vulkan-radeon (Arch); Mesa 25 or later for the newest GPUs (RDNA 4)\n")
		case vendorIntel:
			b.WriteString("Intel GPU found (PCI vendor 0x8086): install Mesa's ANV driver: apt install mesa-vulkan-drivers (Debian, Ubuntu), dnf install mesa-vulkan-drivers (Fedora), pacman -S vulkan-intel (Arch); Mesa 24.2 or later for Lunar Lake and Battlemage\n")
		case vendorNVIDIA:
			b.WriteString("NVIDIA GPU found (PCI vendor 0x10de): install the NVIDIA driver with its Vulkan ICD: apt install nvidia-driver (Debian) or the libnvidia-gl-<version> that goes with nvidia-driver-<version> (Ubuntu), dnf install xorg-x11-drv-nvidia (Fedora, RPM Fusion), pacman -S nvidia-utils (Arch); in a container, the NVIDIA container toolkit with NVIDIA_DRIVER_CAPABILITIES including graphics\n")
		default:
			continue
		}
		known = true
	}
	if !known {
		if len(ids) > 0 {
			fmt.Fprintf(&b, "no AMD, Intel or NVIDIA GPU found (display devices of PCI vendors %s): ", hexIDs(ids))
		} else {
			b.WriteString("no GPU found: ")
		}
		b.WriteString("install Mesa's lavapipe CPU driver to run on the processor: apt install mesa-vulkan-drivers (Debian, Ubuntu), dnf install mesa-vulkan-drivers (Fedora), pacman -S vulkan-swrast (Arch)\n")
	}
	b.WriteString("the Vulkan loader reads the drivers' manifests from /usr/share/vulkan/icd.d and /etc/vulkan/icd.d (VK_DRIVER_FILES or VK_ICD_FILENAMES replace them); `vkllm devices` lists what it finds")
	return b.String()
}

func hexIDs(ids []uint16) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprintf("0x%04x", id)
	}
	return strings.Join(s, ", ")
}
