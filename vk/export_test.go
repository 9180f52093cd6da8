package vk

// SetIdleCap lowers how many compiled pipelines no Pipeline uses d keeps
// (maxIdleCores), for tests of the bound.
func SetIdleCap(d *Device, n int) { d.idleCap = n }

// WriteFileAtomic is writeFileAtomic, for its test.
var WriteFileAtomic = writeFileAtomic
