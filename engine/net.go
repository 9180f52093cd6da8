package engine

import (
	"errors"
	"fmt"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// Net is a network written against Graph that is not a text model: a
// vision tower and projector (engine/vision). Its pass maps one input of
// f32 values (Graph.Input) to rows of output and sees one sequence of
// Shape().Rows rows: EmbedPositions reads the positions 0..Rows-1, and
// Bidirectional attention lets every row see every other. Like an
// architecture, a Net is a pointer to a struct whose exported *Tensor
// fields (in nested structs and slices of structs too) are its weights
// (see BindTensors).
type Net interface {
	// Shape returns the sizes of the pass; they never change.
	Shape() NetShape
	// Forward records the pass on g and returns its output,
	// [OutRows][OutCols]. It calls Layer before each block, as the
	// architectures do.
	Forward(g Graph) Act
}

// NetShape is the sizes of a Net's pass.
type NetShape struct {
	Rows             int // the rows of its sequence (an image's patches)
	OutRows, OutCols int // its output
}

// BindTensors fills the *Tensor fields of the struct dst points to from f
// by their gguf tags, as the architectures' loaders do: a field tagged
// gguf:"name" (or "name,optional") gets the tensor prefix+name, and a
// slice of structs tagged gguf:"blk" (made by the caller) gets the blocks
// prefix+"blk.N.". A missing required tensor and a weight type the
// kernels do not read are errors naming the tensor.
func BindTensors(f *gguf.File, prefix string, dst any) error { return bindTensors(f, prefix, dst) }

// NetWeights lists the weights of net and numbers them, as LoadWeights
// does an architecture's, for NewGPUNet and NewCPUNet; name names the net
// in errors ("the gemma3 projector"). Call it once per Net, before making
// its runners: they read the numbering, and may run on other goroutines.
func NetWeights(name string, net Net) *Weights {
	return &Weights{Arch: name, Tensors: collectTensors(net), net: net}
}

// netSeq returns the positions of a Net's sequence of rows rows and each
// row's sequence end (Bidirectional attention's inputs).
func netSeq(rows int) (pos, ends []int32) {
	pos, ends = make([]int32, rows), make([]int32, rows)
	for i := range pos {
		pos[i], ends[i] = int32(i), int32(rows)
	}
	return pos, ends
}

func checkNet(w *Weights) (Net, NetShape, error) {
	if w.net == nil {
		return nil, NetShape{}, errors.New("BUG: engine: weights not made by NetWeights")
	}
	s := w.net.Shape()
	if s.Rows <= 0 || s.OutRows <= 0 || s.OutCols <= 0 || s.Rows > 1<<16 || s.OutRows > 1<<16 {
		return nil, s, fmt.Errorf("BUG: engine: %s: a pass of %d rows giving %d x %d values", w.Arch, s.Rows, s.OutRows, s.OutCols)
	}
	return w.net, s, nil
}

// GPUNet is a Net whose weights live on a Vulkan device. It is a GPUModel
// of one fixed batch: Run records the pass through the architectures' GPU
// graph (gpuGraph) into one command buffer, the sequence's positions and
// ends in the model's step inputs and the input values copied from a
// host-visible buffer, then one submit, one fence wait and one read-back of
// the output from the hidden-state buffer. Like its device, it is used
// from one goroutine at a time.
type GPUNet struct {
	m   *GPUModel
	net Net
	s   NetShape
	in  *vk.Buffer // Graph.Input's values, host-visible (nil: the net reads none)
}

// NewGPUNet uploads the weights w (from NetWeights) to dev and reserves
// the activations of one pass, after checking that they fit the device
// memory left (free: the bytes other models left, 0 for the whole
// device). progress, when set, is called as the weights upload. The file
// the weights come from may be closed afterwards.
func NewGPUNet(dev *vk.Device, w *Weights, free int64, progress func(done, total int64)) (*GPUNet, error) {
	net, s, err := checkNet(w)
	if err != nil {
		return nil, err
	}
	rows := max(s.Rows, s.OutRows)
	m := &GPUModel{
		o:   Options{Arch: w.Arch, Embd: s.OutCols, CtxTrain: s.Rows, Encoder: true},
		cfg: GPUConfig{CtxSize: s.Rows, Slots: 1, BatchSize: rows, PageSize: ops.DefaultPageSize, Progress: progress},
		dev: dev, k: ops.New(dev), kept: map[keptKey]*keptGraph{},
	}
	// A Net's products are wide (an image's patches), so the integer-dot
	// matvec path would only quantize the activations of a rare narrow
	// one: the float kernels throughout.
	m.k.SetIntegerDot(false)
	n := &GPUNet{m: m, net: net, s: s}
	// A dry run sizes the activations and the input and lists the matrix
	// shapes to compile.
	m.g = gpuGraph{m: m, shapes: map[matShape]bool{}, slotOf: map[uint64]int{}, fusedKinds: map[*Tensor]uint8{}}
	if err := n.pass(nil); err != nil {
		m.k.Close()
		return nil, err
	}
	need := m.g.actBytes() + int64(m.g.inputBytes) + 4*int64(rows*s.OutCols)
	for _, t := range w.Tensors {
		need += int64(len(t.Data))
	}
	if free <= 0 {
		free = deviceMemory(dev)
	}
	if need > free {
		m.k.Close()
		return nil, fmt.Errorf("engine: %s needs %s of device memory (its weights and the activations of one pass) but %s has %s left",
			w.Arch, formatBytes(need), dev.Info().Name, formatBytes(free))
	}
	if err := n.load(w); err != nil {
		m.Close()
		return nil, err
	}
	return n, nil
}

// load uploads the weights and reserves the pass's buffers and inputs.
func (n *GPUNet) load(w *Weights) error {
	m := n.m
	if err := m.upload(w); err != nil {
		return err
	}
	if err := m.reserve(); err != nil {
		return err
	}
	if m.g.inputBytes > 0 {
		var err error
		if n.in, err = m.newBuffer(m.g.inputBytes, vk.HostBuffer); err != nil {
			return fmt.Errorf("engine: the input of %s: %w", w.Arch, err)
		}
		m.g.input = n.in.Range(0, m.g.inputBytes)
	}
	// The sequence is the same every pass: its inputs are written once.
	pos, ends := netSeq(n.s.Rows)
	if err := m.in.Write(m.inOff[inPos], int32Bytes(pos)); err != nil {
		return err
	}
	return m.in.Write(m.inOff[inSeqEnd], int32Bytes(ends))
}

// pass records the pass into c (nil: the dry run) and delivers its output
// to the hidden-state buffer.
func (n *GPUNet) pass(c *vk.Cmd) error {
	g := &n.m.g
	g.start(c, passShape{n: n.s.Rows, hidden: n.s.OutRows}, n.s.Rows)
	out := n.net.Forward(g)
	g.Hidden(out)
	if g.err == nil && (out.Rows != n.s.OutRows || out.Cols != n.s.OutCols) {
		g.fail(fmt.Errorf("BUG: engine: %s gave %d x %d values, want %d x %d", n.m.o.Arch, out.Rows, out.Cols, n.s.OutRows, n.s.OutCols))
	}
	return g.err
}

// Run runs the pass on the input values in and returns its output,
// [OutRows][OutCols] row-major.
func (n *GPUNet) Run(in []float32) ([]float32, error) {
	m := n.m
	if 4*uint64(len(in)) != m.g.inputBytes {
		return nil, fmt.Errorf("engine: %s: %d input values, want %d", m.o.Arch, len(in), m.g.inputBytes/4)
	}
	if n.in != nil {
		copy(n.in.Mapped(), float32Bytes(in))
	}
	c, err := m.dev.Begin()
	if err != nil {
		return nil, err
	}
	if err := n.pass(c); err != nil {
		c.Abort()
		return nil, err
	}
	if err := c.Submit(); err != nil {
		return nil, err
	}
	out := make([]float32, n.s.OutRows*n.s.OutCols)
	copy(float32Bytes(out), m.hidden.Mapped())
	return out, nil
}

// DeviceBytes returns the device memory the net holds.
func (n *GPUNet) DeviceBytes() int64 {
	var total int64
	for _, b := range n.m.bufs {
		total += int64(b.Size())
	}
	return total
}

// Close frees the net's device memory and pipelines; it must not be used
// afterwards. The device stays open.
func (n *GPUNet) Close() { n.m.Close() }

// CPUNet is the plain-Go reference of a Net: the architectures' CPU graph
// (cpuGraph) over its weights dequantized to f32, sums in f64. It is slow
// and exists to check the GPU (tests). Run may be called from several
// goroutines at once.
type CPUNet struct {
	m         *CPUModel
	net       Net
	s         NetShape
	pos, ends []int32
}

// NewCPUNet dequantizes the weights w (from NetWeights); the file they
// come from may be closed afterwards.
func NewCPUNet(w *Weights) (*CPUNet, error) {
	net, s, err := checkNet(w)
	if err != nil {
		return nil, err
	}
	m := &CPUModel{o: Options{Arch: w.Arch, Embd: s.OutCols, Encoder: true}, slots: 1, ctx: s.Rows, w: make([][]float32, len(w.Tensors))}
	for i, t := range w.Tensors {
		if m.w[i], err = dequant(t); err != nil {
			return nil, err
		}
	}
	n := &CPUNet{m: m, net: net, s: s}
	n.pos, n.ends = netSeq(s.Rows)
	return n, nil
}

// Run runs the pass on the input values in and returns its output,
// [OutRows][OutCols] row-major.
func (n *CPUNet) Run(in []float32) ([]float32, error) {
	g := &cpuGraph{m: n.m, b: Batch{Pos: n.pos}, ends: n.ends, in: in}
	out := n.net.Forward(g)
	if g.err != nil {
		return nil, g.err
	}
	if out.Rows != n.s.OutRows || out.Cols != n.s.OutCols {
		return nil, fmt.Errorf("BUG: engine: %s gave %d x %d values, want %d x %d", n.m.o.Arch, out.Rows, out.Cols, n.s.OutRows, n.s.OutCols)
	}
	g.Hidden(out)
	return g.hidden, nil
}
