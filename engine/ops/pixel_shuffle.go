package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/vk"
)

// PixelShufflePush mirrors the push-constant block of pixel_shuffle.comp.
type PixelShufflePush struct {
	H, W, C, K uint32
}

// PixelShuffle records the merge of each K x K square of the token grid src
// ([H*W][C] f32) into one token of K*K*C values: dst is [Tokens][K*K*C],
// output token (by, bx) at row by*(W/K)+bx, its value dy*K*C + dx*C + ch
// being channel ch of input token (by*K+dy, bx*K+dx). This is Idefics3's
// pixel shuffle (the reference's build_patch_merge_permute).
func (k *Kernels) PixelShuffle(c *vk.Cmd, dst, src vk.Range, p PoolParams) error {
	if err := p.check("PixelShuffle"); err != nil {
		return err
	}
	n := uint64(p.H * p.W * p.C)
	if err := sized("PixelShuffle", "src", src, 4*n); err != nil {
		return err
	}
	if err := sized("PixelShuffle", "dst", dst, 4*n); err != nil {
		return err
	}
	if 4*n > k.dev.MaxBinding() {
		return fmt.Errorf("ops: PixelShuffle: %d values exceed one binding", n)
	}
	push := PixelShufflePush{H: uint32(p.H), W: uint32(p.W), C: uint32(p.C), K: uint32(p.K)}
	return Record(k, c, "pixel_shuffle_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(n), k.wg)), &push,
		k.window(src, 0, 4*n), k.window(dst, 0, 4*n))
}

// RefPixelShuffle is the CPU reference of PixelShuffle.
func RefPixelShuffle(dst, src []float32, p PoolParams) error {
	if err := p.check("PixelShuffle"); err != nil {
		return err
	}
	ow, cols := p.W/p.K, p.K*p.K*p.C
	for tok := range p.Tokens() {
		for col := range cols {
			dy, dx, ch := col/(p.K*p.C), col/p.C%p.K, col%p.C
			y, x := tok/ow*p.K+dy, tok%ow*p.K+dx
			dst[tok*cols+col] = src[(y*p.W+x)*p.C+ch]
		}
	}
	return nil
}
