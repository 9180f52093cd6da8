package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// SoftCap records dst[i] = cap * tanh(src[i] / cap) over n f32 elements
// (Gemma 2's final logit soft-capping; cap > 0). dst may be src.
func (k *Kernels) SoftCap(c *vk.Cmd, dst, src vk.Range, n int, cap float32) error {
	if !(cap > 0) {
		return fmt.Errorf("ops: SoftCap: cap %g, want > 0", cap)
	}
	return k.unary(c, "SoftCap", "softcap_f32", dst, src, n, cap)
}

// RefSoftCap is the CPU reference of SoftCap.
func RefSoftCap(dst, src []float32, cap float32) {
	for i, v := range src {
		dst[i] = float32(float64(cap) * math.Tanh(float64(v)/float64(cap)))
	}
}
