package engine

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/testseed"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// testNet is a small Net that calls every op of a vision tower and
// projector: an 8x8 image of 3 planes in 4x4 patches, a class token
// appended, position embeddings (f16), one pre-norm block, then the
// patch rows pooled and pixel-shuffled into one output row.
type testNet struct {
	Patch, PatchB, Class, Pos *Tensor
	LN, LNB, Q, Up, Down      *Tensor
	Proj                      *Tensor
}

func (n *testNet) Shape() NetShape { return NetShape{Rows: 5, OutRows: 1, OutCols: 16} }

func (n *testNet) Forward(g Graph) Act {
	x := g.Im2Col(g.Input(3, 64), ops.Im2ColParams{C: 3, H: 8, W: 8, P: 4})
	x = g.MatMul(n.Patch, x)
	g.AddBias(x, n.PatchB)
	x = g.AppendRows(x, n.Class)
	g.Add(x, g.EmbedPositions(n.Pos))
	g.Layer()
	h := g.LayerNorm(x, n.LN, n.LNB, 1e-5)
	q := g.MatMul(n.Q, h)
	g.Add(x, g.Attention(q, h, h, Attn{Kind: Bidirectional, Heads: 2, KVHeads: 2, HeadDim: 8, Scale: 0.35}))
	u := g.MatMul(n.Up, x)
	g.QuickGELU(u)
	g.SiLU(u)
	g.Add(x, g.MatMul(n.Down, u))
	s := g.SliceRows(x, 0, 4)
	grid := ops.PoolParams{H: 2, W: 2, C: 16, K: 2}
	y := g.MatMul(n.Proj, g.PixelShuffle(s, grid))
	g.Add(y, g.AvgPool(s, grid))
	g.GELU(y)
	return y
}

func testTensor(rng *rand.Rand, name string, t gguf.GGMLType, dims ...uint64) *Tensor {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	data := make([]byte, n*4)
	for i := range n {
		v := float32(rng.NormFloat64() * 0.3)
		if t == gguf.TypeF16 {
			binary.LittleEndian.PutUint16(data[2*i:], ops.F16FromF32(v))
		} else {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
	}
	if t == gguf.TypeF16 {
		data = data[:2*n]
	}
	return &Tensor{Name: name, Type: t, Dims: dims, Data: data}
}

// TestNetGPUMatchesCPU runs a Net on the GPU graph and on the CPU
// reference over the same random weights and input, on a UMA device and
// on one that stages its inputs and read-backs as a discrete GPU does.
func TestNetGPUMatchesCPU(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	for _, tc := range []struct {
		name string
		opts vk.Options
	}{{"uma", vk.Options{}}, {"staging", vk.Options{ForceStaging: true}}} {
		t.Run(tc.name, func(t *testing.T) { runTestNet(t, vktest.Open(t, tc.opts)) })
	}
}

func runTestNet(t *testing.T, dev *vk.Device) {
	rng := testseed.Rand(t, 0)
	f32, f16 := gguf.TypeF32, gguf.TypeF16
	net := &testNet{
		Patch: testTensor(rng, "patch", f16, 48, 16), PatchB: testTensor(rng, "patch.bias", f32, 16),
		Class: testTensor(rng, "class", f32, 16), Pos: testTensor(rng, "pos", f16, 16, 5),
		LN: testTensor(rng, "ln", f32, 16), LNB: testTensor(rng, "ln.bias", f32, 16),
		Q: testTensor(rng, "q", f32, 16, 16), Up: testTensor(rng, "up", f16, 16, 24), Down: testTensor(rng, "down", f32, 24, 16),
		Proj: testTensor(rng, "proj", f32, 64, 16),
	}
	w := NetWeights("the test net", net)
	gpu, err := NewGPUNet(dev, w, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	cpu, err := NewCPUNet(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Run(make([]float32, 10)); err == nil {
		t.Errorf("GPUNet.Run(10 values) = nil error, want one (the net reads 192)")
	}
	for round := range 2 {
		in := make([]float32, 3*64)
		for i := range in {
			in[i] = float32(rng.NormFloat64())
		}
		got, err := gpu.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := cpu.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 16 || len(want) != 16 {
			t.Fatalf("round %d: Run gave %d (GPU) and %d (CPU) values, want 16", round, len(got), len(want))
		}
		// f32 kernels against f64 sums over tens of terms.
		e := maxRelError(got, want)
		t.Logf("round %d: relative error %.2g", round, e)
		if e > 1e-5 || math.IsNaN(e) {
			t.Errorf("round %d: GPU vs CPU reference: relative error %.3g", round, e)
		}
	}
	vktest.Check(t, dev)
}
