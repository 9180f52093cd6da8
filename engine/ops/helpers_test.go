package ops

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vkllm/vkllm/internal/sweep"
	"github.com/vkllm/vkllm/internal/testseed"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// Parallel tests: the tests that compile many kernel variants call
// t.Parallel, each on a device of its own. Lavapipe compiles a pipeline on
// one thread at its first dispatch, so on a cold shader cache two such
// tests keep both cores of a CI machine busy where one left a core idle.
// Tests that count allocations (testing.AllocsPerRun) stay sequential:
// they run before the parallel ones, which would count in their figures.

// NaNBits is the quiet-NaN pattern outputs are poisoned with.
const NaNBits = 0x7fc00bad

// rig is one test's device, kernels and RNG.
type rig struct {
	t *testing.T
	k *Kernels
	r *rand.Rand
}

// newRig opens the validated test device (skipping when there is none) and
// a seeded RNG (internal/testseed: a fixed seed, or $VKLLM_SEED; logged).
func newRig(t *testing.T) *rig {
	t.Helper()
	d := vktest.Open(t, vk.Options{})
	k := New(d)
	t.Cleanup(k.Close) // runs before the device's cleanup (LIFO)
	return &rig{t: t, k: k, r: newRand(t)}
}

func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	return testseed.Rand(t, 0)
}

// randn returns n normal floats times scale.
func (g *rig) randn(n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(g.r.NormFloat64()) * scale
	}
	return x
}

// buf allocates a device buffer of n bytes (at least 4) filled with the NaN
// pattern, so unwritten elements fail comparisons.
func (g *rig) buf(n int) vk.Range {
	g.t.Helper()
	n = max((n+3)&^3, 4)
	b, err := g.k.dev.NewBuffer(uint64(n), vk.DeviceBuffer)
	if err != nil {
		g.t.Fatal(err)
	}
	p := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		binary.LittleEndian.PutUint32(p[i:], NaNBits)
	}
	if err := b.Write(0, p); err != nil {
		g.t.Fatal(err)
	}
	return b.Range(0, uint64(n))
}

// guardCols is how many columns of the NaN pattern the matvec tests keep
// after an output of rows-long columns: a pass runs a bucket of columns
// (colBucket) and must store none past its real ones.
const guardCols = 3

// guardedBuf returns an output of n columns of rows f32, NaN-filled, and
// the guardCols columns after it in the same buffer, for checkUntouched.
func (g *rig) guardedBuf(n, rows int) (out, guard vk.Range) {
	return g.guardedOut(0, nil, n, rows)
}

// guardedOut is guardedBuf for an output lead bytes (a multiple of 4) into
// its buffer, holding y0 (n columns of rows f32) where y0 is not nil.
func (g *rig) guardedOut(lead int, y0 []float32, n, rows int) (out, guard vk.Range) {
	g.t.Helper()
	b := g.buf(lead + 4*(n+guardCols)*rows)
	if y0 != nil {
		if err := b.Buf.Write(b.Offset+uint64(lead), f32Bytes(y0)); err != nil {
			g.t.Fatal(err)
		}
	}
	end := uint64(lead + 4*n*rows)
	return b.Sub(uint64(lead), uint64(4*n*rows)), b.Buf.Range(b.Offset+end, uint64(4*guardCols*rows))
}

// checkUntouched fails the test where r no longer holds the NaN pattern
// everywhere (a kernel stored past its output).
func (g *rig) checkUntouched(what string, r vk.Range) {
	g.t.Helper()
	b := g.downBytes(r, int(r.Size))
	for i := 0; i+4 <= len(b); i += 4 {
		if v := binary.LittleEndian.Uint32(b[i:]); v != NaNBits {
			g.t.Errorf("%s: word %d = %#x, want the untouched NaN pattern %#x", what, i/4, v, uint32(NaNBits))
			return
		}
	}
}

func (g *rig) upF32(x []float32) vk.Range {
	g.t.Helper()
	r := g.buf(4 * len(x))
	if err := r.Buf.Write(r.Offset, f32Bytes(x)); err != nil {
		g.t.Fatal(err)
	}
	return r
}

func (g *rig) upI32(x []int32) vk.Range {
	g.t.Helper()
	r := g.buf(4 * len(x))
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	if err := r.Buf.Write(r.Offset, b); err != nil {
		g.t.Fatal(err)
	}
	return r
}

func (g *rig) upF16(x []uint16) vk.Range {
	g.t.Helper()
	r := g.buf(2 * len(x))
	b := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	if err := r.Buf.Write(r.Offset, b); err != nil {
		g.t.Fatal(err)
	}
	return r
}

func (g *rig) downBytes(r vk.Range, n int) []byte {
	g.t.Helper()
	b := make([]byte, n)
	if err := r.Buf.Read(r.Offset, b); err != nil {
		g.t.Fatal(err)
	}
	return b
}

func (g *rig) downF32(r vk.Range, n int) []float32 {
	b := g.downBytes(r, 4*n)
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

func (g *rig) downU32(r vk.Range, n int) []uint32 {
	b := g.downBytes(r, 4*n)
	x := make([]uint32, n)
	for i := range x {
		x[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return x
}

func (g *rig) downF16(r vk.Range, n int) []uint16 {
	b := g.downBytes(r, 2*n)
	x := make([]uint16, n)
	for i := range x {
		x[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return x
}

// run records f into one graph, submits it and checks validation.
func (g *rig) run(f func(c *vk.Cmd) error) {
	g.t.Helper()
	c, err := g.k.dev.Begin()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := f(c); err != nil {
		c.Abort()
		g.t.Fatal(err)
	}
	if err := c.Submit(); err != nil {
		g.t.Fatal(err)
	}
	vktest.Check(g.t, g.k.dev)
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// closeTo fails unless every got[i] is within tol*(|want[i]| + mean|want|)
// of want[i]: a relative bound with a floor at the tensor's scale, so
// elements near zero do not demand impossible precision. NaN always fails.
func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var mean float64
	for _, w := range want {
		mean += math.Abs(float64(w))
	}
	mean /= float64(max(len(want), 1))
	bad, worst, wi := 0, 0.0, -1
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		d := math.Abs(g - w)
		lim := tol * (math.Abs(w) + mean)
		if math.IsNaN(g) || math.IsInf(g, 0) && !math.IsInf(w, 0) || d > lim {
			if bad == 0 || d/lim > worst || math.IsNaN(g) {
				worst, wi = d/lim, i
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values off; worst [%d] = %g, want %g (tolerance %g relative)", what, bad, len(got), wi, got[wi], want[wi], tol)
	}
}

// closeToInput compares an elementwise op's output with the reference,
// allowing each value an error of tol times (|want| + |input|): the
// rounding of f(x) computed in f32 scales with the input (GELU's 1 + tanh
// cancels to about eps·|x| where the result is near 0), so a bound
// relative to the result alone fails on tiny results.
func closeToInput(t *testing.T, what string, got, want, in []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) || len(in) != len(want) {
		t.Fatalf("%s: %d values and %d inputs, want %d", what, len(got), len(in), len(want))
	}
	bad, worst, wi := 0, 0.0, -1
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		d := math.Abs(g - w)
		lim := tol * (math.Abs(w) + math.Abs(float64(in[i])))
		if math.IsNaN(g) || math.IsInf(g, 0) && !math.IsInf(w, 0) || d > lim {
			if bad == 0 || d/lim > worst || math.IsNaN(g) {
				worst, wi = d/lim, i
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values off; worst [%d] = %g for input %g, want %g (tolerance %g of |want| + |input|)",
			what, bad, len(got), wi, got[wi], in[wi], want[wi], tol)
	}
}

// both runs f with the shared-memory and (where available) subgroup
// variants of the reduction kernels.
func both(t *testing.T, g *rig, f func(t *testing.T)) {
	bothSampled(t, g, 0, f)
}

// bothSampled is both for case i of a sweep: both reductions for case 0
// and under VKLLM_LONG=1 (internal/sweep), otherwise one of them,
// alternating with i.
func bothSampled(t *testing.T, g *rig, i int, f func(t *testing.T)) {
	for j, sg := range []bool{false, true} {
		g.k.SetSubgroups(sg)
		if sg && !g.k.Subgroups() || i > 0 && !sweep.Pick(i, j, 2) {
			continue
		}
		name := "shared"
		if sg {
			name = "subgroup"
		}
		t.Run(name, f)
	}
	g.k.SetSubgroups(true)
}
