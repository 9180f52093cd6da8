package vk

import (
	"errors"
	"fmt"

	gv "github.com/goki/vulkan"
)

// ErrDeviceLost is matched (errors.Is) by every error caused by
// VK_ERROR_DEVICE_LOST. The Device must be closed and opened again.
var ErrDeviceLost = errors.New("vk: device lost")

// ErrOutOfMemory is matched (errors.Is) by every error caused by
// VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_HOST_MEMORY or an
// allocation that would exceed a heap's budget.
var ErrOutOfMemory = errors.New("vk: out of memory")

// Error is a failed Vulkan call: the call's name and the VkResult it returned.
type Error struct {
	Call   string
	Result int32
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("vk: %s: %s (VkResult %d)", e.Call, resultName(e.Result), e.Result)
}

// Is reports whether e is one of ErrDeviceLost or ErrOutOfMemory.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrDeviceLost:
		return gv.Result(e.Result) == gv.ErrorDeviceLost
	case ErrOutOfMemory:
		r := gv.Result(e.Result)
		return r == gv.ErrorOutOfDeviceMemory || r == gv.ErrorOutOfHostMemory
	}
	return false
}

// check turns a VkResult into nil or an *Error naming call.
func check(call string, r gv.Result) error {
	if r == gv.Success {
		return nil
	}
	return &Error{Call: call, Result: int32(r)}
}

func resultName(r int32) string {
	switch gv.Result(r) {
	case gv.Success:
		return "VK_SUCCESS"
	case gv.NotReady:
		return "VK_NOT_READY"
	case gv.Timeout:
		return "VK_TIMEOUT"
	case gv.Incomplete:
		return "VK_INCOMPLETE"
	case gv.ErrorOutOfHostMemory:
		return "VK_ERROR_OUT_OF_HOST_MEMORY"
	case gv.ErrorOutOfDeviceMemory:
		return "VK_ERROR_OUT_OF_DEVICE_MEMORY"
	case gv.ErrorInitializationFailed:
		return "VK_ERROR_INITIALIZATION_FAILED"
	case gv.ErrorDeviceLost:
		return "VK_ERROR_DEVICE_LOST"
	case gv.ErrorMemoryMapFailed:
		return "VK_ERROR_MEMORY_MAP_FAILED"
	case gv.ErrorLayerNotPresent:
		return "VK_ERROR_LAYER_NOT_PRESENT"
	case gv.ErrorExtensionNotPresent:
		return "VK_ERROR_EXTENSION_NOT_PRESENT"
	case gv.ErrorFeatureNotPresent:
		return "VK_ERROR_FEATURE_NOT_PRESENT"
	case gv.ErrorIncompatibleDriver:
		return "VK_ERROR_INCOMPATIBLE_DRIVER"
	case gv.ErrorTooManyObjects:
		return "VK_ERROR_TOO_MANY_OBJECTS"
	case gv.ErrorFormatNotSupported:
		return "VK_ERROR_FORMAT_NOT_SUPPORTED"
	case gv.ErrorFragmentedPool:
		return "VK_ERROR_FRAGMENTED_POOL"
	case gv.ErrorOutOfPoolMemory:
		return "VK_ERROR_OUT_OF_POOL_MEMORY"
	}
	return "unknown VkResult"
}
