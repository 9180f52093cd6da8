//go:build linux

package vk

/*
#include <malloc.h>
*/
import "C"

// TrimHeap hands the C heap's free pages back to the operating system
// (glibc's malloc_trim). A driver that compiles kernels on the CPU
// (lavapipe runs LLVM) frees its compilers' working memory to the C heap,
// where it stays resident; trimming after the warm-up returns it. It
// reports whether any memory was released.
func TrimHeap() bool { return C.malloc_trim(0) != 0 }
