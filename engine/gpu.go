package engine

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
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

// GPUModel is a decoder model whose weights and KV cache live on a Vulkan
// device. Forward records the whole pass into one command buffer: one
// submit, one fence wait, one read-back of the logits rows. It is used from
// one goroutine at a time.
type GPUModel struct {
	o   Options
	cfg GPUConfig
	dev *vk.Device
	k   *ops.Kernels

	bufs []*vk.Buffer // everything to close

	tokEmbd, output ops.Weight
	outNorm         vk.Range
	ropeFreqs       vk.Range // none when the model has no rope_freqs.weight
	blocks          []gpuBlock

	// Per-forward scratch, sized for cfg.BatchSize rows.
	ids, slots, pos, logitRows *vk.Buffer // int32, host-visible
	x, h, q, kAct, v, attn     vk.Range
	gate, up, hOut             vk.Range
	logits                     *vk.Buffer // [BatchSize][Vocab] f32, host-visible
	hidden                     *vk.Buffer // [BatchSize][Embd] f32, host-visible
	outRows                    []int32    // ForwardInto's scratch: the rows that want output
}

type gpuBlock struct {
	attnNorm, qBias, kBias, vBias, qNorm, kNorm, ffnNorm vk.Range
	q, k, v, out, gate, up, down                         ops.Weight
	kCache, vCache                                       vk.Range
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
	m := &GPUModel{o: o, cfg: cfg, dev: dev, k: ops.New(dev), blocks: make([]gpuBlock, o.Layers)}
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

func (m *GPUModel) kvBytes() int64 {
	return int64(m.cfg.Slots) * int64(m.cfg.CtxSize) * int64(m.o.KVHeads*m.o.HeadDim) * 2
}

// deviceBytes estimates all device memory the model takes.
func (m *GPUModel) deviceBytes(w *Weights) int64 {
	var total int64
	for _, t := range m.allTensors(w) {
		total += int64(len(t.Data))
	}
	o, B := m.o, int64(m.cfg.BatchSize)
	total += 2 * int64(o.Layers) * m.kvBytes()
	total += 4 * B * int64(4*o.Embd+o.Heads*o.HeadDim*2+2*o.KVHeads*o.HeadDim+2*o.FFN+o.Vocab+4)
	return total
}

func (m *GPUModel) allTensors(w *Weights) []*Tensor {
	ts := []*Tensor{w.TokenEmbd, w.OutputNorm, w.Output, w.RopeFreqs}
	for i := range w.Blocks {
		b := &w.Blocks[i]
		ts = append(ts, b.AttnNorm, b.Q, b.K, b.V, b.QBias, b.KBias, b.VBias, b.QNorm, b.KNorm, b.Out, b.FFNNorm, b.Gate, b.Up, b.Down)
	}
	out := ts[:0]
	for _, t := range ts {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
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
	tensors := m.allTensors(w)
	for _, t := range tensors {
		total += int64(len(t.Data))
	}
	ranges := map[*Tensor]vk.Range{}
	for _, t := range tensors {
		b, err := m.newBuffer(uint64(len(t.Data)), vk.DeviceBuffer)
		if err != nil {
			return fmt.Errorf("engine: tensor %s (%s): %w", t.Name, formatBytes(int64(len(t.Data))), err)
		}
		if err := b.Write(0, t.Data); err != nil {
			return fmt.Errorf("engine: upload %s: %w", t.Name, err)
		}
		ranges[t] = b.Range(0, uint64(len(t.Data)))
		done += int64(len(t.Data))
		if m.cfg.Progress != nil {
			m.cfg.Progress(done, total)
		}
	}
	weight := func(t *Tensor) ops.Weight {
		return ops.Weight{Type: t.Type, Rows: t.Rows(), Cols: t.Cols(), Data: ranges[t]}
	}
	vec := func(t *Tensor) vk.Range {
		if t == nil {
			return vk.Range{}
		}
		return ranges[t]
	}
	m.tokEmbd = weight(w.TokenEmbd)
	m.output = weight(w.OutputMatrix())
	m.outNorm = vec(w.OutputNorm)
	m.ropeFreqs = vec(w.RopeFreqs)
	for i := range w.Blocks {
		b, g := &w.Blocks[i], &m.blocks[i]
		g.attnNorm, g.ffnNorm = vec(b.AttnNorm), vec(b.FFNNorm)
		g.qBias, g.kBias, g.vBias = vec(b.QBias), vec(b.KBias), vec(b.VBias)
		g.qNorm, g.kNorm = vec(b.QNorm), vec(b.KNorm)
		g.q, g.k, g.v, g.out = weight(b.Q), weight(b.K), weight(b.V), weight(b.Out)
		g.gate, g.up, g.down = weight(b.Gate), weight(b.Up), weight(b.Down)
	}
	return m.prepare()
}

// prepare compiles the matrix kernels of every weight shape now, so the
// first request does not pay for pipeline creation.
func (m *GPUModel) prepare() error {
	type shape struct {
		t    gguf.GGMLType
		cols int
		add  bool // MulMatAdd (the projections onto the residual stream)
	}
	seen := map[shape]bool{}
	shapes := []shape{{m.output.Type, m.output.Cols, false}}
	for i := range m.blocks {
		g := &m.blocks[i]
		for _, w := range []ops.Weight{g.q, g.k, g.v, g.gate, g.up} {
			shapes = append(shapes, shape{w.Type, w.Cols, false})
		}
		shapes = append(shapes, shape{g.out.Type, g.out.Cols, true}, shape{g.down.Type, g.down.Cols, true})
	}
	for _, s := range shapes {
		if seen[s] {
			continue
		}
		seen[s] = true
		if err := m.k.PrepareWeight(s.t, s.cols, s.add); err != nil {
			return fmt.Errorf("engine: kernels for %v weights of %d columns: %w", s.t, s.cols, err)
		}
	}
	return nil
}

// reserve allocates the KV cache and the batch scratch.
func (m *GPUModel) reserve() error {
	o, B := m.o, uint64(m.cfg.BatchSize)
	kv := uint64(m.kvBytes())
	if kv > m.dev.MaxBinding() {
		return fmt.Errorf("engine: one layer's KV cache (%s for %d slots x %d positions) exceeds the device's largest binding (%s); lower --ctx-size or --parallel",
			formatBytes(int64(kv)), m.cfg.Slots, m.cfg.CtxSize, formatBytes(int64(m.dev.MaxBinding())))
	}
	for i := range m.blocks {
		for _, dst := range []*vk.Range{&m.blocks[i].kCache, &m.blocks[i].vCache} {
			b, err := m.newBuffer(kv, vk.DeviceBuffer)
			if err != nil {
				return fmt.Errorf("engine: KV cache: %w", err)
			}
			*dst = b.Range(0, kv)
		}
	}
	act := func(cols int) (vk.Range, error) {
		size := 4 * B * uint64(cols)
		b, err := m.newBuffer(size, vk.DeviceBuffer)
		if err != nil {
			return vk.Range{}, fmt.Errorf("engine: activations: %w", err)
		}
		return b.Range(0, size), nil
	}
	var err error
	for _, a := range []struct {
		dst  *vk.Range
		cols int
	}{
		{&m.x, o.Embd}, {&m.h, o.Embd}, {&m.hOut, o.Embd},
		{&m.q, o.Heads * o.HeadDim}, {&m.kAct, o.KVHeads * o.HeadDim}, {&m.v, o.KVHeads * o.HeadDim},
		{&m.attn, o.Heads * o.HeadDim}, {&m.gate, o.FFN}, {&m.up, o.FFN},
	} {
		if *a.dst, err = act(a.cols); err != nil {
			return err
		}
	}
	for _, dst := range []**vk.Buffer{&m.ids, &m.slots, &m.pos, &m.logitRows} {
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
	// The rows that want output, logits rows first.
	rows := m.outRows[:0]
	for i, want := range b.Logits {
		if want {
			rows = append(rows, int32(i))
		}
	}
	nLogits := len(rows)
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
	}{{m.ids, b.Tokens}, {m.slots, b.Slots}, {m.pos, b.Pos}, {m.logitRows, rows}} {
		if err := w.buf.Write(0, int32Bytes(w.vals)); err != nil {
			return err
		}
	}
	c, err := m.dev.Begin()
	if err != nil {
		return err
	}
	if err := m.record(c, n, nLogits, nHidden); err != nil {
		c.Abort()
		return err
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
	if n == 0 || dst == src {
		return nil
	}
	row := 2 * uint64(m.o.KVHeads*m.o.HeadDim) // f16 bytes per position
	slotBytes := row * uint64(m.cfg.CtxSize)
	c, err := m.dev.Begin()
	if err != nil {
		return err
	}
	for i := range m.blocks {
		for j, cache := range []vk.Range{m.blocks[i].kCache, m.blocks[i].vCache} {
			if i+j > 0 {
				c.NoBarrier() // every copy touches its own bytes
			}
			c.Copy(cache.Sub(uint64(dst)*slotBytes, uint64(n)*row), cache.Sub(uint64(src)*slotBytes, uint64(n)*row))
		}
	}
	return c.Submit()
}

// record writes the whole forward pass of n rows into c; the rows listed in
// logitRows get logits (the first nLogits, into m.logits) or hidden states
// (the next nHidden, into m.hidden).
func (m *GPUModel) record(c *vk.Cmd, n, nLogits, nHidden int) error {
	o, k := m.o, m.k
	E := o.Embd
	ids := m.ids.Range(0, 4*uint64(n))
	slot := m.slots.Range(0, 4*uint64(n))
	pos := m.pos.Range(0, 4*uint64(n))
	if err := k.GetRows(c, m.tokEmbd, ids, n, m.x); err != nil {
		return err
	}
	for l := range m.blocks {
		blk := &m.blocks[l]
		if err := k.RMSNorm(c, m.h, m.x, blk.attnNorm, n, E, o.NormEps); err != nil {
			return err
		}
		if err := m.attention(c, blk, n, slot, pos); err != nil {
			return fmt.Errorf("engine: layer %d attention: %w", l, err)
		}
		if err := k.RMSNorm(c, m.h, m.x, blk.ffnNorm, n, E, o.NormEps); err != nil {
			return err
		}
		if err := m.feedForward(c, blk, n); err != nil {
			return fmt.Errorf("engine: layer %d feed-forward: %w", l, err)
		}
	}
	nOut := nLogits + nHidden
	if nOut == 0 {
		return nil
	}
	// Gather the rows that want output, then norm them and project only
	// the logits rows.
	rowsW := ops.Weight{Type: gguf.TypeF32, Rows: n, Cols: E, Data: m.x}
	if err := k.GetRows(c, rowsW, m.logitRows.Range(0, 4*uint64(nOut)), nOut, m.hOut); err != nil {
		return err
	}
	if err := k.RMSNorm(c, m.h, m.hOut, m.outNorm, nOut, E, o.NormEps); err != nil {
		return err
	}
	if nLogits > 0 {
		if err := k.MulMat(c, m.output, m.h, nLogits, m.logits.Range(0, 4*uint64(nLogits*o.Vocab))); err != nil {
			return err
		}
		c.NoBarrier() // the copy below reads the norm's output too
	}
	if nHidden > 0 {
		size := 4 * uint64(nHidden*E)
		c.Copy(m.hidden.Range(0, size), m.h.Sub(4*uint64(nLogits*E), size))
	}
	return nil
}

// attention records the self-attention sublayer for n rows reading m.h and
// adds its output projection to the residual stream m.x. It mirrors
// CPUModel.attention.
func (m *GPUModel) attention(c *vk.Cmd, blk *gpuBlock, n int, slot, pos vk.Range) error {
	o, k := m.o, m.k
	D := o.HeadDim
	qw, kw := o.Heads*D, o.KVHeads*D
	proj := []struct {
		w    ops.Weight
		dst  vk.Range
		bias vk.Range
		cols int
	}{{blk.q, m.q, blk.qBias, qw}, {blk.k, m.kAct, blk.kBias, kw}, {blk.v, m.v, blk.vBias, kw}}
	// The three projections read h and write disjoint outputs: no barriers
	// between them; then the bias adds, also independent of each other.
	for i, p := range proj {
		if i > 0 {
			c.NoBarrier()
		}
		if err := k.MulMat(c, p.w, m.h, n, p.dst); err != nil {
			return err
		}
	}
	first := true
	for _, p := range proj {
		if p.bias.Buf == nil {
			continue
		}
		if !first {
			c.NoBarrier()
		}
		first = false
		if err := k.Add(c, p.dst, p.dst, p.bias, n*p.cols, p.cols); err != nil {
			return err
		}
	}
	if blk.qNorm.Buf != nil {
		if err := k.RMSNorm(c, m.q, m.q, blk.qNorm, n*o.Heads, D, o.NormEps); err != nil {
			return err
		}
		c.NoBarrier() // q and k are normalised independently
		if err := k.RMSNorm(c, m.kAct, m.kAct, blk.kNorm, n*o.KVHeads, D, o.NormEps); err != nil {
			return err
		}
	}
	rope := ops.RoPEParams{Rows: n, Heads: o.Heads, HeadDim: D, RotDims: o.RopeDim, NeoX: o.RopeNeoX, FreqBase: o.RopeBase, FreqScale: o.RopeScale}
	if err := k.RoPE(c, m.q, m.q, pos, m.ropeFreqs, rope); err != nil {
		return err
	}
	rope.Heads = o.KVHeads
	c.NoBarrier() // and rotated independently
	if err := k.RoPE(c, m.kAct, m.kAct, pos, m.ropeFreqs, rope); err != nil {
		return err
	}
	cache := ops.KVParams{Slots: m.cfg.Slots, NCtx: m.cfg.CtxSize, KVDim: kw}
	if err := k.KVWrite(c, blk.kCache, m.kAct, slot, pos, n, cache); err != nil {
		return err
	}
	c.NoBarrier() // the K and V caches are disjoint
	if err := k.KVWrite(c, blk.vCache, m.v, slot, pos, n, cache); err != nil {
		return err
	}
	ap := ops.AttnParams{Rows: n, Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: D, Cache: cache, Causal: true,
		Scale: float32(1 / math.Sqrt(float64(D)))}
	if err := k.Attention(c, m.attn, m.q, blk.kCache, blk.vCache, slot, pos, ap); err != nil {
		return err
	}
	return k.MulMatAdd(c, blk.out, m.attn, n, m.x) // the residual connection
}

// feedForward records the SwiGLU sublayer reading m.h and adding to m.x; it mirrors
// CPUModel.feedForward.
func (m *GPUModel) feedForward(c *vk.Cmd, blk *gpuBlock, n int) error {
	k, F := m.k, m.o.FFN
	if err := k.MulMat(c, blk.gate, m.h, n, m.gate); err != nil {
		return err
	}
	c.NoBarrier() // up reads h too and writes its own buffer
	if err := k.MulMat(c, blk.up, m.h, n, m.up); err != nil {
		return err
	}
	if err := k.SwiGLU(c, m.gate, m.gate, m.up, n*F); err != nil {
		return err
	}
	return k.MulMatAdd(c, blk.down, m.gate, n, m.x) // the residual connection
}
