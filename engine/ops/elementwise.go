package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// BinaryPush mirrors the push-constant block of binary.comp.
type BinaryPush struct {
	N   uint32 // elements in this dispatch
	NB  uint32 // elements of b (b repeats every NB elements)
	Off uint32 // index of the dispatch's first element in the tensor
}

// UnaryPush mirrors the push-constant block of unary.comp.
type UnaryPush struct {
	N uint32
	S float32
}

// CountPush is the push-constant block of kernels that take only an element
// count (swiglu.comp, copy.comp).
type CountPush struct {
	N uint32
}

// FillPush mirrors the push-constant block of fill.comp.
type FillPush struct {
	N     uint32
	Value float32
}

// chunks calls f for consecutive element ranges [off, off+cnt) of n elements
// such that cnt*maxElem bytes fit one binding and every chunk starts at a
// multiple of 64 elements (so at 256-byte-aligned offsets for 4-byte
// elements, 128 for 2-byte ones).
func (k *Kernels) chunks(op string, n uint64, maxElem uint64, f func(off, cnt uint64) error) error {
	if n == 0 {
		return fmt.Errorf("ops: %s: no elements", op)
	}
	if n > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %d elements exceed 32-bit indexing", op, n)
	}
	per := k.elemChunk(maxElem)
	for off := uint64(0); off < n; off += per {
		if err := f(off, min(per, n-off)); err != nil {
			return err
		}
	}
	return nil
}

func (k *Kernels) binary(c *vk.Cmd, op, name string, dst, a, b vk.Range, n, nb int) error {
	if n <= 0 || nb <= 0 || nb > n {
		return fmt.Errorf("ops: %s: n %d, nb %d (want 0 < nb <= n)", op, n, nb)
	}
	for _, o := range []struct {
		what string
		r    vk.Range
		n    int
	}{{"dst", dst, n}, {"a", a, n}, {"b", b, nb}} {
		if err := sized(op, o.what, o.r, 4*uint64(o.n)); err != nil {
			return err
		}
	}
	if nb < n && uint64(nb)*4 > k.dev.MaxBinding() {
		return fmt.Errorf("ops: %s: broadcast operand of %d elements exceeds one binding", op, nb)
	}
	return k.chunks(op, uint64(n), 4, func(off, cnt uint64) error {
		bb := k.window(b, 0, 4*uint64(nb))
		push := BinaryPush{N: uint32(cnt), NB: uint32(nb), Off: uint32(off)}
		if nb == n { // same shape: b is chunked with a
			bb = k.window(b, 4*off, 4*cnt)
			push.NB, push.Off = uint32(cnt), 0
		}
		return Record(k, c, name, []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push,
			k.window(a, 4*off, 4*cnt), bb, k.window(dst, 4*off, 4*cnt))
	})
}

// Add records dst[i] = a[i] + b[i % nb] over n f32 elements: nb == n is a
// plain add, nb == cols a bias add over rows. dst may be a.
func (k *Kernels) Add(c *vk.Cmd, dst, a, b vk.Range, n, nb int) error {
	return k.binary(c, "Add", "add_f32", dst, a, b, n, nb)
}

// Mul records dst[i] = a[i] * b[i % nb] over n f32 elements.
func (k *Kernels) Mul(c *vk.Cmd, dst, a, b vk.Range, n, nb int) error {
	return k.binary(c, "Mul", "mul_f32", dst, a, b, n, nb)
}

// MulRows records dst[r][c] = a[r][c] * s[r] over rows rows of cols f32
// values: one scale per row (a gate per token).
func (k *Kernels) MulRows(c *vk.Cmd, dst, a, s vk.Range, rows, cols int) error {
	const op = "MulRows"
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("ops: %s: %d rows of %d", op, rows, cols)
	}
	n := rows * cols
	for _, o := range []struct {
		what string
		r    vk.Range
		n    int
	}{{"dst", dst, n}, {"a", a, n}, {"s", s, rows}} {
		if err := sized(op, o.what, o.r, 4*uint64(o.n)); err != nil {
			return err
		}
	}
	if uint64(rows)*4 > k.dev.MaxBinding() {
		return fmt.Errorf("ops: %s: %d row scales exceed one binding", op, rows)
	}
	return k.chunks(op, uint64(n), 4, func(off, cnt uint64) error {
		push := BinaryPush{N: uint32(cnt), NB: uint32(cols), Off: uint32(off)}
		return Record(k, c, "mul_rows_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push,
			k.window(a, 4*off, 4*cnt), k.window(s, 0, 4*uint64(rows)), k.window(dst, 4*off, 4*cnt))
	})
}

// RefMulRows is the CPU reference of MulRows.
func RefMulRows(dst, a, s []float32, rows, cols int) {
	for i := range rows * cols {
		dst[i] = a[i] * s[i/cols]
	}
}

// RefAdd is the CPU reference of Add.
func RefAdd(dst, a, b []float32, n, nb int) {
	for i := 0; i < n; i++ {
		dst[i] = a[i] + b[i%nb]
	}
}

// RefMul is the CPU reference of Mul.
func RefMul(dst, a, b []float32, n, nb int) {
	for i := 0; i < n; i++ {
		dst[i] = a[i] * b[i%nb]
	}
}

func (k *Kernels) unary(c *vk.Cmd, op, name string, dst, src vk.Range, n int, s float32) error {
	if n <= 0 {
		return fmt.Errorf("ops: %s: %d elements", op, n)
	}
	if err := sized(op, "src", src, 4*uint64(n)); err != nil {
		return err
	}
	if err := sized(op, "dst", dst, 4*uint64(n)); err != nil {
		return err
	}
	return k.chunks(op, uint64(n), 4, func(off, cnt uint64) error {
		push := UnaryPush{N: uint32(cnt), S: s}
		return Record(k, c, name, []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push,
			k.window(src, 4*off, 4*cnt), k.window(dst, 4*off, 4*cnt))
	})
}

// Scale records dst[i] = src[i] * s over n f32 elements (any n: tensors
// larger than one binding are split into chunks). dst may be src.
func (k *Kernels) Scale(c *vk.Cmd, dst, src vk.Range, n int, s float32) error {
	return k.unary(c, "Scale", "scale_f32", dst, src, n, s)
}

// GELU records dst = gelu(src) (tanh approximation, as ggml_gelu).
func (k *Kernels) GELU(c *vk.Cmd, dst, src vk.Range, n int) error {
	return k.unary(c, "GELU", "gelu_f32", dst, src, n, 0)
}

// SiLU records dst = src * sigmoid(src).
func (k *Kernels) SiLU(c *vk.Cmd, dst, src vk.Range, n int) error {
	return k.unary(c, "SiLU", "silu_f32", dst, src, n, 0)
}

// Sigmoid records dst = 1 / (1 + exp(-src)) over n f32 elements (the
// gates of Qwen3.5's linear attention). CPU reference: RefSigmoid.
func (k *Kernels) Sigmoid(c *vk.Cmd, dst, src vk.Range, n int) error {
	return k.unary(c, "Sigmoid", "sigmoid_f32", dst, src, n, 0)
}

// RefScale is the CPU reference of Scale.
func RefScale(dst, src []float32, s float32) {
	for i, v := range src {
		dst[i] = v * s
	}
}

// RefGELU is the CPU reference of GELU (tanh approximation).
func RefGELU(dst, src []float32) {
	for i, v := range src {
		x := float64(v)
		dst[i] = float32(0.5 * x * (1 + math.Tanh(0.7978845608028654*x*(1+0.044715*x*x))))
	}
}

// RefSiLU is the CPU reference of SiLU.
func RefSiLU(dst, src []float32) {
	for i, v := range src {
		dst[i] = float32(float64(v) / (1 + math.Exp(-float64(v))))
	}
}

// RefSigmoid is the CPU reference of Sigmoid.
func RefSigmoid(dst, src []float32) {
	for i, v := range src {
		dst[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
}

// SwiGLU records dst[i] = silu(gate[i]) * up[i] over n f32 elements.
func (k *Kernels) SwiGLU(c *vk.Cmd, dst, gate, up vk.Range, n int) error {
	if n <= 0 {
		return fmt.Errorf("ops: SwiGLU: %d elements", n)
	}
	for _, o := range []struct {
		what string
		r    vk.Range
	}{{"dst", dst}, {"gate", gate}, {"up", up}} {
		if err := sized("SwiGLU", o.what, o.r, 4*uint64(n)); err != nil {
			return err
		}
	}
	return k.chunks("SwiGLU", uint64(n), 4, func(off, cnt uint64) error {
		push := CountPush{N: uint32(cnt)}
		return Record(k, c, "swiglu_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push,
			k.window(gate, 4*off, 4*cnt), k.window(up, 4*off, 4*cnt), k.window(dst, 4*off, 4*cnt))
	})
}

// RefSwiGLU is the CPU reference of SwiGLU.
func RefSwiGLU(dst, gate, up []float32) {
	for i, g := range gate {
		dst[i] = float32(float64(g)/(1+math.Exp(-float64(g)))) * up[i]
	}
}

// ElemType is a tensor element type for Copy.
type ElemType int

// Element types.
const (
	F32 ElemType = iota
	F16
)

func (e ElemType) size() uint64 {
	if e == F16 {
		return 2
	}
	return 4
}

// String returns the type's name in pipeline names ("f32", "f16").
func (e ElemType) String() string {
	if e == F16 {
		return "f16"
	}
	return "f32"
}

// Copy records dst = src over n elements, converting between f32 and f16
// (round to nearest even). f16 needs the device's 16-bit storage feature.
func (k *Kernels) Copy(c *vk.Cmd, dst vk.Range, dt ElemType, src vk.Range, st ElemType, n int) error {
	if n <= 0 {
		return fmt.Errorf("ops: Copy: %d elements", n)
	}
	if (dt == F16 || st == F16) && !k.dev.Features().Storage16 {
		return fmt.Errorf("ops: Copy %v->%v: device lacks 16-bit storage", st, dt)
	}
	if err := sized("Copy", "src", src, st.size()*uint64(n)); err != nil {
		return err
	}
	if err := sized("Copy", "dst", dst, dt.size()*uint64(n)); err != nil {
		return err
	}
	name := "cpy_" + st.String() + "_" + dt.String()
	return k.chunks("Copy", uint64(n), 4, func(off, cnt uint64) error {
		push := CountPush{N: uint32(cnt)}
		return Record(k, c, name, []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push,
			k.window(src, st.size()*off, st.size()*cnt), k.window(dst, dt.size()*off, dt.size()*cnt))
	})
}

// Fill records dst[i] = v over n f32 elements.
func (k *Kernels) Fill(c *vk.Cmd, dst vk.Range, n int, v float32) error {
	if n <= 0 {
		return fmt.Errorf("ops: Fill: %d elements", n)
	}
	if err := sized("Fill", "dst", dst, 4*uint64(n)); err != nil {
		return err
	}
	return k.chunks("Fill", uint64(n), 4, func(off, cnt uint64) error {
		push := FillPush{N: uint32(cnt), Value: v}
		return Record(k, c, "fill_f32", []uint32{k.wg}, k.Groups(ceilDiv(uint32(cnt), k.wg)), &push, k.window(dst, 4*off, 4*cnt))
	})
}

// F16FromF32 converts x to IEEE half precision, rounding to nearest even
// (overflow to infinity, NaN preserved).
func F16FromF32(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case b>>23&0xff == 0xff: // Inf
		return sign | 0x7c00
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - exp)
		h := man >> shift
		rem := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, which is correct (up to Inf)
	}
	return sign | uint16(h)
}

// F32FromF16 converts an IEEE half to float32 exactly.
func F32FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h >> 10 & 0x1f)
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(man) / 1024 / 16384 // man * 2^-24
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}
