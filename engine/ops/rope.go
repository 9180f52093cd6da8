package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// RoPEParams describe a RoPE dispatch over rows of [Heads][HeadDim] f32.
type RoPEParams struct {
	Rows, Heads, HeadDim int
	// RotDims is the number of leading dimensions rotated (partial rotary);
	// 0 means HeadDim. Even, at most HeadDim.
	RotDims int
	// NeoX pairs element j with j+RotDims/2 (GPT-NeoX, Qwen, Phi, ...);
	// otherwise pairs are (2j, 2j+1) (LLaMA in GGUF's layout).
	NeoX bool
	// FreqBase is the rope theta (10000 for LLaMA 1/2).
	FreqBase float32
	// FreqScale multiplies positions (linear scaling: 1/factor); 0 means 1.
	FreqScale float32
	// AttnFactor multiplies cos and sin (LongRoPE, YaRN); 0 means 1.
	AttnFactor float32
	// ExtFactor != 0 turns on YaRN: the angle of pair j mixes the scaled
	// and the unscaled angle by ramp(j) * ExtFactor, ramp falling from 1 to
	// 0 over CorrDims, and the magnitude grows by 1 + 0.1 ln(1/FreqScale)
	// (the reference's rope_yarn).
	ExtFactor float32
	CorrDims  [2]float32
}

// RoPEPush mirrors the push-constant block of rope.comp.
type RoPEPush struct {
	Rows, Heads, HeadDim, RotDims uint32
	FreqBase, FreqScale           float32
	HasFactors                    uint32
	AttnFactor, ExtFactor         float32
	Corr0, Corr1                  float32
}

func (p *RoPEParams) norm() (RoPEParams, error) {
	q := *p
	if q.RotDims == 0 {
		q.RotDims = q.HeadDim
	}
	if q.FreqScale == 0 {
		q.FreqScale = 1
	}
	if q.AttnFactor == 0 {
		q.AttnFactor = 1
	}
	if q.Rows <= 0 || q.Heads <= 0 || q.HeadDim <= 0 || q.HeadDim%2 != 0 || q.RotDims%2 != 0 || q.RotDims > q.HeadDim || q.FreqBase <= 0 {
		return q, fmt.Errorf("ops: RoPE: bad parameters %+v", *p)
	}
	return q, nil
}

// RoPE records rotary position embedding of src into dst (may be the same
// range): rows x heads x headDim f32, row r at position pos[r] (int32).
// factors, when it has a buffer, holds RotDims/2 f32 frequency factors that
// divide the angles (LLaMA 3 "rope_freqs", Phi-3 LongRoPE factors).
func (k *Kernels) RoPE(c *vk.Cmd, dst, src, pos, factors vk.Range, p RoPEParams) error {
	q, err := p.norm()
	if err != nil {
		return err
	}
	n := uint64(q.Rows * q.Heads * q.HeadDim)
	if err := sized("RoPE", "src", src, 4*n); err != nil {
		return err
	}
	if err := sized("RoPE", "dst", dst, 4*n); err != nil {
		return err
	}
	if err := sized("RoPE", "pos", pos, 4*uint64(q.Rows)); err != nil {
		return err
	}
	push := RoPEPush{Rows: uint32(q.Rows), Heads: uint32(q.Heads), HeadDim: uint32(q.HeadDim), RotDims: uint32(q.RotDims),
		FreqBase: q.FreqBase, FreqScale: q.FreqScale, AttnFactor: q.AttnFactor, ExtFactor: q.ExtFactor, Corr0: q.CorrDims[0], Corr1: q.CorrDims[1]}
	f := k.window(pos, 0, 4*uint64(q.Rows))
	if factors.Buf != nil {
		if err := sized("RoPE", "factors", factors, 4*uint64(q.RotDims/2)); err != nil {
			return err
		}
		f = k.window(factors, 0, 4*uint64(q.RotDims/2))
		push.HasFactors = 1
	}
	if 4*n > k.dev.MaxBinding() {
		return fmt.Errorf("ops: RoPE: %d bytes exceed one binding", 4*n)
	}
	name := "rope_norm_f32"
	if q.NeoX {
		name = "rope_neox_f32"
	}
	pairs := uint32(n / 2)
	return Record(k, c, name, []uint32{k.wg}, k.Groups(ceilDiv(pairs, k.wg)), &push,
		k.window(src, 0, 4*n), k.window(pos, 0, 4*uint64(q.Rows)), f, k.window(dst, 0, 4*n))
}

// RefRoPE is the CPU reference of RoPE (factors may be nil). Angles are
// computed in float64 from float32 inputs.
func RefRoPE(dst, src []float32, pos []int32, factors []float32, p RoPEParams) error {
	q, err := p.norm()
	if err != nil {
		return err
	}
	copy(dst, src[:q.Rows*q.Heads*q.HeadDim])
	for r := 0; r < q.Rows; r++ {
		for h := 0; h < q.Heads; h++ {
			x := src[(r*q.Heads+h)*q.HeadDim:]
			y := dst[(r*q.Heads+h)*q.HeadDim:]
			for j := 0; j < q.RotDims/2; j++ {
				extrap := float64(pos[r]) * math.Pow(float64(q.FreqBase), -float64(2*j)/float64(q.RotDims))
				if factors != nil {
					extrap /= float64(factors[j])
				}
				theta, mscale := float64(q.FreqScale)*extrap, float64(q.AttnFactor)
				if q.ExtFactor != 0 {
					y := (float64(j) - float64(q.CorrDims[0])) / math.Max(0.001, float64(q.CorrDims[1]-q.CorrDims[0]))
					ramp := (1 - math.Min(1, math.Max(0, y))) * float64(q.ExtFactor)
					theta = theta*(1-ramp) + extrap*ramp
					mscale *= 1 + 0.1*math.Log(1/float64(q.FreqScale))
				}
				i0, i1 := 2*j, 2*j+1
				if q.NeoX {
					i0, i1 = j, j+q.RotDims/2
				}
				cs, sn := math.Cos(theta)*mscale, math.Sin(theta)*mscale
				x0, x1 := float64(x[i0]), float64(x[i1])
				y[i0] = float32(x0*cs - x1*sn)
				y[i1] = float32(x0*sn + x1*cs)
			}
		}
	}
	return nil
}
