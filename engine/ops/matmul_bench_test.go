package ops

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// benchMul measures W x for a rows x cols weight of typ and n activation
// columns on the default device (no validation layer), reporting weight
// bytes read per second (GB/s, each weight read once per dispatch) and
// multiply-adds (GFLOP/s, 2*rows*cols*n per op). One op is one submit.
func benchMul(b *testing.B, typ gguf.GGMLType, rows, cols, n int, tiled bool) {
	benchMulOpts(b, typ, rows, cols, n, mulOpts{tiled: tiled})
}

// benchMulOpts is benchMul with mulMat's options.
func benchMulOpts(b *testing.B, typ gguf.GGMLType, rows, cols, n int, o mulOpts) {
	benchMulSetup(b, typ, rows, cols, n, o, nil)
}

// benchMulSetup is benchMulOpts with a function that sets the kernels up
// before the first product.
func benchMulSetup(b *testing.B, typ gguf.GGMLType, rows, cols, n int, o mulOpts, setup func(*Kernels)) {
	d, err := vk.Open(vk.Options{})
	if err != nil {
		b.Skipf("no Vulkan device: %v", err)
	}
	defer d.Close()
	k := New(d)
	defer k.Close()
	if setup != nil {
		setup(k)
	}
	r := rand.New(rand.NewPCG(1, 2))
	w := randomWeights(r, typ, rows, cols)
	wb, err := d.NewBuffer(uint64(len(w)), vk.DeviceBuffer)
	if err != nil {
		b.Fatal(err)
	}
	xb, err := d.NewBuffer(uint64(4*n*cols), vk.DeviceBuffer)
	if err != nil {
		b.Fatal(err)
	}
	yb, err := d.NewBuffer(uint64(4*n*rows), vk.DeviceBuffer)
	if err != nil {
		b.Fatal(err)
	}
	if err := wb.Write(0, w); err != nil {
		b.Fatal(err)
	}
	if err := xb.Write(0, f32Bytes(randomVector(r, n*cols))); err != nil {
		b.Fatal(err)
	}
	wt := Weight{Type: typ, Rows: rows, Cols: cols, Data: wb.All()}
	run := func() {
		c, err := d.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if err := k.mulMat(c, wt, xb.All(), n, yb.All(), o); err != nil {
			c.Abort()
			b.Fatal(err)
		}
		if err := c.Submit(); err != nil {
			b.Fatal(err)
		}
	}
	run() // create the pipeline outside the timing
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		run()
	}
	b.StopTimer() // ns/op must not include the device teardown below
	// Process CPU time per op: on a CPU device (lavapipe) the kernels' own
	// cost, less sensitive than wall time to other load on the machine.
	b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op")
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(len(w))*float64(b.N)/s/1e9, "GB/s")
	b.ReportMetric(2*float64(rows)*float64(cols)*float64(n)*float64(b.N)/s/1e9, "GFLOP/s")
}

// BenchmarkMatVec is the decode step: a 1024 x 1024 weight times 1, 3 and
// 8 activation columns, per weight format.
func BenchmarkMatVec(b *testing.B) {
	for _, typ := range weightTypes {
		for _, n := range []int{1, 3, 8} {
			b.Run(fmt.Sprintf("%v/n=%d", typ, n), func(b *testing.B) { benchMul(b, typ, 1024, 1024, n, false) })
		}
	}
}

// BenchmarkMatMul is prompt processing: a 1024 x 1024 weight times 64
// activation columns, per weight format; n=8 compares with BenchmarkMatVec
// (MulMat's crossover).
func BenchmarkMatMul(b *testing.B) {
	for _, typ := range weightTypes {
		for _, n := range []int{8, 64} {
			b.Run(fmt.Sprintf("%v/n=%d", typ, n), func(b *testing.B) { benchMul(b, typ, 1024, 1024, n, true) })
		}
	}
}

// BenchmarkMatVecVocab is a tiny model's output projection at decode: a
// 50257 x 256 weight (many short rows) times one activation column.
func BenchmarkMatVecVocab(b *testing.B) {
	for _, typ := range []gguf.GGMLType{gguf.TypeQ8_0, gguf.TypeF16} {
		b.Run(typ.String(), func(b *testing.B) { benchMul(b, typ, 50257, 256, 1, false) })
	}
}

// BenchmarkMatVecRows is a decode batch of 1, 8 and 16 sequences through
// the matrices of a small model (../shared/fixtures/models/llama-spm-256x4:
// 256 wide, FFN 768, 4 of 8 heads for keys and values, 8000 tokens) in
// Q8_0.
func BenchmarkMatVecRows(b *testing.B) {
	for _, sh := range [][2]int{{8000, 256}, {256, 256}, {128, 256}, {768, 256}, {256, 768}} {
		for _, n := range []int{1, 8, 16} {
			b.Run(fmt.Sprintf("%dx%d/n=%d", sh[0], sh[1], n), func(b *testing.B) { benchMul(b, gguf.TypeQ8_0, sh[0], sh[1], n, false) })
			// The same with the weights in a storage buffer (the _xu
			// variants, without the _xt variants' texel fetches), and
			// the activations too (neither the uniform loads).
			b.Run(fmt.Sprintf("%dx%d/n=%d/xu", sh[0], sh[1], n), func(b *testing.B) {
				benchMulOpts(b, gguf.TypeQ8_0, sh[0], sh[1], n, mulOpts{noTexel: true})
			})
			b.Run(fmt.Sprintf("%dx%d/n=%d/ssbo", sh[0], sh[1], n), func(b *testing.B) {
				benchMulOpts(b, gguf.TypeQ8_0, sh[0], sh[1], n, mulOpts{noUniform: true})
			})
			// The integer-dot path (GPUs; forced here where the device
			// has shaderIntegerDotProduct), the quantization included.
			b.Run(fmt.Sprintf("%dx%d/n=%d/idot", sh[0], sh[1], n), func(b *testing.B) {
				benchMulSetup(b, gguf.TypeQ8_0, sh[0], sh[1], n, mulOpts{}, benchIntDot(b, sh[1], n))
			})
		}
	}
}

// benchIntDot returns a benchMulSetup function that turns the integer-dot
// path on with a scratch for n columns of cols, skipping where the device
// has no shaderIntegerDotProduct.
func benchIntDot(b *testing.B, cols, n int) func(*Kernels) {
	return func(k *Kernels) {
		k.SetIntegerDot(true)
		if !k.IntegerDot() {
			b.Skipf("%s has no shaderIntegerDotProduct", k.dev.Info().Name)
		}
		sb, err := k.dev.NewBuffer(4*q8Words(cols)*uint64(n), vk.DeviceBuffer)
		if err != nil {
			b.Fatal(err)
		}
		if err := k.SetQ8Scratch(sb.All()); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime returns the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMulMatWide is prompt processing through a 1024 x 1024 and a
// 2048 x 2048 (1B-class) weight at 64 and 256 activation columns: the tiled
// kernel against matvec passes of MatVecMaxCols columns (CPU devices) or
// gpuMatVecPass (GPUs), for MulMat's choice between them.
func BenchmarkMulMatWide(b *testing.B) {
	for _, typ := range []gguf.GGMLType{gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeF16} {
		for _, dim := range []int{1024, 2048} {
			for _, n := range []int{64, 256} {
				for _, tiled := range []bool{true, false} {
					kind := "passes"
					if tiled {
						kind = "tiled"
					}
					b.Run(fmt.Sprintf("%v/%dx%d/n=%d/%s", typ, dim, dim, n, kind), func(b *testing.B) { benchMul(b, typ, dim, dim, n, tiled) })
				}
			}
		}
	}
}
