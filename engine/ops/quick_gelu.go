package ops

import (
	"math"

	"github.com/vkllm/vkllm/vk"
)

// QuickGELU records dst[i] = src[i] * sigmoid(1.702 src[i]) over n f32
// elements (CLIP's activation, ggml_gelu_quick). dst may be src.
func (k *Kernels) QuickGELU(c *vk.Cmd, dst, src vk.Range, n int) error {
	return k.unary(c, "QuickGELU", "quick_gelu_f32", dst, src, n, 0)
}

// RefQuickGELU is the CPU reference of QuickGELU (float64).
func RefQuickGELU(dst, src []float32) {
	for i, v := range src {
		x := float64(v)
		dst[i] = float32(x / (1 + math.Exp(-1.702*x)))
	}
}
