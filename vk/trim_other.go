//go:build !linux

package vk

// TrimHeap does nothing where the C library has no malloc_trim.
func TrimHeap() bool { return false }
