package engine

import (
	"fmt"
	"unsafe"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/vk"
)

// GPUConfig sizes what the GPU model reserves at load.
type GPUConfig struct {
	CtxSize   int // positions per sequence slot in the KV cache
	Slots     int // sequence slots (--parallel)
	BatchSize int // most rows in one Forward (prompt chunks are cut to this)
	// Progress, when set, is called as weights are uploaded with the bytes
	// done and the total.
	Progress func(done, total int64)
}

func (c *GPUConfig) fill(o Options) error {
	if c.CtxSize <= 0 {
		c.CtxSize = min(o.CtxTrain, 4096)
	}
	if o.Encoder && c.CtxSize > o.CtxTrain {
		return fmt.Errorf("engine: a context of %d positions; the %s encoder has position embeddings for %d", c.CtxSize, o.Arch, o.CtxTrain)
	}
	if c.Slots <= 0 {
		c.Slots = 1
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 512
	}
	if c.BatchSize > 1<<16 || c.CtxSize > 1<<20 || c.Slots > 1024 {
		return fmt.Errorf("engine: batch %d, context %d or %d slots out of range", c.BatchSize, c.CtxSize, c.Slots)
	}
	return nil
}

// GPUModel is a model whose weights and KV cache live on a Vulkan device.
// Forward records the whole pass into one command buffer: one submit, one
// fence wait, one read-back of the output rows. It is used from one
// goroutine at a time.
type GPUModel struct {
	o     Options
	cfg   GPUConfig
	dev   *vk.Device
	k     *ops.Kernels
	model archModel

	bufs    []*vk.Buffer // everything to close
	weights []ops.Weight // by Tensor.idx
	kCache  []vk.Range   // per layer (decoders)
	vCache  []vk.Range

	// Per-forward scratch, sized for cfg.BatchSize rows.
	acts                               []*vk.Buffer // the activations (see gpuGraph)
	ids, slots, pos, logitRows, seqEnd *vk.Buffer   // int32, host-visible
	logits                             *vk.Buffer   // [BatchSize][Vocab] f32, host-visible
	hidden                             *vk.Buffer   // [BatchSize][Embd] f32, host-visible
	outRows                            []int32      // ForwardInto's scratch: the rows that want output
	seqEnds                            []int32      // ForwardInto's scratch: encoder sequence ends
	g                                  gpuGraph
}

// NewGPUModel uploads w to dev and reserves the KV cache and the scratch of
// the largest batch. It fails, naming both sizes, when that does not fit the
// device's memory.
func NewGPUModel(dev *vk.Device, o Options, w *Weights, cfg GPUConfig) (*GPUModel, error) {
	if err := cfg.fill(o); err != nil {
		return nil, err
	}
	if o.HeadDimV != o.HeadDim {
		return nil, fmt.Errorf("engine: key width %d differs from value width %d; not supported", o.HeadDim, o.HeadDimV)
	}
	m := &GPUModel{o: o, cfg: cfg, dev: dev, k: ops.New(dev), model: w.model}
	// A dry run of the largest batch sizes the activations and lists the
	// matrix shapes to compile.
	m.g = gpuGraph{m: m, shapes: map[matShape]bool{}, slotOf: map[uint64]int{}}
	m.g.start(nil, cfg.BatchSize, cfg.BatchSize, 0)
	m.model.forward(&m.g)
	if m.g.err != nil {
		m.k.Close()
		return nil, m.g.err
	}
	need := m.deviceBytes(w)
	if have := deviceMemory(dev); need > have {
		m.k.Close()
		return nil, fmt.Errorf("engine: the model needs %s of device memory (weights, %d-position KV cache for %d slots, batch scratch) but %s has %s",
			formatBytes(need), cfg.CtxSize, cfg.Slots, dev.Info().Name, formatBytes(have))
	}
	if err := m.upload(w); err != nil {
		m.Close()
		return nil, err
	}
	if err := m.reserve(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// deviceMemory returns the size of the device's largest device-local heap.
func deviceMemory(dev *vk.Device) int64 {
	info := dev.Info()
	return int64(info.DeviceLocalBytes())
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

// kvBytes is the size of one layer's K (or V) cache; encoders keep none.
func (m *GPUModel) kvBytes() int64 {
	if m.o.Encoder {
		return 0
	}
	return int64(m.cfg.Slots) * int64(m.cfg.CtxSize) * int64(m.o.KVHeads*m.o.HeadDim) * 2
}

// deviceBytes estimates all device memory the model takes.
func (m *GPUModel) deviceBytes(w *Weights) int64 {
	var total int64
	for _, t := range w.Tensors {
		total += int64(len(t.Data))
	}
	o, B := m.o, int64(m.cfg.BatchSize)
	total += 2 * int64(o.Layers) * m.kvBytes()
	total += m.g.actBytes() + 4*B*int64(o.Embd+o.Vocab+5)
	return total
}

func (m *GPUModel) newBuffer(size uint64, kind vk.BufferKind) (*vk.Buffer, error) {
	size = (size + 15) &^ 15
	b, err := m.dev.NewBuffer(size, kind)
	if err != nil {
		return nil, err
	}
	m.bufs = append(m.bufs, b)
	return b, nil
}

func (m *GPUModel) upload(w *Weights) error {
	var total, done int64
	for _, t := range w.Tensors {
		total += int64(len(t.Data))
	}
	m.weights = make([]ops.Weight, len(w.Tensors))
	for i, t := range w.Tensors {
		b, err := m.newBuffer(uint64(len(t.Data)), vk.DeviceBuffer)
		if err != nil {
			return fmt.Errorf("engine: tensor %s (%s): %w", t.Name, formatBytes(int64(len(t.Data))), err)
		}
		if err := b.Write(0, t.Data); err != nil {
			return fmt.Errorf("engine: upload %s: %w", t.Name, err)
		}
		m.weights[i] = ops.Weight{Type: t.Type, Rows: t.Rows(), Cols: t.Cols(), Data: b.Range(0, uint64(len(t.Data)))}
		done += int64(len(t.Data))
		if m.cfg.Progress != nil {
			m.cfg.Progress(done, total)
		}
	}
	return m.prepare()
}

// prepare compiles the matrix kernels of every weight shape the dry run
// met, so the first request does not pay for pipeline creation.
func (m *GPUModel) prepare() error {
	for s := range m.g.shapes {
		if err := m.k.PrepareWeight(s.t, s.rows, s.cols, s.add); err != nil {
			return fmt.Errorf("engine: kernels for %v weights of %d columns: %w", s.t, s.cols, err)
		}
	}
	return nil
}

// reserve allocates the KV cache and the batch scratch.
func (m *GPUModel) reserve() error {
	o, B := m.o, uint64(m.cfg.BatchSize)
	if kv := uint64(m.kvBytes()); kv > 0 {
		if kv > m.dev.MaxBinding() {
			return fmt.Errorf("engine: one layer's KV cache (%s for %d slots x %d positions) exceeds the device's largest binding (%s); lower --ctx-size or --parallel",
				formatBytes(int64(kv)), m.cfg.Slots, m.cfg.CtxSize, formatBytes(int64(m.dev.MaxBinding())))
		}
		m.kCache, m.vCache = make([]vk.Range, o.Layers), make([]vk.Range, o.Layers)
		for i := range o.Layers {
			for _, dst := range []*vk.Range{&m.kCache[i], &m.vCache[i]} {
				b, err := m.newBuffer(kv, vk.DeviceBuffer)
				if err != nil {
					return fmt.Errorf("engine: KV cache: %w", err)
				}
				*dst = b.Range(0, kv)
			}
		}
	}
	var err error
	m.acts = make([]*vk.Buffer, len(m.g.slotSize))
	for i, size := range m.g.slotSize {
		if m.acts[i], err = m.newBuffer(size, vk.DeviceBuffer); err != nil {
			return fmt.Errorf("engine: activations (%s): %w", formatBytes(int64(size)), err)
		}
	}
	for _, dst := range []**vk.Buffer{&m.ids, &m.slots, &m.pos, &m.logitRows, &m.seqEnd} {
		if *dst, err = m.newBuffer(4*B, vk.HostBuffer); err != nil {
			return err
		}
	}
	if m.logits, err = m.newBuffer(4*B*uint64(o.Vocab), vk.HostBuffer); err != nil {
		return fmt.Errorf("engine: logits buffer: %w", err)
	}
	if m.hidden, err = m.newBuffer(4*B*uint64(o.Embd), vk.HostBuffer); err != nil {
		return fmt.Errorf("engine: hidden-state buffer: %w", err)
	}
	m.outRows = make([]int32, 0, B)
	m.seqEnds = make([]int32, B)
	return nil
}

// Options returns the model's hyper-parameters.
func (m *GPUModel) Options() Options { return m.o }

// Config returns the sizes the model reserved.
func (m *GPUModel) Config() GPUConfig { return m.cfg }

// Close releases everything on the device. The model must not be used
// afterwards; the device stays open.
func (m *GPUModel) Close() {
	m.k.Close()
	for _, b := range m.bufs {
		b.Close()
	}
	m.bufs = nil
}

// int32Bytes views vals as bytes (no copy).
func int32Bytes(vals []int32) []byte {
	if len(vals) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))
}

// float32Bytes views vals as bytes (no copy).
func float32Bytes(vals []float32) []byte {
	if len(vals) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))
}

// Output receives the results of a forward pass: Logits holds the logits of
// the rows that asked for them ([rows][vocab], in row order) and Hidden the
// final hidden states (after the output norm) of the rows that asked for
// those ([rows][embd], in row order). ForwardInto reslices both within
// their capacity and allocates only when it is too small, so a caller that
// reserves BatchSize rows once never allocates per step.
type Output struct {
	Logits []float32
	Hidden []float32
}

// resize returns s resized to n elements, reusing its memory when it can.
func resize(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// Forward runs the batch (at most BatchSize rows) and returns the logits of
// the rows that asked for them, [rows][vocab] in row order.
func (m *GPUModel) Forward(b Batch) ([]float32, error) {
	var out Output
	err := m.ForwardInto(b, &out)
	return out.Logits, err
}

// ForwardInto runs the batch (at most BatchSize rows) and puts the logits
// and hidden states its rows ask for into out. It reads them back from the
// device once; it allocates nothing when out has room.
func (m *GPUModel) ForwardInto(b Batch, out *Output) error {
	o := m.o
	if err := b.check(o.Vocab, m.cfg.Slots, m.cfg.CtxSize); err != nil {
		return err
	}
	n := b.Len()
	if n > m.cfg.BatchSize {
		return fmt.Errorf("engine: batch of %d rows exceeds the batch size %d", n, m.cfg.BatchSize)
	}
	if o.Encoder {
		if err := encoderSeqEnds(b, m.seqEnds[:n]); err != nil {
			return err
		}
	}
	// The rows that want output, logits rows first.
	rows := m.outRows[:0]
	for i, want := range b.Logits {
		if want {
			rows = append(rows, int32(i))
		}
	}
	nLogits := len(rows)
	if nLogits > 0 && o.Encoder {
		return fmt.Errorf("engine: %s is an encoder (embeddings and rerank only): it gives hidden states, not logits, so it cannot generate", o.Arch)
	}
	for i := range b.Hidden {
		if b.Hidden[i] {
			rows = append(rows, int32(i))
		}
	}
	m.outRows = rows
	nHidden := len(rows) - nLogits
	for _, w := range []struct {
		buf  *vk.Buffer
		vals []int32
	}{{m.ids, b.Tokens}, {m.slots, b.Slots}, {m.pos, b.Pos}, {m.logitRows, rows}, {m.seqEnd, m.seqEnds[:n]}} {
		if err := w.buf.Write(0, int32Bytes(w.vals)); err != nil {
			return err
		}
	}
	c, err := m.dev.Begin()
	if err != nil {
		return err
	}
	m.g.start(c, n, nLogits, nHidden)
	m.model.forward(&m.g)
	if m.g.err != nil {
		c.Abort()
		return m.g.err
	}
	if err := c.Submit(); err != nil {
		return err
	}
	out.Logits = resize(out.Logits, nLogits*o.Vocab)
	out.Hidden = resize(out.Hidden, nHidden*o.Embd)
	if err := m.logits.Read(0, float32Bytes(out.Logits)); err != nil {
		return err
	}
	return m.hidden.Read(0, float32Bytes(out.Hidden))
}

// CopyPrefix copies the keys and values of positions 0..n-1 of slot src to
// the same positions of slot dst, in every layer, on the device.
func (m *GPUModel) CopyPrefix(dst, src, n int) error {
	if dst < 0 || src < 0 || dst >= m.cfg.Slots || src >= m.cfg.Slots || n < 0 || n > m.cfg.CtxSize {
		return fmt.Errorf("engine: CopyPrefix(%d, %d, %d) outside %d slots of %d positions", dst, src, n, m.cfg.Slots, m.cfg.CtxSize)
	}
	if n == 0 || dst == src || len(m.kCache) == 0 {
		return nil
	}
	row := 2 * uint64(m.o.KVHeads*m.o.HeadDim) // f16 bytes per position
	slotBytes := row * uint64(m.cfg.CtxSize)
	c, err := m.dev.Begin()
	if err != nil {
		return err
	}
	for i := range m.kCache {
		for j, cache := range []vk.Range{m.kCache[i], m.vCache[i]} {
			if i+j > 0 {
				c.NoBarrier() // every copy touches its own bytes
			}
			c.Copy(cache.Sub(uint64(dst)*slotBytes, uint64(n)*row), cache.Sub(uint64(src)*slotBytes, uint64(n)*row))
		}
	}
	return c.Submit()
}
