package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// GeGLU records dst[i] = gelu(gate[i]) * up[i] over n f32 elements (tanh
// GELU; Gemma's FFN). dst may be gate.
func (k *Kernels) GeGLU(c *vk.Cmd, dst, gate, up vk.Range, n int) error {
	if n <= 0 {
		return fmt.Errorf("ops: GeGLU: %d elements", n)
	}
	for _, o := range []struct {
		what string
		r    vk.Range
	}{{"dst", dst}, {"gate", gate}, {"up", up}} {
		if err := sized("GeGLU", o.what, o.r, 4*uint64(n)); err != nil {
			return err
		}
	}
	return k.chunks("GeGLU", uint64(n), 4, func(off, cnt uint64) error {
		push := CountPush{N: uint32(cnt)}
		return Record(k, c, "geglu_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push,
			k.window(gate, 4*off, 4*cnt), k.window(up, 4*off, 4*cnt), k.window(dst, 4*off, 4*cnt))
	})
}

// RefGeGLU is the CPU reference of GeGLU.
func RefGeGLU(dst, gate, up []float32) {
	for i, v := range gate {
		x := float64(v)
		dst[i] = float32(0.5 * x * (1 + math.Tanh(0.7978845608028654*x*(1+0.044715*x*x))) * float64(up[i]))
	}
}
