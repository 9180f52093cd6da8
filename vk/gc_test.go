package vk_test

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

// TestVulkanCallsUnderGC opens devices and writes hundreds of descriptor
// sets while another goroutine runs the garbage collector without pause.
// goki/vulkan copies slices (name lists, queue-family and layer
// properties, descriptor writes) into C memory that a finalizer frees,
// and the finalizer can run while the driver still uses the copy: with
// those wrappers this test corrupted the C heap (SIGSEGV or a malloc
// abort) within its first device. vk now makes those calls through its
// own glue, with every struct on the C stack (see glue.h).
func TestVulkanCallsUnderGC(t *testing.T) {
	if _, err := vk.Devices(vk.Options{}); err != nil {
		t.Skipf("no Vulkan device: %v", err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			runtime.GC()
		}
	}()
	defer func() { stop.Store(true); <-done }()
	const windows = 200 // more sets than one descriptor pool holds (128)
	for i := range 6 {
		d, err := vk.Open(vk.Options{Validation: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Profile(); err != nil {
			t.Logf("no profile (timestamps) on this device: %v", err)
		}
		p := fillPipeline(t, d)
		buf, err := d.NewBuffer(windows*256, vk.DeviceBuffer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for w := range windows {
			// A new window each dispatch: a descriptor set written anew.
			push := fillPush{N: 64, Value: float32(i*windows + w)}
			c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), buf.Range(uint64(w)*256, 256))
		}
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, windows*256)
		if err := buf.Read(0, got); err != nil {
			t.Fatal(err)
		}
		for w := range windows {
			for k := range 64 {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(got[w*256+4*k:])); v != float32(i*windows+w) {
					t.Fatalf("device %d, window %d, element %d = %v, want %v", i, w, k, v, float32(i*windows+w))
				}
			}
		}
		if msgs := d.ValidationMessages(); len(msgs) > 0 {
			t.Fatalf("validation: %v", msgs)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
