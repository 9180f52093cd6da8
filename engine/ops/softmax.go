package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// SoftMaxPush mirrors the push-constant block of softmax.comp.
type SoftMaxPush struct {
	Rows, Cols, MaskRows uint32
	Scale                float32
}

// SoftMax records dst[r] = softmax(src[r]*scale + mask[r % maskRows]) over
// rows x cols f32; maskRows == 0 (mask without a buffer) means no mask.
func (k *Kernels) SoftMax(c *vk.Cmd, dst, src, mask vk.Range, rows, cols, maskRows int, scale float32) error {
	if rows <= 0 || cols <= 0 || maskRows < 0 {
		return fmt.Errorf("ops: SoftMax: shape %dx%d, %d mask rows", rows, cols, maskRows)
	}
	n := 4 * uint64(rows) * uint64(cols)
	if err := sized("SoftMax", "src", src, n); err != nil {
		return err
	}
	if err := sized("SoftMax", "dst", dst, n); err != nil {
		return err
	}
	m := k.window(src, 0, 4*uint64(cols))
	if maskRows > 0 {
		if err := sized("SoftMax", "mask", mask, 4*uint64(maskRows*cols)); err != nil {
			return err
		}
		if 4*uint64(maskRows*cols) > k.dev.MaxBinding() {
			return fmt.Errorf("ops: SoftMax: mask exceeds one binding")
		}
		m = k.window(mask, 0, 4*uint64(maskRows*cols))
	}
	rowBytes := 4 * uint64(cols)
	name := k.pick("soft_max_f32", "soft_max_f32_sg")
	if maskRows > 0 && rows > int(k.dev.MaxBinding()/rowBytes) && maskRows != 1 {
		return fmt.Errorf("ops: SoftMax: a %d-row mask with %d rows larger than one binding", maskRows, rows)
	}
	return k.rowChunks("SoftMax", rows, rowBytes, func(r0, nr int) error {
		push := SoftMaxPush{Rows: uint32(nr), Cols: uint32(cols), MaskRows: uint32(maskRows), Scale: scale}
		return Record(k, c, name, []uint32{k.wg}, k.Groups(uint32(nr)), &push,
			k.window(src, uint64(r0)*rowBytes, uint64(nr)*rowBytes), m, k.window(dst, uint64(r0)*rowBytes, uint64(nr)*rowBytes))
	})
}

// RefSoftMax is the CPU reference of SoftMax (mask nil or maskRows x cols).
func RefSoftMax(dst, src, mask []float32, rows, cols, maskRows int, scale float32) {
	v := make([]float64, cols)
	for r := 0; r < rows; r++ {
		m := math.Inf(-1)
		for i := 0; i < cols; i++ {
			v[i] = float64(src[r*cols+i] * scale)
			if maskRows > 0 {
				v[i] += float64(mask[(r%maskRows)*cols+i])
			}
			m = math.Max(m, v[i])
		}
		var s float64
		for i := range v {
			v[i] = math.Exp(v[i] - m)
			s += v[i]
		}
		for i := range v {
			dst[r*cols+i] = float32(v[i] / s)
		}
	}
}
