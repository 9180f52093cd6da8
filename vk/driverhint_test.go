package vk

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gv "github.com/goki/vulkan"
)

// fakeSys writes a sysfs tree under a temporary root: files maps paths
// relative to the root to contents.
func fakeSys(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestDriverHint checks the advice for each GPU maker on fake sysfs trees:
// DRM devices, a display-class PCI device without a kernel driver, a
// non-display PCI device (ignored), unknown makers and garbage.
func TestDriverHint(t *testing.T) {
	const (
		amd    = "0x1002\n"
		intel  = "0x8086\n"
		nvidia = "0x10de\n"
	)
	for _, tc := range []struct {
		name    string
		files   map[string]string
		vendors []uint16
		want    []string // substrings of the hint
		notWant []string
	}{
		{"empty", nil, nil, []string{"no GPU found", "lavapipe", "vulkan-swrast"}, []string{"RADV", "ANV", "NVIDIA driver"}},
		{"amd drm", map[string]string{"sys/class/drm/card0/device/vendor": amd, "sys/class/drm/renderD128/device/vendor": amd},
			[]uint16{0x1002}, []string{"AMD GPU found", "RADV", "mesa-vulkan-drivers", "vulkan-radeon"}, []string{"lavapipe", "ANV"}},
		{"intel drm", map[string]string{"sys/class/drm/card1/device/vendor": intel},
			[]uint16{0x8086}, []string{"Intel GPU found", "ANV", "mesa-vulkan-drivers", "vulkan-intel"}, []string{"lavapipe", "RADV"}},
		{"nvidia pci without a driver", map[string]string{"sys/bus/pci/devices/0000:01:00.0/class": "0x030000\n",
			"sys/bus/pci/devices/0000:01:00.0/vendor": nvidia},
			[]uint16{0x10de}, []string{"NVIDIA GPU found", "nvidia-driver", "libnvidia-gl", "NVIDIA_DRIVER_CAPABILITIES"}, []string{"lavapipe", "RADV"}},
		{"hybrid intel and nvidia", map[string]string{"sys/class/drm/card0/device/vendor": intel,
			"sys/bus/pci/devices/0000:01:00.0/class": "0x030200", "sys/bus/pci/devices/0000:01:00.0/vendor": nvidia},
			[]uint16{0x10de, 0x8086}, []string{"Intel GPU found", "NVIDIA GPU found"}, []string{"lavapipe"}},
		{"non-display pci", map[string]string{"sys/bus/pci/devices/0000:00:1f.3/class": "0x040300",
			"sys/bus/pci/devices/0000:00:1f.3/vendor": intel},
			nil, []string{"no GPU found", "lavapipe"}, []string{"ANV"}},
		{"virtual gpu", map[string]string{"sys/class/drm/card0/device/vendor": "0x1af4\n"},
			[]uint16{0x1af4}, []string{"PCI vendors 0x1af4", "lavapipe"}, []string{"RADV"}},
		{"garbage", map[string]string{"sys/class/drm/card0/device/vendor": "amd\n", "sys/bus/pci/devices/x/class": "zz"},
			nil, []string{"no GPU found"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeSys(t, tc.files)
			if got := GPUVendors(root); !slices.Equal(got, tc.vendors) {
				t.Errorf("GPUVendors = %#x, want %#x", got, tc.vendors)
			}
			h := DriverHint(root)
			for _, w := range append(tc.want, "icd.d", "vkllm devices") {
				if !strings.Contains(h, w) {
					t.Errorf("the hint lacks %q:\n%s", w, h)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(h, w) {
					t.Errorf("the hint has %q:\n%s", w, h)
				}
			}
		})
	}
}

// TestNoDriverError points the Vulkan loader at a driver manifest that
// does not exist, so that it finds no driver: the error keeps the VkResult
// (VK_ERROR_INCOMPATIBLE_DRIVER) and adds the advice for this machine.
func TestNoDriverError(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.json")
	t.Setenv("VK_DRIVER_FILES", none)
	t.Setenv("VK_ICD_FILENAMES", none)
	_, err := Devices(Options{})
	var ve *Error
	if !errors.As(err, &ve) || gv.Result(ve.Result) != gv.ErrorIncompatibleDriver {
		t.Fatalf("Devices without a driver = %v, want VK_ERROR_INCOMPATIBLE_DRIVER", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "VK_ERROR_INCOMPATIBLE_DRIVER") || !strings.Contains(msg, DriverHint("/")) {
		t.Errorf("the error says\n%s\nwant the VkResult and the hint\n%s", msg, DriverHint("/"))
	}
}
