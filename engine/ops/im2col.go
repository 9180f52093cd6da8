package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/vk"
)

// Im2ColParams describe an Im2Col dispatch: an image of C planes of H x W
// f32 values cut into P x P patches (H and W multiples of P). RoundF16
// rounds the unfolded values to f16, as the reference does before a
// product with an f16 kernel.
type Im2ColParams struct {
	C, H, W, P int
	RoundF16   bool
}

// Im2ColPush mirrors the push-constant block of im2col.comp.
type Im2ColPush struct {
	C, H, W, P uint32
	Round      uint32
}

// Patches is the number of patches, the rows of the output.
func (p Im2ColParams) Patches() int { return (p.H / p.P) * (p.W / p.P) }

// PatchLen is the values of one patch, the columns of the output.
func (p Im2ColParams) PatchLen() int { return p.C * p.P * p.P }

func (p Im2ColParams) check() error {
	if p.C <= 0 || p.P <= 0 || p.H < p.P || p.W < p.P || p.H%p.P != 0 || p.W%p.P != 0 || p.C*p.H*p.W > 1<<28 {
		return fmt.Errorf("ops: Im2Col: bad parameters %+v (the image sides must be positive multiples of the patch side)", p)
	}
	return nil
}

// Im2Col records the unfolding of the planar image src ([C][H][W] f32)
// into dst ([Patches][C*P*P] f32): patch (py, px) is row py*(W/P)+px and
// holds its pixels in [c][ky][kx] order, so the patch embedding (a
// convolution with stride P) is dst times the kernel matrix
// [out][C*P*P] transposed.
func (k *Kernels) Im2Col(c *vk.Cmd, dst, src vk.Range, p Im2ColParams) error {
	if err := p.check(); err != nil {
		return err
	}
	n := uint64(p.Patches() * p.PatchLen())
	if err := sized("Im2Col", "src", src, 4*uint64(p.C*p.H*p.W)); err != nil {
		return err
	}
	if err := sized("Im2Col", "dst", dst, 4*n); err != nil {
		return err
	}
	if 4*n > k.dev.MaxBinding() {
		return fmt.Errorf("ops: Im2Col: %d values exceed one binding", n)
	}
	push := Im2ColPush{C: uint32(p.C), H: uint32(p.H), W: uint32(p.W), P: uint32(p.P), Round: b2u(p.RoundF16)}
	return Record(k, c, "im2col_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(n), k.wg)), &push,
		k.window(src, 0, 4*uint64(p.C*p.H*p.W)), k.window(dst, 0, 4*n))
}

// RefIm2Col is the CPU reference of Im2Col.
func RefIm2Col(dst, src []float32, p Im2ColParams) error {
	if err := p.check(); err != nil {
		return err
	}
	pw, cols := p.W/p.P, p.PatchLen()
	for patch := range p.Patches() {
		for col := range cols {
			ch, ky, kx := col/(p.P*p.P), col/p.P%p.P, col%p.P
			y, x := patch/pw*p.P+ky, patch%pw*p.P+kx
			v := src[(ch*p.H+y)*p.W+x]
			if p.RoundF16 {
				v = F32FromF16(F16FromF32(v))
			}
			dst[patch*cols+col] = v
		}
	}
	return nil
}
