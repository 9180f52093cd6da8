package engine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/engine/tokenizer"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// Config says how to load a model.
type Config struct {
	Device    string // vk device selector ("" = $VKLLM_DEVICE, then the default order)
	CtxSize   int    // the most positions one sequence may use (0 = min(training context, 4096))
	Parallel  int    // sequences at once (0 = 1)
	BatchSize int    // most rows per forward pass (0 = 512)
	// KVMemory and KVFraction size the KV page pool (see GPUConfig); 0
	// and 0 choose the default.
	KVMemory   int64
	KVFraction float64
	// CacheTypeK and CacheTypeV are the element types of the K and V
	// pools (zero: f16).
	CacheTypeK, CacheTypeV CacheType
	// Validation turns on the Khronos validation layer.
	Validation bool
	// DeviceLocalBudget caps the device-local memory the model takes
	// (vk.Options.DeviceLocalBudget; 0: $VKLLM_DEVICE_LOCAL_BUDGET, else
	// none): on integrated GPUs the rest falls back to host-visible memory.
	DeviceLocalBudget uint64
	// ForceStaging runs a UMA device as a discrete GPU
	// (vk.Options.ForceStaging): device-local buffers, inputs staged and
	// results copied to host buffers. For tests of that path.
	ForceStaging bool
	// PipelineCacheDir is the folder of the device's persisted pipeline
	// cache (vk.Options.PipelineCacheDir; empty: none). Save it with
	// Model.Device().SavePipelineCache.
	PipelineCacheDir string
	// SelfCheck runs the GPU self-check (SelfCheck) before the weights
	// are loaded and turns the paths that fail off for the model
	// (Model.Checks has the results).
	SelfCheck bool
	// selfCheckBroken breaks the self-check's GPU result of the path so
	// named (tests).
	selfCheckBroken string
	// chunkedDelta is GPUConfig.chunkedDelta (tests).
	chunkedDelta Path
	// Checkpoints is the recurrent-state checkpoints of a hybrid model's
	// prefix cache (GPUConfig.Checkpoints; 0: 8, < 0: none).
	Checkpoints int
	// Verify also builds the CPU reference; Model.ForwardInto then runs it
	// beside the GPU and fails when their outputs differ (--verify).
	Verify bool
	// Progress is called while the weights are uploaded.
	Progress func(done, total int64)
}

// CacheType is the element type of the KV cache's pools: f16, q8_0 or
// q4_0 (ops.KVType).
type CacheType = ops.KVType

// ParseCacheType returns the cache type named s ("f16", "q8_0", "q4_0").
func ParseCacheType(s string) (CacheType, error) { return ops.ParseKVType(s) }

// Model is a loaded model: its file, hyper-parameters, tokenizer and the
// GPU forward pass. Its methods are used from one goroutine at a time.
type Model struct {
	File *gguf.File
	Opts Options
	Tok  *tokenizer.Tokenizer
	GPU  *GPUModel
	CPU  *CPUModel // only with Config.Verify
	// Classifier is the classification head of a cross-encoder (nil for
	// other models): Embed with PoolRank returns its score.
	Classifier *Classifier
	// Blocks is the slots' state: their lengths and the KV pool's pages.
	Blocks *Blocks
	// Checks is the self-check's results (Config.SelfCheck; nil without).
	Checks []PathCheck
	dev    *vk.Device
}

// Load opens the GGUF file, builds its tokenizer, and puts the weights on
// the device.
func Load(path string, cfg Config) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m := &Model{File: f}
	if err := m.load(cfg); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func (m *Model) load(cfg Config) error {
	var err error
	if m.Opts, err = ReadOptions(m.File); err != nil {
		return err
	}
	if m.Tok, err = tokenizer.New(m.File); err != nil {
		return err
	}
	if m.Tok.VocabSize() != m.Opts.Vocab {
		return fmt.Errorf("engine: the tokenizer has %d tokens but token_embd.weight has %d rows", m.Tok.VocabSize(), m.Opts.Vocab)
	}
	w, err := LoadWeights(m.File, m.Opts)
	if err != nil {
		return err
	}
	if m.Classifier, err = newClassifier(w); err != nil {
		return err
	}
	if m.dev, err = vk.Open(vk.Options{Device: cfg.Device, Validation: cfg.Validation, DeviceLocalBudget: cfg.DeviceLocalBudget, ForceStaging: cfg.ForceStaging,
		PipelineCacheDir: cfg.PipelineCacheDir}); err != nil {
		return err
	}
	if cfg.SelfCheck {
		m.Checks = selfCheck(m.dev, cfg.selfCheckBroken)
		applySelfCheck(m.dev, m.Checks)
	}
	gc := GPUConfig{CtxSize: cfg.CtxSize, Slots: cfg.Parallel, BatchSize: cfg.BatchSize, Progress: cfg.Progress,
		KVMemory: cfg.KVMemory, KVFraction: cfg.KVFraction, TypeK: cfg.CacheTypeK, TypeV: cfg.CacheTypeV, Checkpoints: cfg.Checkpoints, chunkedDelta: cfg.chunkedDelta}
	if m.GPU, err = NewGPUModel(m.dev, m.Opts, w, gc); err != nil {
		return err
	}
	m.Blocks = newBlocks(m.GPU.kv, m.GPU.Config().Slots)
	if cfg.Verify {
		c := m.GPU.Config()
		if m.CPU, err = NewCPUModel(m.Opts, w, c.CtxSize, c.Slots); err != nil {
			return err
		}
		if m.GPU.kv != nil {
			m.CPU.useKV(m.GPU.kv) // the same pages, so the GPU's decisions hold
			m.CPU.kvTypes = [2]ops.KVType{c.TypeK, c.TypeV}
		}
	}
	return nil
}

// Close releases the device and the file mapping. The Model must not be
// used afterwards.
func (m *Model) Close() error {
	if m.GPU != nil {
		m.GPU.Close()
	}
	var err error
	if m.dev != nil {
		err = m.dev.Close()
	}
	if m.File != nil {
		err = errors.Join(err, m.File.Close())
	}
	return err
}

// Device returns the Vulkan device the model runs on.
func (m *Model) Device() *vk.Device { return m.dev }

// CtxSize returns the most positions one sequence may use.
func (m *Model) CtxSize() int { return m.GPU.Config().CtxSize }

// Slots returns the number of sequence slots: the most sequences the KV
// cache serves at once (its page-table rows). Their positions share one
// pool of pages.
func (m *Model) Slots() int { return m.GPU.Config().Slots }

// KV returns the statistics of the KV page pool. Like the Model's other
// methods it must not run beside a forward pass (a Scheduler's Stats
// reports them safely); its Pages and PageSize never change.
func (m *Model) KV() KVStats { return m.GPU.KV() }

// Forward runs one batch on the GPU and returns the logits of the rows
// that ask for them; see ForwardInto.
func (m *Model) Forward(b Batch) ([]float32, error) {
	var out Output
	err := m.ForwardInto(b, &out)
	return out.Logits, err
}

// ForwardInto runs one batch on the GPU and puts the logits and hidden
// states its rows ask for into out (see Output); with Config.Verify it also
// runs the CPU reference and fails when the logits differ by more than 1e-2
// relative. It allocates nothing when out has room for the batch (and
// Verify is off).
//
// A row at position p of a slot needs the slot's positions before p: p may
// be at most the slot's length (counting the batch's earlier rows of that
// slot), and writing p ends the slot's sequence at p+1, dropping what came
// after it.
func (m *Model) ForwardInto(b Batch, out *Output) error {
	if err := b.check(m.Opts.Vocab, m.Blocks.Slots(), m.CtxSize()); err != nil {
		return err
	}
	if err := m.Blocks.advance(b); err != nil {
		return err
	}
	if err := m.forward(b, out); err != nil {
		m.Blocks.rollback(b)
		return err
	}
	m.Blocks.commit()
	return nil
}

func (m *Model) forward(b Batch, out *Output) error {
	if m.CPU != nil && m.GPU.kv != nil {
		// The GPU pass records the page copies this batch needs and
		// clears them: the CPU reference makes them first.
		if err := m.GPU.kv.reserveRows(b); err != nil {
			return m.GPU.kvFull(err)
		}
		m.CPU.applyCopies()
	}
	err := m.GPU.ForwardInto(b, out)
	if err != nil || m.CPU == nil {
		return err
	}
	var want Output
	if err := m.CPU.ForwardInto(b, &want); err != nil {
		return err
	}
	for _, c := range []struct {
		what      string
		got, want []float32
	}{{"logits", out.Logits, want.Logits}, {"hidden states", out.Hidden, want.Hidden}} {
		if e := maxRelError(c.got, c.want); e > 1e-2 || math.IsNaN(e) {
			return fmt.Errorf("engine: --verify: GPU %s differ from the CPU reference by %.3g (relative)", c.what, e)
		}
	}
	return nil
}

// maxRelError returns max |a-b| over max |b| (at least 1e-6).
func maxRelError(a, b []float32) float64 {
	scale, worst := 1e-6, 0.0
	for _, v := range b {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	for i := range a {
		worst = math.Max(worst, math.Abs(float64(a[i])-float64(b[i])))
	}
	return worst / scale
}

// Prefill feeds tokens to slot at positions start, start+1, ... in chunks of
// the batch size and returns the logits after the last one. ctx is checked
// between chunks.
func (m *Model) Prefill(ctx context.Context, slot, start int, tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, errors.New("engine: empty prompt")
	}
	if start+len(tokens) > m.CtxSize() {
		return nil, fmt.Errorf("engine: %d tokens from position %d exceed the context of %d", len(tokens), start, m.CtxSize())
	}
	chunk := m.GPU.Config().BatchSize
	var logits []float32
	for off := 0; off < len(tokens); off += chunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := seqBatch(tokens[off:min(off+chunk, len(tokens))], slot, start+off)
		if off+b.Len() == len(tokens) {
			b.Out[b.Len()-1] = RowOut{Kind: OutLogits}
		}
		var err error
		if logits, err = m.Forward(b); err != nil {
			return nil, err
		}
	}
	return logits, nil
}

// Step feeds one token to slot at pos and returns its logits.
func (m *Model) Step(slot, pos int, token int32) ([]float32, error) {
	return m.Forward(Batch{Tokens: []int32{token}, Slots: []int32{int32(slot)}, Pos: []int32{int32(pos)}, Out: []RowOut{{Kind: OutLogits}}})
}

// Pooling says how Embed reduces a sequence's hidden states to one vector.
type Pooling int

// Pooling kinds, numbered as GGUF's {arch}.pooling_type.
const (
	PoolNone Pooling = 0
	PoolMean Pooling = 1
	PoolCLS  Pooling = 2
	PoolLast Pooling = 3
	// PoolRank scores a sequence with the classification head of a
	// cross-encoder (cls.*) over its first token's hidden state.
	PoolRank Pooling = 4
)

// Embed runs tokens through slot (from position 0) and pools the final
// hidden states (after the output norm) into one vector of Embd values; with
// PoolRank it returns the classification head's score, one value. The slot
// then holds the tokens' keys and values (decoders).
func (m *Model) Embed(ctx context.Context, slot int, tokens []int32, pool Pooling) ([]float32, error) {
	if err := m.checkEmbed(tokens, pool); err != nil {
		return nil, err
	}
	E := m.Opts.Embd
	pooler := newPooler(pool, len(tokens), E, m.Classifier)
	chunk := m.GPU.Config().BatchSize
	var out Output
	for off := 0; off < len(tokens); off += chunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := seqBatch(tokens[off:min(off+chunk, len(tokens))], slot, off)
		for i := range b.Tokens {
			if pooler.wants(off + i) {
				b.Out[i] = RowOut{Kind: OutHidden}
			}
		}
		if err := m.ForwardInto(b, &out); err != nil {
			return nil, err
		}
		pooler.add(out.Hidden)
	}
	return pooler.result(make([]float32, E)), nil
}

// checkEmbed checks that tokens can be embedded with pool: not empty,
// within the context, within one batch for an encoder (which sees a
// sequence whole), and PoolRank only with a classification head.
func (m *Model) checkEmbed(tokens []int32, pool Pooling) error {
	switch {
	case len(tokens) == 0:
		return errors.New("engine: nothing to embed")
	case len(tokens) > m.CtxSize():
		return fmt.Errorf("engine: %d tokens exceed the context of %d", len(tokens), m.CtxSize())
	case m.Opts.Encoder && len(tokens) > m.GPU.Config().BatchSize:
		return fmt.Errorf("engine: %d tokens exceed the batch size %d; an encoder reads a sequence in one batch (raise --batch-size)", len(tokens), m.GPU.Config().BatchSize)
	case pool == PoolRank && m.Classifier == nil:
		return errors.New("engine: rank pooling needs a classification head (cls.output.weight), which the model lacks")
	}
	return nil
}

// pooler reduces the hidden states of one sequence's rows to one vector.
type pooler struct {
	pool Pooling
	n    int       // the sequence's tokens
	sum  []float64 // [embd]
	cls  *Classifier
}

func newPooler(pool Pooling, n, embd int, cls *Classifier) pooler {
	return pooler{pool: pool, n: n, sum: make([]float64, embd), cls: cls}
}

// wants reports whether the row at position pos contributes.
func (p *pooler) wants(pos int) bool {
	switch p.pool {
	case PoolCLS, PoolRank:
		return pos == 0
	case PoolLast:
		return pos == p.n-1
	}
	return true
}

// add sums rows of hidden states ([rows][embd]).
func (p *pooler) add(h []float32) {
	E := len(p.sum)
	for r := 0; r < len(h)/E; r++ {
		for j, v := range h[r*E : (r+1)*E] {
			p.sum[j] += float64(v)
		}
	}
}

// result writes the pooled vector into out and returns it; with PoolRank,
// the classifier's score of the first token's state, out[:1].
func (p *pooler) result(out []float32) []float32 {
	div := 1.0
	if p.pool == PoolMean || p.pool == PoolNone {
		div = float64(p.n)
	}
	for j := range p.sum {
		out[j] = float32(p.sum[j] / div)
	}
	if p.pool == PoolRank {
		out[0] = p.cls.Score(out)
		return out[:1]
	}
	return out
}
