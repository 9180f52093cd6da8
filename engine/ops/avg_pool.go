package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/vk"
)

// PoolParams describe an AvgPool or PixelShuffle dispatch: a grid of H x W
// tokens of C values ([H*W][C] f32, token (y, x) at row y*W+x) merged in
// K x K squares (H and W multiples of K).
type PoolParams struct {
	H, W, C, K int
}

// AvgPoolPush mirrors the push-constant block of avg_pool.comp.
type AvgPoolPush struct {
	H, W, C, K uint32
}

// Tokens is the number of output tokens.
func (p PoolParams) Tokens() int { return (p.H / p.K) * (p.W / p.K) }

func (p PoolParams) check(op string) error {
	if p.C <= 0 || p.K <= 0 || p.H < p.K || p.W < p.K || p.H%p.K != 0 || p.W%p.K != 0 || p.H*p.W*p.C > 1<<28 {
		return fmt.Errorf("ops: %s: bad parameters %+v (the grid sides must be positive multiples of K)", op, p)
	}
	return nil
}

// AvgPool records K x K average pooling of the token grid src into dst
// ([Tokens][C] f32, output token (oy, ox) at row oy*(W/K)+ox): Gemma 3's
// pooling of the vision tower's patches.
func (k *Kernels) AvgPool(c *vk.Cmd, dst, src vk.Range, p PoolParams) error {
	if err := p.check("AvgPool"); err != nil {
		return err
	}
	in, out := uint64(p.H*p.W*p.C), uint64(p.Tokens()*p.C)
	if err := sized("AvgPool", "src", src, 4*in); err != nil {
		return err
	}
	if err := sized("AvgPool", "dst", dst, 4*out); err != nil {
		return err
	}
	if 4*in > k.dev.MaxBinding() {
		return fmt.Errorf("ops: AvgPool: %d values exceed one binding", in)
	}
	push := AvgPoolPush{H: uint32(p.H), W: uint32(p.W), C: uint32(p.C), K: uint32(p.K)}
	return Record(k, c, "avg_pool_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(out), k.wg)), &push,
		k.window(src, 0, 4*in), k.window(dst, 0, 4*out))
}

// RefAvgPool is the CPU reference of AvgPool (float64 sums).
func RefAvgPool(dst, src []float32, p PoolParams) error {
	if err := p.check("AvgPool"); err != nil {
		return err
	}
	ow := p.W / p.K
	for tok := range p.Tokens() {
		y0, x0 := tok/ow*p.K, tok%ow*p.K
		for ch := range p.C {
			var s float64
			for y := y0; y < y0+p.K; y++ {
				for x := x0; x < x0+p.K; x++ {
					s += float64(src[(y*p.W+x)*p.C+ch])
				}
			}
			dst[tok*p.C+ch] = float32(s / float64(p.K*p.K))
		}
	}
	return nil
}
