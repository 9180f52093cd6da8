package ops

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestBinary(t *testing.T) {
	g := newRig(t)
	ops := []struct {
		name string
		gpu  func(c *vk.Cmd, dst, a, b vk.Range, n, nb int) error
		ref  func(dst, a, b []float32, n, nb int)
	}{{"Add", g.k.Add, RefAdd}, {"Mul", g.k.Mul, RefMul}}
	for _, op := range ops {
		for _, sh := range []struct{ n, nb int }{{1, 1}, {1001, 1001}, {7 * 129, 129}, {3 * 4096, 4096}} {
			t.Run(fmt.Sprintf("%s/n=%d/nb=%d", op.name, sh.n, sh.nb), func(t *testing.T) {
				a, b := g.randn(sh.n, 1), g.randn(sh.nb, 1)
				ar, br, dr := g.upF32(a), g.upF32(b), g.buf(4*sh.n)
				g.run(func(c *vk.Cmd) error { return op.gpu(c, dr, ar, br, sh.n, sh.nb) })
				want := make([]float32, sh.n)
				op.ref(want, a, b, sh.n, sh.nb)
				closeTo(t, op.name, g.downF32(dr, sh.n), want, 1e-6)
			})
		}
	}
}

// TestMulRows scales each row by its own factor (a shared expert's gate),
// also in place and over chunked dispatches' offsets.
func TestMulRows(t *testing.T) {
	g := newRig(t)
	for _, sh := range []struct{ rows, cols int }{{1, 1}, {1, 333}, {37, 64}, {5, 4099}} {
		t.Run(fmt.Sprintf("%dx%d", sh.rows, sh.cols), func(t *testing.T) {
			n := sh.rows * sh.cols
			a, s := g.randn(n, 1), g.randn(sh.rows, 2)
			ar, sr, dr := g.upF32(a), g.upF32(s), g.buf(4*n)
			g.run(func(c *vk.Cmd) error { return g.k.MulRows(c, dr, ar, sr, sh.rows, sh.cols) })
			want := make([]float32, n)
			RefMulRows(want, a, s, sh.rows, sh.cols)
			closeTo(t, "MulRows", g.downF32(dr, n), want, 1e-6)
			g.run(func(c *vk.Cmd) error { return g.k.MulRows(c, ar, ar, sr, sh.rows, sh.cols) })
			closeTo(t, "MulRows in place", g.downF32(ar, n), want, 1e-6)
			for r := range sh.rows { // the reference is the definition
				if want[r*sh.cols] != a[r*sh.cols]*s[r] {
					t.Fatalf("RefMulRows row %d: %g, want %g", r, want[r*sh.cols], a[r*sh.cols]*s[r])
				}
			}
		})
	}
	if err := g.k.MulRows(nil, g.buf(16), g.buf(16), g.buf(4), 2, 2); err == nil {
		t.Error("MulRows with 1 scale for 2 rows: no error")
	}
}

func TestUnary(t *testing.T) {
	g := newRig(t)
	ops := []struct {
		name string
		gpu  func(c *vk.Cmd, dst, src vk.Range, n int) error
		ref  func(dst, src []float32)
		tol  float64
	}{
		{"Scale", func(c *vk.Cmd, dst, src vk.Range, n int) error { return g.k.Scale(c, dst, src, n, -0.37) },
			func(dst, src []float32) { RefScale(dst, src, -0.37) }, 1e-6},
		{"GELU", g.k.GELU, RefGELU, 1e-5},
		{"SiLU", g.k.SiLU, RefSiLU, 1e-5},
		{"Sigmoid", g.k.Sigmoid, RefSigmoid, 1e-5},
	}
	for _, op := range ops {
		for _, n := range []int{1, 255, 1003, 70001} {
			t.Run(fmt.Sprintf("%s/%d", op.name, n), func(t *testing.T) {
				x := g.randn(n, 4)
				if n > 8 { // the extremes, where naive tanh/exp overflow
					x[0], x[1], x[2], x[3] = 100, -100, 30, -30
				}
				src, dst := g.upF32(x), g.buf(4*n)
				g.run(func(c *vk.Cmd) error { return op.gpu(c, dst, src, n) })
				want := make([]float32, n)
				op.ref(want, x)
				closeToInput(t, op.name, g.downF32(dst, n), want, x, op.tol)
			})
		}
	}
}

func TestSwiGLU(t *testing.T) {
	g := newRig(t)
	for _, n := range []int{1, 333, 11008 + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			gate, up := g.randn(n, 3), g.randn(n, 1)
			gr, ur, dr := g.upF32(gate), g.upF32(up), g.buf(4*n)
			g.run(func(c *vk.Cmd) error { return g.k.SwiGLU(c, dr, gr, ur, n) })
			want := make([]float32, n)
			RefSwiGLU(want, gate, up)
			closeTo(t, "SwiGLU", g.downF32(dr, n), want, 1e-5)
		})
	}
}

func TestCopyF16(t *testing.T) {
	g := newRig(t)
	if !g.k.dev.Features().Storage16 {
		// Without 16-bit storage the f16 kernels must refuse, not misbehave.
		src, dst := g.upF32([]float32{1}), g.buf(4)
		c, err := g.k.dev.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		if err := g.k.Copy(c, dst, F16, src, F32, 1); err == nil {
			t.Error("Copy f32->f16 without 16-bit storage succeeded, want an error")
		}
		return
	}
	for _, n := range []int{1, 17, 4099} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x := g.randn(n, 10)
			if n > 4 {
				x[0], x[1], x[2], x[3] = 1e-7, 70000, -65504, 2049 // subnormal, overflow, max, tie
			}
			src, half, back := g.upF32(x), g.buf(2*n), g.buf(4*n)
			g.run(func(c *vk.Cmd) error {
				if err := g.k.Copy(c, half, F16, src, F32, n); err != nil {
					return err
				}
				return g.k.Copy(c, back, F32, half, F16, n)
			})
			h := g.downF16(half, n)
			for i := range h {
				if want := F16FromF32(x[i]); h[i] != want {
					t.Fatalf("Copy f32->f16 [%d] of %g = %#04x, want %#04x", i, x[i], h[i], want)
				}
			}
			got := g.downF32(back, n)
			for i := range got {
				if want := F32FromF16(h[i]); math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("Copy f16->f32 [%d] of %#04x = %g, want %g", i, h[i], got[i], want)
				}
			}
		})
	}
}

func TestF16Conversions(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {5.960464477539063e-08, 0x0001}, {2.9802322387695312e-08, 0}, // ties to even at the bottom
		{6.103515625e-05, 0x0400}, {2049, 0x6800}, {2051, 0x6802}, {0.333333343, 0x3555},
	}
	for _, tc := range cases {
		if got := F16FromF32(tc.f); got != tc.h {
			t.Errorf("F16FromF32(%g) = %#04x, want %#04x", tc.f, got, tc.h)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := F32FromF16(uint16(h))
		if math.IsNaN(float64(f)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("F32FromF16(%#04x) = NaN, want a number", h)
			}
			continue
		}
		if back := F16FromF32(f); back != uint16(h) {
			t.Fatalf("F16FromF32(F32FromF16(%#04x) = %g) = %#04x, want the input", h, f, back)
		}
	}
}

// TestScaleOverMaxBinding scales a tensor larger than one storage binding
// (maxStorageBufferRange: 128 MiB on lavapipe), which Scale must split.
func TestScaleOverMaxBinding(t *testing.T) {
	g := newRig(t)
	d := g.k.dev
	n := int(d.Limits().MaxStorageBufferRange/4) + 1_000_003
	if uint64(n)*4 > d.Limits().MaxAllocation {
		t.Fatalf("device cannot allocate %d bytes in one buffer (maxMemoryAllocationSize %d)", n*4, d.Limits().MaxAllocation)
	}
	buf, err := d.NewBuffer(uint64(n)*4, vk.DeviceBuffer)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	val := func(i int) float32 { return float32(i%1021) - 510 }
	host := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(val(i)))
	}
	if err := buf.Write(0, host); err != nil {
		t.Fatal(err)
	}
	var dispatches int
	g.run(func(c *vk.Cmd) error {
		err := g.k.Scale(c, buf.All(), buf.All(), n, 0.5)
		dispatches = c.Dispatches()
		return err
	})
	if dispatches < 2 {
		t.Errorf("Scale over %d bytes recorded %d dispatches, want >= 2 (split per binding)", 4*n, dispatches)
	}
	if err := buf.Read(0, host); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		got := math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:]))
		if want := val(i) * 0.5; got != want {
			t.Fatalf("Scale over %d elements: [%d] = %g, want %g", n, i, got, want)
		}
	}
}
