package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// RMSNormPush mirrors the push-constant block of rms_norm.comp.
type RMSNormPush struct {
	Rows uint32
	Cols uint32
	Eps  float32
}

// LayerNormPush mirrors the push-constant block of layer_norm.comp.
type LayerNormPush struct {
	Rows uint32
	Cols uint32
	Eps  float32
}

// pick returns the subgroup variant sg when the subgroup variants are on,
// else the shared-memory variant name (both constants: no allocation).
func (k *Kernels) pick(name, sg string) string {
	if k.sg {
		return sg
	}
	return name
}

// rowChunks calls f for consecutive groups of rows whose bytes (rowBytes
// each, in the largest operand) fit one binding.
func (k *Kernels) rowChunks(op string, rows int, rowBytes uint64, f func(r0, n int) error) error {
	per := int(k.dev.MaxBinding() / rowBytes)
	if per == 0 {
		return fmt.Errorf("ops: %s: a row of %d bytes exceeds one storage binding (%d bytes)", op, rowBytes, k.dev.MaxBinding())
	}
	if rows > per {
		// Keep chunk offsets aligned for any element size and for per-row
		// outputs (Argmax) too.
		if per >= 64 {
			per &^= 63
		} else {
			for per > 1 && (uint64(per)*rowBytes)%256 != 0 {
				per--
			}
		}
		if (uint64(per)*rowBytes)%k.dev.Limits().MinStorageOffsetAlign != 0 {
			return fmt.Errorf("ops: %s: %d rows of %d bytes cannot be split at aligned offsets", op, rows, rowBytes)
		}
	}
	for r := 0; r < rows; r += per {
		if err := f(r, min(per, rows-r)); err != nil {
			return err
		}
	}
	return nil
}

// RMSNorm records dst[r][i] = src[r][i] / sqrt(mean_i(src[r]^2) + eps),
// times weight[i] when weight has a buffer. src and dst hold rows x cols
// f32 and may be the same range; weight holds cols f32.
func (k *Kernels) RMSNorm(c *vk.Cmd, dst, src, weight vk.Range, rows, cols int, eps float32) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("ops: RMSNorm: shape %dx%d", rows, cols)
	}
	n := uint64(rows) * uint64(cols) * 4
	if err := sized("RMSNorm", "src", src, n); err != nil {
		return err
	}
	if err := sized("RMSNorm", "dst", dst, n); err != nil {
		return err
	}
	name := "rms_norm_f32"
	if weight.Buf != nil {
		if err := sized("RMSNorm", "weight", weight, uint64(cols)*4); err != nil {
			return err
		}
		name = "rms_norm_mul_f32"
	}
	wg := k.wg
	switch {
	case k.rowKernels && cols <= cpuRowsMaxCols: // CPU devices: a row per invocation
		name, wg = "rms_norm_rows_f32", cpuRowsWG
		if weight.Buf != nil {
			name = "rms_norm_mul_rows_f32"
		}
	case name == "rms_norm_f32":
		name = k.pick(name, "rms_norm_f32_sg")
	default:
		name = k.pick(name, "rms_norm_mul_f32_sg")
	}
	rowBytes := uint64(cols) * 4
	return k.rowChunks("RMSNorm", rows, rowBytes, func(r0, nr int) error {
		s := k.window(src, uint64(r0)*rowBytes, uint64(nr)*rowBytes)
		w := s
		if weight.Buf != nil {
			w = k.window(weight, 0, rowBytes)
		}
		push := RMSNormPush{Rows: uint32(nr), Cols: uint32(cols), Eps: eps}
		groups := k.Groups(uint32(nr))
		if wg == cpuRowsWG {
			groups = k.Groups((uint32(nr) + wg - 1) / wg)
		}
		return Record(k, c, name, []uint32{wg}, groups, &push,
			s, w, k.window(dst, uint64(r0)*rowBytes, uint64(nr)*rowBytes))
	})
}

// RefRMSNorm is the CPU reference of RMSNorm (weight may be nil; dst may
// be src), the one the engine's CPU forward pass uses too. The sum of
// squares is accumulated in float64; its mean and the scale are rounded to
// f32 and applied in f32, as ggml's CPU op and the kernel do.
func RefRMSNorm(dst, src, weight []float32, rows, cols int, eps float32) {
	for r := 0; r < rows; r++ {
		x := src[r*cols : (r+1)*cols]
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(float64(float32(s/float64(cols))+eps)))
		y := dst[r*cols : (r+1)*cols]
		for i, v := range x {
			if weight != nil {
				y[i] = v * scale * weight[i]
			} else {
				y[i] = v * scale
			}
		}
	}
}

// LayerNorm records dst[r][i] = (src[r][i] - mean) / sqrt(var + eps) *
// weight[i] + bias[i] (the BERT layer norm; population variance). weight
// and bias hold cols f32; src and dst rows x cols f32.
func (k *Kernels) LayerNorm(c *vk.Cmd, dst, src, weight, bias vk.Range, rows, cols int, eps float32) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("ops: LayerNorm: shape %dx%d", rows, cols)
	}
	n := uint64(rows) * uint64(cols) * 4
	for _, o := range []struct {
		what string
		r    vk.Range
		n    uint64
	}{{"src", src, n}, {"dst", dst, n}, {"weight", weight, uint64(cols) * 4}, {"bias", bias, uint64(cols) * 4}} {
		if err := sized("LayerNorm", o.what, o.r, o.n); err != nil {
			return err
		}
	}
	rowBytes := uint64(cols) * 4
	name := k.pick("layer_norm_f32", "layer_norm_f32_sg")
	return k.rowChunks("LayerNorm", rows, rowBytes, func(r0, nr int) error {
		push := LayerNormPush{Rows: uint32(nr), Cols: uint32(cols), Eps: eps}
		return Record(k, c, name, []uint32{k.wg}, k.Groups(uint32(nr)), &push,
			k.window(src, uint64(r0)*rowBytes, uint64(nr)*rowBytes), k.window(weight, 0, rowBytes), k.window(bias, 0, rowBytes),
			k.window(dst, uint64(r0)*rowBytes, uint64(nr)*rowBytes))
	})
}

// RefLayerNorm is the CPU reference of LayerNorm (dst may be src), the
// one the engine's CPU forward pass uses too: the mean, the variance and
// each normalized value in float64, the weight and bias applied in f32.
func RefLayerNorm(dst, src, weight, bias []float32, rows, cols int, eps float32) {
	for r := 0; r < rows; r++ {
		x := src[r*cols : (r+1)*cols]
		var s float64
		for _, v := range x {
			s += float64(v)
		}
		mean := s / float64(cols)
		var q float64
		for _, v := range x {
			d := float64(v) - mean
			q += d * d
		}
		inv := 1 / math.Sqrt(q/float64(cols)+float64(eps))
		y := dst[r*cols : (r+1)*cols]
		for i, v := range x {
			y[i] = float32((float64(v)-mean)*inv)*weight[i] + bias[i]
		}
	}
}
