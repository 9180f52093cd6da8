package engine

import (
	"errors"

	"github.com/vkllm/vkllm/vk"
)

// Kept graphs. A forward pass records the same commands for every batch
// of one shape: its inputs (tokens, slots, positions, page tables, output
// rows) come from buffers the host writes before the submit, and the
// kernels, bindings and push constants depend only on the rows, the rows
// that want logits and hidden states, and the longest row's keys (which
// only sizes the split of decode attention). So a pass records its graph
// once per shape and submits it again (vk.Recording) while it stays valid,
// instead of recording some 15 dispatches per layer every step.

// maxKept is the most graphs a model keeps: decode steps come in few
// shapes (the running sequences, the key bucket), prefill chunks in more.
const maxKept = 32

// keptKey is what a recorded forward pass depends on.
type keptKey struct {
	rows, logits, hidden, keys int
}

// keyBucket rounds the keys a pass attends to up to the next power of
// two (at least 256, at most the context): attention splits that many, and
// the graph is reused until the longest row passes it. A split sized for
// more keys than a row has is still exact (its empty ranges add nothing).
func keyBucket(keys, ctx int) int {
	b := 256
	for b < keys {
		b *= 2
	}
	return min(b, max(ctx, keys))
}

// runPass records (or reuses) and submits the forward pass of the batch
// whose inputs ForwardInto has written.
func (m *GPUModel) runPass(b Batch, n, nLogits, nHidden int) error {
	keys := batchKeys(b)
	oneTime := m.noKeep || m.dev.Profiling() || len(m.mediaRuns) > 0 || m.useAttnPos || m.kv != nil && len(m.kv.copies) > 0
	if oneTime {
		c, err := m.dev.Begin()
		if err != nil {
			return err
		}
		m.recordCopies(c)
		if err := m.record(c, n, nLogits, nHidden, keys); err != nil {
			return err
		}
		return c.Submit()
	}
	key := keptKey{n, nLogits, nHidden, keyBucket(keys, m.cfg.CtxSize)}
	if r := m.kept[key]; r != nil {
		err := r.Submit()
		if !errors.Is(err, vk.ErrStale) {
			m.keptRuns++
			return err
		}
		r.Release()
		delete(m.kept, key)
	}
	if len(m.kept) >= maxKept {
		m.releaseKept()
	}
	c, err := m.dev.BeginKept()
	if err != nil {
		return err
	}
	if err := m.record(c, n, nLogits, nHidden, key.keys); err != nil {
		return err
	}
	r, err := c.Keep()
	if err != nil {
		return err
	}
	m.kept[key] = r
	return r.Submit()
}

// record records the forward pass into c; on an error it aborts c.
func (m *GPUModel) record(c *vk.Cmd, n, nLogits, nHidden, keys int) error {
	m.g.start(c, n, nLogits, nHidden, keys)
	m.model.forward(&m.g)
	if m.g.err != nil {
		c.Abort()
		return m.g.err
	}
	return nil
}

// releaseKept gives back every kept graph.
func (m *GPUModel) releaseKept() {
	for k, r := range m.kept {
		r.Release()
		delete(m.kept, k)
	}
}

// KeptGraphs reports how many forward passes were submitted from a kept
// graph rather than recorded, and how many graphs are kept now.
func (m *GPUModel) KeptGraphs() (reused int64, kept int) { return m.keptRuns, len(m.kept) }

// SetKeepGraphs turns kept graphs on (the default) or off (every pass is
// recorded: for comparing the two).
func (m *GPUModel) SetKeepGraphs(on bool) {
	m.noKeep = !on
	if !on {
		m.releaseKept()
	}
}
