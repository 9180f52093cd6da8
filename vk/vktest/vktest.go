// Package vktest opens Vulkan devices for tests: validation on (when the
// layer is installed) and any validation message fails the test.
package vktest

import (
	"os"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

// Open opens the test device with validation enabled, or skips the test
// when the machine has no Vulkan device at all. At cleanup it fails the test
// on any validation message not yet checked and on Close errors (leaks are
// reported by the layer at destruction). o.Validation is forced on; o.Device
// defaults to $VKLLM_DEVICE. VKLLM_FORCE_STAGING=1 sets o.ForceStaging, to
// run a whole suite through the discrete-GPU (staging) path on a UMA device.
func Open(t testing.TB, o vk.Options) *vk.Device {
	t.Helper()
	if os.Getenv("VKLLM_FORCE_STAGING") == "1" {
		o.ForceStaging = true
	}
	devs, err := vk.Devices(vk.Options{})
	if err != nil || len(devs) == 0 {
		t.Skipf("no Vulkan device: %v", err)
	}
	o.Validation = true
	d, err := vk.Open(o)
	if err != nil {
		t.Fatalf("vk.Open: %v", err)
	}
	if !d.Validating() {
		t.Logf("%s is not installed; running without validation", vk.ValidationLayer)
	}
	t.Cleanup(func() {
		Check(t, d)
		if err := d.Close(); err != nil {
			t.Errorf("Device.Close: %v", err)
		}
	})
	return d
}

// Check fails the test if the validation layer reported anything since the
// last Check.
func Check(t testing.TB, d *vk.Device) {
	t.Helper()
	if msgs := d.ValidationMessages(); len(msgs) > 0 {
		t.Errorf("validation reported %d message(s):\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}
