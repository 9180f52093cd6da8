package vk_test

import (
	"testing"

	"github.com/vkllm/vkllm/shaders"
	"github.com/vkllm/vkllm/vk"
)

// BenchmarkGraph measures the fixed cost of a step: one graph of 100 small
// dependent dispatches (record, submit, wait), without validation.
func BenchmarkGraph(b *testing.B) {
	if devs, err := vk.Devices(vk.Options{}); err != nil || len(devs) == 0 {
		b.Skipf("no Vulkan device: %v", err)
	}
	d, err := vk.Open(vk.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	code, err := shaders.SPIRV("fill_f32")
	if err != nil {
		b.Fatal(err)
	}
	p, err := d.NewPipeline(vk.PipelineDesc{Name: "fill_f32", SPIRV: code, Bindings: 1, PushSize: 8, Spec: []uint32{64}})
	if err != nil {
		b.Fatal(err)
	}
	buf, err := d.NewBuffer(4*256, vk.DeviceBuffer)
	if err != nil {
		b.Fatal(err)
	}
	push := fillPush{N: 256, Value: 1}
	const perGraph = 100
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := d.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < perGraph; j++ {
			c.Dispatch(p, [3]uint32{4, 1, 1}, vk.Bytes(&push), buf.All())
		}
		if err := c.Submit(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer() // Close (deferred) is not part of a step
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perGraph), "ns/dispatch")
}
