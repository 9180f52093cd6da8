package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/gguf/quant"
	"github.com/vkllm/vkllm/vk"
)

// The GPU self-check. The kernels take faster paths where the device
// claims a feature (subgroup reductions, integer dot products, a required
// subgroup size, cooperative matrices, 16-bit storage), and a driver that
// claims one but gets it wrong would give wrong answers, silently. The
// self-check runs each claimed path once on a small random problem and
// compares it with the CPU reference; Config.SelfCheck then turns a path
// that fails off for the process (vk.Device.DisableFeatures), so the
// kernels take their portable variant.

// PathCheck is the self-check's result for one feature-gated path.
type PathCheck struct {
	// Path names the path as vkllm devices does ("subgroup-arith").
	Path string
	// Claimed says whether the device claims the feature; a path it does
	// not claim is not run.
	Claimed bool
	// Err is why the path failed (nil: it passed, or was not run).
	Err error
	// Disabled says whether a failure turns the path off (Config.SelfCheck
	// does so); false for a path the kernels have no fallback for
	// (16-bit storage: the KV cache and RoPE's writes need it).
	Disabled bool
}

// Passed reports whether the path ran and matched the CPU reference.
func (p PathCheck) Passed() bool { return p.Claimed && p.Err == nil }

// selfCheckPath is one path: the feature it is gated on, the features a
// failure turns off (none: no fallback), and its check, which returns the
// GPU's result and the CPU reference's with the tolerance relative to the
// reference's largest magnitude.
type selfCheckPath struct {
	name    string
	claimed func(f vk.Features, k *ops.Kernels) bool
	off     vk.Features
	run     func(dev *vk.Device, k *ops.Kernels, rng *rand.Rand) (got, want []float32, tol float64, err error)
}

var selfCheckPaths = []selfCheckPath{
	{"subgroup-arith", func(f vk.Features, _ *ops.Kernels) bool { return f.SubgroupArithmetic }, vk.Features{SubgroupArithmetic: true}, checkSubgroups},
	{"subgroup-size", func(f vk.Features, _ *ops.Kernels) bool { return f.SubgroupSizeControl }, vk.Features{SubgroupSizeControl: true}, checkSubgroupSize},
	{"int-dot", func(f vk.Features, _ *ops.Kernels) bool { return f.IntegerDot }, vk.Features{IntegerDot: true}, checkIntegerDot},
	{"coopmat", func(_ vk.Features, k *ops.Kernels) bool { _, ok := k.CoopMatrixShape(); return ok }, vk.Features{CoopMatrix: true}, checkCoopMatrix},
	{"fp16-storage", func(f vk.Features, _ *ops.Kernels) bool { return f.Storage16 }, vk.Features{}, checkStorage16},
}

// SelfCheck runs each feature-gated path dev claims once on a small random
// problem (seeded: the same every time) and compares it with the CPU
// reference. It changes nothing on dev; see Config.SelfCheck.
func SelfCheck(dev *vk.Device) []PathCheck { return selfCheck(dev, "") }

// selfCheck is SelfCheck with the GPU result of path broken replaced by
// garbage (a test hook standing in for a broken driver).
func selfCheck(dev *vk.Device, broken string) []PathCheck {
	var out []PathCheck
	for _, p := range selfCheckPaths {
		k := ops.New(dev)
		c := PathCheck{Path: p.name, Claimed: p.claimed(dev.Features(), k), Disabled: p.off != vk.Features{}}
		if c.Claimed {
			got, want, tol, err := p.run(dev, k, rand.New(rand.NewPCG(31, uint64(len(out)))))
			if err == nil && p.name == broken {
				for i := range got {
					got[i] = float32(i%7) - 3
				}
			}
			if err == nil {
				err = compareRef(got, want, tol)
			}
			c.Err = err
		}
		k.Close()
		out = append(out, c)
	}
	return out
}

// applySelfCheck turns off the features of the paths that failed.
func applySelfCheck(dev *vk.Device, checks []PathCheck) {
	for i, c := range checks {
		if c.Claimed && c.Err != nil && c.Disabled {
			dev.DisableFeatures(selfCheckPaths[i].off)
		}
	}
}

// compareRef fails when got differs from want by more than tol times
// want's largest magnitude anywhere (or has a NaN).
func compareRef(got, want []float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d results, want %d", len(got), len(want))
	}
	if e := maxRelError(got, want); e > tol || math.IsNaN(e) {
		return fmt.Errorf("differs from the CPU reference by %.3g (relative; tolerance %.3g)", e, tol)
	}
	return nil
}

func randF32(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// scratch holds a check's buffers, closed together.
type scratch struct {
	dev  *vk.Device
	bufs []*vk.Buffer
}

func (s *scratch) f32(v []float32) (vk.Range, error) {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(math.Float32bits(f)), byte(math.Float32bits(f)>>8), byte(math.Float32bits(f)>>16), byte(math.Float32bits(f)>>24)
	}
	return s.bytes(b)
}

func (s *scratch) bytes(b []byte) (vk.Range, error) {
	buf, err := s.dev.NewBuffer(uint64(max(len(b), 4)), vk.DeviceBuffer)
	if err != nil {
		return vk.Range{}, err
	}
	s.bufs = append(s.bufs, buf)
	if len(b) > 0 {
		if err := buf.Write(0, b); err != nil {
			return vk.Range{}, err
		}
	}
	return buf.All(), nil
}

func (s *scratch) read(r vk.Range, n int) ([]float32, error) {
	b := make([]byte, 4*n)
	if err := r.Buf.Read(r.Offset, b); err != nil {
		return nil, err
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return v, nil
}

func (s *scratch) close() {
	for _, b := range s.bufs {
		b.Close()
	}
}

// run records f into one command buffer and submits it.
func (s *scratch) run(f func(c *vk.Cmd) error) error {
	c, err := s.dev.Begin()
	if err != nil {
		return err
	}
	if err := f(c); err != nil {
		return errors.Join(err, c.Submit())
	}
	return c.Submit()
}

// checkSubgroups runs RMSNorm's subgroup-reduction kernel over rows wider
// than the one-row-per-invocation kernel of CPU devices takes, so that
// every device runs the workgroup kernel.
func checkSubgroups(dev *vk.Device, k *ops.Kernels, rng *rand.Rand) ([]float32, []float32, float64, error) {
	const rows, cols = 3, 16400
	k.SetSubgroups(true)
	s := &scratch{dev: dev}
	defer s.close()
	x, w := randF32(rng, rows*cols), randF32(rng, cols)
	src, err := s.f32(x)
	if err != nil {
		return nil, nil, 0, err
	}
	wr, err := s.f32(w)
	if err != nil {
		return nil, nil, 0, err
	}
	dst, err := s.f32(make([]float32, rows*cols))
	if err != nil {
		return nil, nil, 0, err
	}
	if err := s.run(func(c *vk.Cmd) error { return k.RMSNorm(c, dst, src, wr, rows, cols, 1e-5) }); err != nil {
		return nil, nil, 0, err
	}
	got, err := s.read(dst, rows*cols)
	want := make([]float32, rows*cols)
	ops.RefRMSNorm(want, x, w, rows, cols, 1e-5)
	return got, want, 1e-4, err
}

// matvecCheck runs MulMat over a random weight of type t (rows x cols, n
// columns) and returns it with the float reference.
func matvecCheck(dev *vk.Device, k *ops.Kernels, rng *rand.Rand, t gguf.GGMLType, rows, cols, n int, q8 bool) ([]float32, []float32, error) {
	s := &scratch{dev: dev}
	defer s.close()
	wf, x := randF32(rng, rows*cols), randF32(rng, n*cols)
	wq, err := quant.Quantize(t, wf)
	if err != nil {
		return nil, nil, err
	}
	wr, err := s.bytes(wq)
	if err != nil {
		return nil, nil, err
	}
	xr, err := s.f32(x)
	if err != nil {
		return nil, nil, err
	}
	yr, err := s.f32(make([]float32, n*rows))
	if err != nil {
		return nil, nil, err
	}
	if q8 {
		sr, err := s.bytes(make([]byte, k.Q8ScratchBytes(cols, n)))
		if err != nil {
			return nil, nil, err
		}
		if err := k.SetQ8Scratch(sr); err != nil {
			return nil, nil, err
		}
	}
	w := ops.Weight{Type: t, Rows: rows, Cols: cols, Data: wr}
	if err := k.PrepareWeight(t, rows, cols, false); err != nil {
		return nil, nil, err
	}
	if err := s.run(func(c *vk.Cmd) error { return k.MulMat(c, w, xr, n, yr) }); err != nil {
		return nil, nil, err
	}
	got, err := s.read(yr, n*rows)
	want := make([]float32, n*rows)
	if err == nil {
		err = ops.MatMulRef(t, wq, rows, cols, x, n, want)
	}
	return got, want, err
}

// checkSubgroupSize runs the GPU matvec layout, whose kernels require the
// subgroup size that fills their workgroup.
func checkSubgroupSize(dev *vk.Device, k *ops.Kernels, rng *rand.Rand) ([]float32, []float32, float64, error) {
	k.SetGPUMatVec(true)
	k.SetIntegerDot(false)
	got, want, err := matvecCheck(dev, k, rng, gguf.TypeQ8_0, 37, 256, 3, false)
	return got, want, 1e-4, err
}

// checkIntegerDot runs the integer-dot matvec (Q8_0 weights, Q8_1
// activations); the tolerance covers the activations' quantization.
func checkIntegerDot(dev *vk.Device, k *ops.Kernels, rng *rand.Rand) ([]float32, []float32, float64, error) {
	k.SetIntegerDot(true)
	got, want, err := matvecCheck(dev, k, rng, gguf.TypeQ8_0, 37, 256, 3, true)
	return got, want, 2e-2, err
}

// checkCoopMatrix runs the cooperative-matrix matmul on f16 weights, with
// more columns than the matvec kernels take.
func checkCoopMatrix(dev *vk.Device, k *ops.Kernels, rng *rand.Rand) ([]float32, []float32, float64, error) {
	k.SetCoopMatrix(true)
	k.SetIntegerDot(false)
	got, want, err := matvecCheck(dev, k, rng, gguf.TypeF16, 128, 128, 80, false)
	return got, want, 2e-3, err
}

// checkStorage16 converts f32 to f16 and back through 16-bit storage
// buffers: the results must be the f32 values rounded to f16.
func checkStorage16(dev *vk.Device, k *ops.Kernels, rng *rand.Rand) ([]float32, []float32, float64, error) {
	const n = 1000
	s := &scratch{dev: dev}
	defer s.close()
	x := randF32(rng, n)
	src, err := s.f32(x)
	if err != nil {
		return nil, nil, 0, err
	}
	half, err := s.bytes(make([]byte, 2*n))
	if err != nil {
		return nil, nil, 0, err
	}
	dst, err := s.f32(make([]float32, n))
	if err != nil {
		return nil, nil, 0, err
	}
	err = s.run(func(c *vk.Cmd) error {
		if err := k.Copy(c, half, ops.F16, src, ops.F32, n); err != nil {
			return err
		}
		c.Barrier()
		return k.Copy(c, dst, ops.F32, half, ops.F16, n)
	})
	if err != nil {
		return nil, nil, 0, err
	}
	got, err := s.read(dst, n)
	want := make([]float32, n)
	for i, v := range x {
		want[i] = ops.F32FromF16(ops.F16FromF32(v))
	}
	return got, want, 1e-6, err
}
