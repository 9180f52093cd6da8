package engine

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/vkllm/vkllm/vk"

	"github.com/vkllm/vkllm/engine/ops"
)

// GPUConfig sizes what the GPU model reserves at load.
type GPUConfig struct {
	CtxSize   int // the most positions one sequence may use
	Slots     int // sequences at once: rows of the KV page table (--parallel)
	BatchSize int // most rows in one Forward (prompt chunks are cut to this)
	// KVMemory is the bytes of the KV page pool, all layers' keys and
	// values together (--kv-memory); 0 chooses it: KVFraction of the
	// memory left after the weights and the scratch when that is set,
	// else all of it less a safety margin on GPUs, and Slots x CtxSize
	// positions (what every slot needs at full context) on CPU devices,
	// whose "device memory" is the host's. The pool is capped so that
	// one layer's K or V fits one storage binding.
	KVMemory   int64
	KVFraction float64
	// PageSize is the positions per KV page (0: ops.DefaultPageSize).
	PageSize int
	// TypeK and TypeV are the element types of the K and V pools
	// (--cache-type-k/-v; zero: f16). The block types need a multiple of
	// 32 values per position (kv_heads x head_dim).
	TypeK, TypeV ops.KVType
	// KeepGraphs says whether forward passes keep their recorded graphs
	// to submit again (gpu_kept.go); PathAuto: yes. PathOff records every
	// pass (for comparing the two).
	KeepGraphs Path
	// ComputeUnits, when > 0, is the compute units decode attention's key
	// splits (flash decoding) aim to fill, two workgroups each, in place
	// of the device's count (vk.DeviceInfo.EstimateComputeUnits, a guess
	// where the driver reports none). Zero chooses that count on GPUs and
	// no splits on CPU devices, where a positive value turns them on
	// (tests run the GPUs' decode path on lavapipe so).
	ComputeUnits int
	// Checkpoints is how many recurrent-state checkpoints a hybrid model
	// keeps for its prefix cache (--ctx-checkpoints; 0: 8, < 0: none):
	// each a copy of one sequence's states, every recurrent layer's.
	Checkpoints int
	// Pages is set by NewGPUModel to the pages of the pool.
	Pages int
	// Progress, when set, is called as weights are uploaded with the bytes
	// done and the total.
	Progress func(done, total int64)
	// intDot forces the integer-dot matvec path (ops.Kernels.IntegerDot)
	// on devices that keep it off by default (tests on CPU devices).
	intDot bool
	// chunkedDelta says whether prompt-shaped passes of a hybrid model run
	// the gated delta rule's chunked kernel (ops.GatedDeltaNetChunked):
	// PathAuto on GPUs, not on CPU devices, where it measured 2x slower
	// than the token-by-token kernel (BenchmarkGatedDeltaNet); PathOn
	// forces it (tests).
	chunkedDelta Path
	// gpuMatVec forces the GPU matvec layout (ops.Kernels.SetGPUMatVec)
	// on CPU devices (tests).
	gpuMatVec bool
}

// Path says whether a model or scheduler takes an optional path: PathAuto lets the
// model choose (its documentation says how), PathOn and PathOff force it.
type Path int8

const (
	PathAuto Path = iota
	PathOn
	PathOff
)

// or returns whether p is on, auto being auto.
func (p Path) or(auto bool) bool { return p == PathOn || p == PathAuto && auto }

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
	if c.PageSize <= 0 {
		c.PageSize = ops.DefaultPageSize
	}
	if c.BatchSize > 1<<16 || c.CtxSize > 1<<20 || c.Slots > 1<<14 {
		return fmt.Errorf("engine: batch %d, context %d or %d slots out of range", c.BatchSize, c.CtxSize, c.Slots)
	}
	if c.PageSize&(c.PageSize-1) != 0 || c.PageSize > 1<<12 {
		return fmt.Errorf("engine: a KV page of %d positions; want a power of two up to 4096", c.PageSize)
	}
	if c.ComputeUnits < 0 || c.ComputeUnits > 1<<16 {
		return fmt.Errorf("engine: %d compute units out of range (want 0 for the device's, or up to %d)", c.ComputeUnits, 1<<16)
	}
	if c.KVMemory < 0 || c.KVFraction < 0 || c.KVFraction > 1 {
		return fmt.Errorf("engine: KV memory %d bytes or fraction %g out of range (want bytes >= 0, a fraction in (0, 1])", c.KVMemory, c.KVFraction)
	}
	switch {
	case o.Recurrent == nil || c.Checkpoints < 0:
		c.Checkpoints = 0
	case c.Checkpoints == 0:
		c.Checkpoints = defaultCheckpoints
	case c.Checkpoints > 1<<12:
		return fmt.Errorf("engine: %d recurrent-state checkpoints out of range (at most %d)", c.Checkpoints, 1<<12)
	}
	return nil
}

// defaultCheckpoints is the recurrent-state checkpoints a hybrid model
// keeps by default (GPUConfig.Checkpoints).
const defaultCheckpoints = 8

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
	kCache  []vk.Range   // per layer (decoders): the K page pool
	vCache  []vk.Range
	kv      *kvCache // which pages each slot uses (decoders)
	// convState and ssmState are a hybrid model's recurrent states, per
	// recurrent layer: [slot][Recurrent.ConvLen()] and
	// [slot][Recurrent.SSMLen()] f32 (ops.SSMConv, ops.GatedDeltaNet);
	// runs is the pass's rows as ops.SeqRuns (padded with empty runs).
	convState, ssmState []vk.Range
	runs                []ops.SeqRun
	tableRow            []int32 // scratch for one row of the page table

	// Per-forward scratch, sized for cfg.BatchSize rows.
	acts []*vk.Buffer // the activations (see gpuGraph)
	// in holds the per-step inputs, int32 each, at inOff: token ids,
	// slots, positions, output rows, encoder sequence ends, and the
	// [Slots][tableLen] page table. On UMA devices it is host-visible and
	// written in place; on discrete GPUs (vk.Device.Discrete) it is
	// device-local, the host writes inStage (the same layout,
	// host-visible) and the pass starts with one copy of the regions
	// written (inCopy).
	in, inStage *vk.Buffer
	inOff       [numInputs]uint64
	inCopy      []vk.CopyRegion
	keptIn      []vk.CopyRegion // a kept graph's input copy (gpu_kept.go)
	// logits holds [BatchSize][Vocab] f32 logits, then at tokOff the
	// [BatchSize] uint32 argmax ids of OutArgmax rows, at topIDOff and
	// topValOff the [BatchSize][k] ids (uint32) and logits (f32) of
	// OutTopK rows (k at most ops.MaxTopK). On UMA devices
	// it is host-visible and read in place; on discrete GPUs it is
	// device-local and the pass ends with one copy of the rows the host
	// reads into readback (host-visible, cached where the device has it).
	logits, readback *vk.Buffer
	tokOff           uint64
	topIDOff         uint64
	topValOff        uint64
	readCopy         [4]vk.CopyRegion
	// attnScratch holds split attention's partial results (decoders whose
	// dispatches split), sized by the dry run for the largest case.
	attnScratch *vk.Buffer
	hidden      *vk.Buffer // [BatchSize][Embd] f32, host-visible
	// Input embeddings (media.go), made on first use: the rows' values,
	// their runs, and the attention positions of non-causal images.
	embIn, attnPos *vk.Buffer
	mediaRuns      []mediaRun
	// kept holds recorded forward passes by shape (gpu_kept.go).
	kept      map[keptKey]*keptGraph
	keptClock uint64 // counts runPass calls, for evicting the least recently used graph
	keptRuns  int64
	noKeep    bool
	// deviceTopK: sampled rows that need only their top k logits read
	// back those (DeviceTopK).
	deviceTopK bool
	useAttnPos bool
	outRows    []int32 // ForwardInto's scratch: the rows that want output
	seqEnds    []int32 // ForwardInto's scratch: encoder sequence ends
	g          gpuGraph
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
	kvDim := o.KVHeads * o.HeadDim
	for _, t := range []struct {
		flag string
		t    ops.KVType
	}{{"--cache-type-k", cfg.TypeK}, {"--cache-type-v", cfg.TypeV}} {
		if !o.Encoder && !ops.KVBlocked(t.t, kvDim) {
			return nil, fmt.Errorf("engine: %s %v: the model's %d key/value values per position (%d heads x %d) are not a multiple of its blocks of 32; use f16",
				t.flag, t.t, kvDim, o.KVHeads, o.HeadDim)
		}
	}
	m := &GPUModel{o: o, cfg: cfg, dev: dev, k: ops.New(dev), model: w.model, kept: map[keptKey]*keptGraph{},
		deviceTopK: dev.Info().Type != vk.TypeCPU, noKeep: !cfg.KeepGraphs.or(true)}
	if cfg.ComputeUnits > 0 {
		m.k.SetComputeUnits(cfg.ComputeUnits)
	}
	if cfg.gpuMatVec {
		m.k.SetGPUMatVec(true)
	}
	if cfg.intDot {
		m.k.SetIntegerDot(true)
	}
	if most := m.k.MaxContext(); !o.Encoder && most > 0 && cfg.CtxSize > most {
		return nil, fmt.Errorf("engine: a context of %d positions; %s attends over at most %d (use --ctx-size %d or less)", cfg.CtxSize, dev.Info().Name, most, most)
	}
	// A dry run of the largest batch sizes the activations and lists the
	// matrix shapes to compile.
	m.g = gpuGraph{m: m, shapes: map[matShape]bool{}, matBytes: map[string]int64{}, slotOf: map[uint64]int{}, fusedKinds: map[*Tensor]uint8{}}
	m.g.start(nil, passShape{n: cfg.BatchSize, logits: cfg.BatchSize}, cfg.CtxSize)
	m.model.forward(&m.g)
	if m.g.err != nil {
		m.k.Close()
		return nil, m.g.err
	}
	pages, err := m.poolPages(w)
	if err != nil {
		m.k.Close()
		return nil, err
	}
	m.cfg.Pages = pages
	need := m.deviceBytes(w)
	if have := deviceMemory(dev); need > have {
		m.k.Close()
		return nil, fmt.Errorf("engine: the model needs %s of device memory (weights, a KV pool of %d pages of %d positions, batch scratch) but %s has %s%s",
			formatBytes(need), m.cfg.Pages, m.cfg.PageSize, dev.Info().Name, formatBytes(have), memoryKinds(dev))
	}
	if !o.Encoder {
		m.kv = newKVCache(m.cfg.Pages, m.cfg.PageSize, m.cfg.Slots, m.cfg.CtxSize)
		if o.Recurrent != nil {
			m.kv.rec = make([]int, m.cfg.Slots)
			m.kv.ckpts = make([]checkpoint, m.cfg.Checkpoints)
			m.kv.stateBytes = o.Recurrent.StateBytes()
		}
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

// deviceMemory returns the bytes the device's buffers can take
// (vk.Device.Capacity): its device-local heaps and, on integrated GPUs,
// the system memory they fall back to.
func deviceMemory(dev *vk.Device) int64 { return int64(dev.Capacity()) }

// memoryKinds says, for the fit error, what deviceMemory counted.
func memoryKinds(dev *vk.Device) string {
	if dev.Info().Type == vk.TypeDiscrete {
		return " of device-local memory"
	}
	return " of device-local and host-visible memory"
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

// kvBytes is the size of one layer's K and V pools; encoders keep none.
func (m *GPUModel) kvBytes() int64 {
	if m.o.Encoder {
		return 0
	}
	return int64(m.cfg.Pages) * (m.pageBytes(m.cfg.TypeK) + m.pageBytes(m.cfg.TypeV))
}

// pageBytes is the size of one page of one layer's pool of type t.
func (m *GPUModel) pageBytes(t ops.KVType) int64 {
	return int64(m.cfg.PageSize) * int64(t.RowBytes(m.o.KVHeads*m.o.HeadDim))
}

// kvSafetyMargin is what the default pool leaves of a GPU's memory for
// the driver and other programs: 5% of it, at least 256 MiB.
func kvSafetyMargin(have int64) int64 { return max(have/20, 256<<20) }

// poolPages sizes the KV pool as GPUConfig.KVMemory says. An explicit
// size is an error when one layer's share of it exceeds a storage binding;
// a chosen one is capped there.
func (m *GPUModel) poolPages(w *Weights) (int, error) {
	if m.o.Encoder {
		return 0, nil
	}
	cfg := m.cfg
	perPage := int64(m.o.KVLayers) * (m.pageBytes(cfg.TypeK) + m.pageBytes(cfg.TypeV)) // K and V of every layer with a cache
	have := deviceMemory(m.dev)
	left := have - m.deviceBytes(w)                                                       // weights and scratch (no pages yet)
	full := int64(cfg.Slots) * int64((cfg.CtxSize+cfg.PageSize-1)/cfg.PageSize) * perPage // every slot at full context
	var bytes int64
	switch {
	case cfg.KVMemory > 0:
		bytes = cfg.KVMemory
	case cfg.KVFraction > 0:
		bytes = int64(cfg.KVFraction * float64(max(left, 0)))
	case m.dev.Info().Type == vk.TypeCPU:
		bytes = full
	case m.dev.Info().Type != vk.TypeDiscrete:
		// An integrated GPU's memory is the system's (have counts the
		// host-visible heaps): take what the slots need, not all of it.
		bytes = min(full, left-kvSafetyMargin(have))
	default:
		bytes = left - kvSafetyMargin(have)
	}
	pages := max(bytes/perPage, 1)
	// One layer's K (or V) pool is one storage binding.
	largest := max(m.pageBytes(cfg.TypeK), m.pageBytes(cfg.TypeV))
	most := min(int64(m.dev.MaxBinding())/largest, 1<<31-1)
	if cfg.KVMemory > 0 && pages > most {
		return 0, fmt.Errorf("engine: a KV pool of %s needs %s per layer for keys or values, but %s has storage bindings of at most %s (at most %s of KV memory for this model)",
			formatBytes(cfg.KVMemory), formatBytes(pages*largest), m.dev.Info().Name, formatBytes(int64(m.dev.MaxBinding())), formatBytes(most*perPage))
	}
	return int(max(min(pages, most), 1)), nil
}

// deviceBytes estimates all device memory the model takes.
func (m *GPUModel) deviceBytes(w *Weights) int64 {
	var total int64
	for _, t := range w.Tensors {
		total += int64(len(t.Data))
		if t.parts != nil && len(t.Dims) == 1 {
			total += 4 * int64(t.Cols()) // fused biases are copies
		}
	}
	o, B := m.o, int64(m.cfg.BatchSize)
	total += int64(o.KVLayers) * m.kvBytes()
	if r := o.Recurrent; r != nil {
		total += int64(m.cfg.Slots+m.cfg.Checkpoints) * r.StateBytes()
	}
	total += m.g.actBytes() + int64(m.g.attnScratch) + 4*B*int64(o.Embd+o.Vocab+6)
	total += int64(m.q8Bytes())
	total += 4 * int64(m.cfg.Slots) * int64((m.cfg.CtxSize+m.cfg.PageSize-1)/m.cfg.PageSize) // page table
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
	// Fused matrices first: their parts are written into their buffer,
	// one after another, and become views of it. Fused vectors (biases)
	// are copies; their parts keep buffers of their own, at the aligned
	// offsets the elementwise kernels bind.
	placed := map[*Tensor]bool{}
	for _, t := range w.Tensors {
		if t.parts == nil {
			continue
		}
		var size uint64
		for _, p := range t.parts {
			size += uint64(len(p.Data))
		}
		b, err := m.newBuffer(size, vk.DeviceBuffer)
		if err != nil {
			return fmt.Errorf("engine: tensor %s (%s): %w", t.Name, formatBytes(int64(size)), err)
		}
		var off uint64
		for _, p := range t.parts {
			if err := b.Write(off, p.Data); err != nil {
				return fmt.Errorf("engine: upload %s: %w", p.Name, err)
			}
			if len(t.Dims) >= 2 { // matrices and experts: views
				m.weights[p.idx] = ops.Weight{Type: p.Type, Rows: p.Rows(), Cols: p.Cols(), Data: b.Range(off, uint64(len(p.Data)))}
				placed[p] = true
				done += int64(len(p.Data))
			}
			off += uint64(len(p.Data))
		}
		m.weights[t.idx] = ops.Weight{Type: t.Type, Rows: t.Rows(), Cols: t.Cols(), Data: b.Range(0, size)}
	}
	for i, t := range w.Tensors {
		if t.parts != nil || placed[t] {
			continue
		}
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
// met, so the first request does not pay for pipeline creation; all at
// once, on every core (Kernels.PrepareAll).
func (m *GPUModel) prepare() error {
	return m.k.PrepareAll(func() error {
		for s := range m.g.shapes {
			if err := m.k.PrepareWeight(s.t, s.rows, s.cols, s.add); err != nil {
				return fmt.Errorf("engine: kernels for %v weights of %d columns: %w", s.t, s.cols, err)
			}
		}
		for f, glu := range m.g.fusedKinds {
			if err := m.k.PrepareFused(m.weights[f.idx], glu != 0, glu == gluGeGLU); err != nil {
				return fmt.Errorf("engine: fused kernels for %s: %w", f.Name, err)
			}
		}
		return nil
	})
}

// reserve allocates the KV cache and the batch scratch.
func (m *GPUModel) reserve() error {
	o, B := m.o, uint64(m.cfg.BatchSize)
	if m.kvBytes() > 0 {
		m.kCache, m.vCache = make([]vk.Range, o.KVLayers), make([]vk.Range, o.KVLayers)
		for i := range o.KVLayers {
			for _, pool := range []struct {
				dst *vk.Range
				t   ops.KVType
			}{{&m.kCache[i], m.cfg.TypeK}, {&m.vCache[i], m.cfg.TypeV}} {
				n := uint64(m.cfg.Pages) * uint64(m.pageBytes(pool.t))
				if n > m.dev.MaxBinding() {
					return fmt.Errorf("BUG: engine: one layer's KV pool (%s) exceeds the device's largest binding (%s)",
						formatBytes(int64(n)), formatBytes(int64(m.dev.MaxBinding())))
				}
				b, err := m.newBuffer(n, vk.DeviceBuffer)
				if err != nil {
					return fmt.Errorf("engine: KV cache: %w", err)
				}
				*pool.dst = b.Range(0, n)
			}
		}
		m.tableRow = make([]int32, m.kv.tableLen)
	}
	if err := m.reserveRecurrent(); err != nil {
		return err
	}
	if err := m.reserveIO(); err != nil {
		return err
	}
	var err error
	if m.g.attnScratch > 0 {
		if m.attnScratch, err = m.newBuffer(m.g.attnScratch, vk.DeviceBuffer); err != nil {
			return fmt.Errorf("engine: split-attention scratch (%s): %w", formatBytes(int64(m.g.attnScratch)), err)
		}
	}
	m.acts = make([]*vk.Buffer, len(m.g.slotSize))
	for i, size := range m.g.slotSize {
		if m.acts[i], err = m.newBuffer(size, vk.DeviceBuffer); err != nil {
			return fmt.Errorf("engine: activations (%s): %w", formatBytes(int64(size)), err)
		}
	}
	if n := m.q8Bytes(); n > 0 {
		b, err := m.newBuffer(n, vk.DeviceBuffer)
		if err != nil {
			return fmt.Errorf("engine: Q8_1 activation scratch: %w", err)
		}
		if err := m.k.SetQ8Scratch(b.Range(0, n)); err != nil {
			return err
		}
	}
	if m.hidden, err = m.newBuffer(4*B*uint64(o.Embd), vk.HostBuffer); err != nil {
		return fmt.Errorf("engine: hidden-state buffer: %w", err)
	}
	m.outRows = make([]int32, 0, B)
	m.seqEnds = make([]int32, B)
	return nil
}

// The per-step inputs in GPUModel.in, in layout order.
const (
	inIDs = iota
	inSlots
	inPos
	inRows // the rows that want output: argmax, logits, hidden
	inSeqEnd
	inTable // the KV page table (decoders)
	inRuns  // the rows as sequence runs (hybrid models: ops.SeqRun)
	numInputs
)

// ioAlign aligns the parts of the input and logits buffers for binding
// (minStorageBufferOffsetAlignment is at most 256).
const ioAlign = 256

func alignUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

// reserveIO allocates the per-step inputs and the logits (see GPUModel.in
// and logits): in place on UMA devices, device-local with host-visible
// staging and read-back on discrete GPUs.
func (m *GPUModel) reserveIO() error {
	B := uint64(m.cfg.BatchSize)
	var off uint64
	for i := range numInputs {
		m.inOff[i] = off
		n := 4 * B
		switch i {
		case inTable:
			n = 0
			if m.kv != nil {
				n = 4 * uint64(m.cfg.Slots*m.kv.tableLen)
			}
		case inRuns:
			n = 0
			if m.o.Recurrent != nil {
				n = 16 * uint64(m.maxRuns(m.cfg.BatchSize))
			}
		}
		off = alignUp(off+n, ioAlign)
	}
	discrete := m.dev.Discrete()
	kind := vk.HostBuffer
	if discrete {
		kind = vk.DeviceBuffer
	}
	var err error
	if m.in, err = m.newBuffer(off, kind); err != nil {
		return fmt.Errorf("engine: per-step inputs: %w", err)
	}
	m.tokOff = alignUp(4*B*uint64(m.o.Vocab), ioAlign)
	m.topIDOff = alignUp(m.tokOff+4*B, ioAlign)
	m.topValOff = alignUp(m.topIDOff+4*B*ops.MaxTopK, ioAlign)
	outEnd := m.topValOff + 4*B*ops.MaxTopK
	if m.logits, err = m.newBuffer(outEnd, kind); err != nil {
		return fmt.Errorf("engine: logits buffer: %w", err)
	}
	if !discrete {
		return nil
	}
	if m.inStage, err = m.newBuffer(off, vk.HostBuffer); err != nil {
		return fmt.Errorf("engine: per-step input staging: %w", err)
	}
	if m.readback, err = m.newBuffer(outEnd, vk.HostBuffer); err != nil {
		return fmt.Errorf("engine: logits read-back buffer: %w", err)
	}
	m.inCopy = make([]vk.CopyRegion, 0, numInputs+m.cfg.Slots)
	m.keptIn = make([]vk.CopyRegion, 0, numInputs)
	return nil
}

// input returns the device range of the first n values of input i.
func (m *GPUModel) input(i, n int) vk.Range { return m.in.Range(m.inOff[i], 4*uint64(n)) }

// writeInput puts vals at value at of input i: into in on UMA devices, else
// into inStage, noting the region for the pass's input copy.
func (m *GPUModel) writeInput(i, at int, vals []int32) {
	if len(vals) == 0 {
		return
	}
	off, n := m.inOff[i]+4*uint64(at), 4*uint64(len(vals))
	dst := m.in
	if m.inStage != nil {
		dst = m.inStage
		m.inCopy = append(m.inCopy, vk.CopyRegion{SrcOffset: off, DstOffset: off, Size: n})
	}
	copy(dst.Mapped()[off:off+n], int32Bytes(vals))
}

// MatrixBytes returns the bytes of the weights one forward pass multiplies
// by, per weight kind ("attn_q", "ffn_up", "output": a tensor's name
// without its block prefix and ".weight"), each read at least once per
// pass. A profiled pass (vk.Device.Profile) labels each matrix product's
// dispatches with the same kinds.
func (m *GPUModel) MatrixBytes() map[string]int64 {
	out := make(map[string]int64, len(m.g.matBytes))
	for k, v := range m.g.matBytes {
		out[k] = v
	}
	return out
}

// HeapShare is what one memory heap holds of a model.
type HeapShare struct {
	Heap        int  // the device's heap index
	DeviceLocal bool // the heap is device-local
	// Fallback marks device buffers placed in host-visible memory because
	// the device-local budget was spent (integrated GPUs).
	Fallback bool
	// Weights, KV and Scratch are the bytes of the weights, the KV cache
	// (with a hybrid model's recurrent states) and the rest (activations,
	// inputs and outputs).
	Weights, KV, Scratch int64
}

// Placement returns where the model's memory lives: one HeapShare per heap
// and placement that holds any of it, in heap order, fallbacks last.
func (m *GPUModel) Placement() []HeapShare {
	what := map[*vk.Buffer]int{} // 0 scratch, 1 weights, 2 KV
	for _, w := range m.weights {
		if w.Data.Buf != nil {
			what[w.Data.Buf] = 1
		}
	}
	for _, r := range slices.Concat(m.kCache, m.vCache, m.convState, m.ssmState) {
		what[r.Buf] = 2 // a hybrid model's recurrent states count with the KV cache
	}
	var out []HeapShare
	for _, b := range m.bufs {
		heap, fallback := b.Placement()
		i := slices.IndexFunc(out, func(h HeapShare) bool { return h.Heap == heap && h.Fallback == fallback })
		if i < 0 {
			local := false
			if infos := m.dev.Info().Heaps; heap < len(infos) {
				local = infos[heap].DeviceLocal
			}
			out = append(out, HeapShare{Heap: heap, DeviceLocal: local, Fallback: fallback})
			i = len(out) - 1
		}
		n := int64(b.Size())
		switch what[b] {
		case 1:
			out[i].Weights += n
		case 2:
			out[i].KV += n
		default:
			out[i].Scratch += n
		}
	}
	slices.SortFunc(out, func(a, b HeapShare) int {
		if a.Fallback != b.Fallback {
			if a.Fallback {
				return 1
			}
			return -1
		}
		return a.Heap - b.Heap
	})
	return out
}

// String describes the share for a load log: "heap 0 (device-local):
// weights 1.2 GiB, KV 256.0 MiB, scratch 12.0 MiB".
func (h HeapShare) String() string {
	kind := "host"
	if h.DeviceLocal {
		kind = "device-local"
	}
	if h.Fallback {
		kind += ", fallback for device memory"
	}
	return fmt.Sprintf("heap %d (%s): weights %s, KV %s, scratch %s", h.Heap, kind, formatBytes(h.Weights), formatBytes(h.KV), formatBytes(h.Scratch))
}

// Options returns the model's hyper-parameters.
func (m *GPUModel) Options() Options { return m.o }

// Config returns the sizes the model reserved.
func (m *GPUModel) Config() GPUConfig { return m.cfg }

// q8Bytes is the size of the integer-dot matvec path's activation scratch
// (ops.Kernels.Q8ScratchBytes): the longest row of the matrices the dry run
// met, for the largest batch; 0 where the path is off.
func (m *GPUModel) q8Bytes() uint64 {
	cols := 0
	for s := range m.g.shapes {
		cols = max(cols, s.cols)
	}
	return m.k.Q8ScratchBytes(cols, m.cfg.BatchSize)
}

// Close releases everything on the device. The model must not be used
// afterwards; the device stays open.
func (m *GPUModel) Close() {
	m.releaseKept()
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

// DeviceTopK reports whether the scheduler should ask for the top k logits
// of rows whose sampler needs nothing else (OutTopK) instead of whole
// rows: on GPUs, where a row would cross the bus and the host would select
// among vocabulary-many logits. CPU devices (lavapipe) read rows in place,
// and there the top_k kernel costs more than the sampler's own selection
// (qwen2 fixture, 50k vocabulary, 16 sampled streams: about 400 tokens/s
// against 770).
func (m *GPUModel) DeviceTopK() bool { return m.deviceTopK }

// float32Bytes views vals as bytes (no copy).
func float32Bytes(vals []float32) []byte {
	if len(vals) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))
}

// Forward runs the batch (at most BatchSize rows) and returns the logits of
// the rows that asked for them, [rows][vocab] in row order.
func (m *GPUModel) Forward(b Batch) ([]float32, error) {
	var out Output
	err := m.ForwardInto(b, &out)
	return out.Logits, err
}

// ForwardInto runs the batch (at most BatchSize rows) and puts the logits,
// argmax ids and hidden states its rows ask for into out. On a discrete GPU
// the logits stay in device memory and one recorded copy moves only the
// rows asked for (and the argmax ids) to host memory; the host then copies
// them into out once, or not at all with Output.Borrow. It allocates
// nothing when out has room.
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
	// The rows that want output: argmax rows first (the argmax kernel
	// then reads the logits from offset 0, aligned for binding), then
	// top-k rows, then logits rows, then hidden-state rows.
	rows, shape, err := b.outputRows(m.outRows[:0], o.Vocab, o.Encoder, o.Arch)
	if err != nil {
		return err
	}
	m.outRows = rows
	nArgmax, nTop, topK, nLogits, nHidden := shape.argmax, shape.top, shape.topK, shape.logits, shape.hidden
	m.inCopy = m.inCopy[:0]
	if m.kv != nil {
		if err := m.kv.reserveRows(b); err != nil {
			return m.kvFull(err)
		}
		m.uploadTables()
	}
	m.writeInput(inIDs, 0, b.Tokens)
	m.writeInput(inSlots, 0, b.Slots)
	m.writeInput(inPos, 0, b.Pos)
	m.writeInput(inRows, 0, rows)
	if m.o.Recurrent != nil {
		if err := m.writeRuns(b); err != nil {
			return err
		}
	}
	if o.Encoder {
		m.writeInput(inSeqEnd, 0, m.seqEnds[:n])
	}
	if err := m.writeMedia(b); err != nil { // input embeddings (media.go)
		return err
	}
	if err := m.runPass(b, shape); err != nil {
		return err
	}
	V := uint64(o.Vocab)
	host := m.logits
	if m.readback != nil {
		host = m.readback
	}
	mem := host.Mapped()
	logits := unsafe.Slice((*float32)(unsafe.Pointer(&mem[4*uint64(nArgmax+nTop)*V])), nLogits*o.Vocab)
	tokens := unsafe.Slice((*int32)(unsafe.Pointer(&mem[m.tokOff])), nArgmax)
	nt := nTop * topK
	topIDs := unsafe.Slice((*int32)(unsafe.Pointer(&mem[m.topIDOff])), nt)
	topLogits := unsafe.Slice((*float32)(unsafe.Pointer(&mem[m.topValOff])), nt)
	hidden := unsafe.Slice((*float32)(unsafe.Pointer(&m.hidden.Mapped()[0])), nHidden*o.Embd)
	out.TopN = topK
	if out.Borrow {
		out.Logits, out.Tokens, out.Hidden = logits[:len(logits):len(logits)], tokens[:nArgmax:nArgmax], hidden[:len(hidden):len(hidden)]
		out.TopIDs, out.TopLogits = topIDs[:nt:nt], topLogits[:nt:nt]
	} else {
		out.Logits = resize(out.Logits, len(logits))
		out.Tokens = resize(out.Tokens, nArgmax)
		out.TopIDs = resize(out.TopIDs, nt)
		out.TopLogits = resize(out.TopLogits, nt)
		out.Hidden = resize(out.Hidden, len(hidden))
		copy(out.Logits, logits)
		copy(out.Tokens, tokens)
		copy(out.TopIDs, topIDs)
		copy(out.TopLogits, topLogits)
		copy(out.Hidden, hidden)
	}
	out.ReadBytes = 4 * (len(logits) + nArgmax + 2*nt + len(hidden))
	return nil
}

// kvFull explains err (ErrKVFull) with the pool's numbers.
func (m *GPUModel) kvFull(err error) error {
	st := m.kv.stats()
	return fmt.Errorf("%w: %d pages of %d positions, %d held by sequences, %d cached, %d free", err, st.Pages, st.PageSize, st.Used, st.Cached, st.Free)
}

// uploadTables writes the page-table rows of the slots whose pages changed.
func (m *GPUModel) uploadTables() {
	for s, d := range m.kv.dirty {
		if !d {
			continue
		}
		m.kv.tableRow(s, m.tableRow)
		m.writeInput(inTable, s*len(m.tableRow), m.tableRow)
		m.kv.dirty[s] = false
	}
}

// recordCopies records the pending copy-on-write page copies, every layer's
// K and V, and clears them.
func (m *GPUModel) recordCopies(c *vk.Cmd) {
	if m.kv == nil {
		return
	}
	kb, vb := uint64(m.pageBytes(m.cfg.TypeK)), uint64(m.pageBytes(m.cfg.TypeV))
	for _, cp := range m.kv.copies {
		// A barrier between pages: a page copied from may be evicted and
		// copied into later in the same list.
		first := true
		for i := range m.kCache {
			for j, pool := range []vk.Range{m.kCache[i], m.vCache[i]} {
				if !first {
					c.NoBarrier() // the layers of one page touch their own bytes
				}
				first = false
				pb := kb
				if j == 1 {
					pb = vb
				}
				c.Copy(pool.Sub(uint64(cp.dst)*pb, pb), pool.Sub(uint64(cp.src)*pb, pb))
			}
		}
	}
	m.kv.copies = m.kv.copies[:0]
	if r := m.o.Recurrent; r != nil {
		cb, sb := 4*uint64(r.ConvLen()), 4*uint64(r.SSMLen())
		for _, cp := range m.kv.stateCopies {
			// A barrier between slots (a follower may lead another);
			// the layers of one slot touch their own bytes.
			for l := range m.convState {
				if l > 0 {
					c.NoBarrier()
				}
				c.Copy(m.convState[l].Sub(uint64(cp.dst)*cb, cb), m.convState[l].Sub(uint64(cp.src)*cb, cb))
				c.NoBarrier()
				c.Copy(m.ssmState[l].Sub(uint64(cp.dst)*sb, sb), m.ssmState[l].Sub(uint64(cp.src)*sb, sb))
			}
		}
	}
	m.kv.stateCopies = m.kv.stateCopies[:0]
}

// reserveRecurrent allocates a hybrid model's recurrent states (zeroed:
// a slot's first row is at position 0, which ignores them anyway).
func (m *GPUModel) reserveRecurrent() error {
	r := m.o.Recurrent
	if r == nil {
		return nil
	}
	S := uint64(m.cfg.Slots + m.cfg.Checkpoints) // the slots', then the checkpoints' (kvCache.ckpts)
	m.convState, m.ssmState = make([]vk.Range, r.Count), make([]vk.Range, r.Count)
	for l := range r.Count {
		for _, st := range []struct {
			dst *vk.Range
			n   uint64
		}{{&m.convState[l], S * 4 * uint64(r.ConvLen())}, {&m.ssmState[l], S * 4 * uint64(r.SSMLen())}} {
			if st.n > m.dev.MaxBinding() {
				return fmt.Errorf("engine: one layer's recurrent states of %d slots and %d checkpoints (%s) exceed the device's largest binding (%s): use fewer --parallel slots or --ctx-checkpoints",
					m.cfg.Slots, m.cfg.Checkpoints, formatBytes(int64(st.n)), formatBytes(int64(m.dev.MaxBinding())))
			}
			b, err := m.newBuffer(st.n, vk.DeviceBuffer)
			if err != nil {
				return fmt.Errorf("engine: recurrent state: %w", err)
			}
			*st.dst = b.Range(0, st.n)
		}
	}
	m.runs = make([]ops.SeqRun, 0, m.cfg.BatchSize)
	return nil
}

// KV returns the statistics of the KV page pool (zero for encoders).
func (m *GPUModel) KV() KVStats {
	if m.kv == nil {
		return KVStats{}
	}
	return m.kv.stats()
}

// mediaRun is a run of consecutive rows fed by embeddings.
type mediaRun struct{ start, n int }

// writeMedia uploads the batch's input embeddings and attention positions
// (made on first use) and lists the embedding rows' runs for EmbedInputs.
func (m *GPUModel) writeMedia(b Batch) error {
	m.mediaRuns, m.useAttnPos = m.mediaRuns[:0], b.AttnPos != nil
	if b.Embeds == nil && b.AttnPos == nil {
		return nil
	}
	E, B := m.o.Embd, m.cfg.BatchSize
	if m.embIn == nil {
		var err error
		if m.embIn, err = m.newBuffer(4*uint64(B*E), vk.HostBuffer); err != nil {
			return fmt.Errorf("engine: input embeddings: %w", err)
		}
		if m.attnPos, err = m.newBuffer(4*uint64(B), vk.HostBuffer); err != nil {
			return fmt.Errorf("engine: attention positions: %w", err)
		}
	}
	if b.AttnPos != nil {
		if err := m.attnPos.Write(0, int32Bytes(b.AttnPos)); err != nil {
			return err
		}
	}
	for i := 0; i < len(b.Embeds); i++ {
		if b.Embeds[i] == nil {
			continue
		}
		j := i
		for ; j < len(b.Embeds) && b.Embeds[j] != nil; j++ {
			if len(b.Embeds[j]) != E {
				return fmt.Errorf("engine: batch row %d: an input embedding of %d values, want %d", j, len(b.Embeds[j]), E)
			}
			if err := m.embIn.Write(4*uint64(j*E), float32Bytes(b.Embeds[j])); err != nil {
				return err
			}
		}
		m.mediaRuns = append(m.mediaRuns, mediaRun{i, j - i})
		i = j
	}
	return nil
}

// maxRuns is the number of sequence runs a pass of n rows dispatches for
// (a hybrid model's): one per row, at most one per slot. The recurrent
// kernels skip the empty runs that pad a pass's runs to it, so a pass's
// recording depends on its rows only.
func (m *GPUModel) maxRuns(n int) int { return max(min(n, m.cfg.Slots), 1) }

// writeRuns writes b's rows as sequence runs (inRuns), padded with empty
// runs to maxRuns.
func (m *GPUModel) writeRuns(b Batch) error {
	runs, err := b.seqRuns(m.runs)
	if err != nil {
		return err
	}
	for len(runs) < m.maxRuns(b.Len()) {
		runs = append(runs, ops.SeqRun{Slot: 0, Row: 0, Rows: 0})
	}
	m.runs = runs
	m.writeInput(inRuns, 0, unsafe.Slice((*int32)(unsafe.Pointer(&runs[0])), 4*len(runs)))
	return nil
}
