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
// shapes (the running sequences, the key bucket), but steps that also
// feed prompt chunks while the server is busy come in many (rows x
// greedy rows: a load test of 8 streams meets about a hundred), and a
// graph recorded again costs a step about 1.5 ms on lavapipe, sometimes
// several times that. Past maxKept the least recently used one goes.
const maxKept = 128

// keptGraph is a kept graph and when it last ran (GPUModel.keptClock).
type keptGraph struct {
	r    *vk.Recording
	used uint64
}

// keptKey is what a recorded forward pass depends on.
type keptKey struct {
	passShape
	keys int
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
func (m *GPUModel) runPass(b Batch, s passShape) error {
	keys := batchKeys(b)
	oneTime := m.noKeep || m.dev.Profiling() || len(m.mediaRuns) > 0 || m.useAttnPos
	if !oneTime && m.kv != nil && len(m.kv.copies)+len(m.kv.stateCopies) > 0 {
		// The pending copy-on-write page copies go first, in their own
		// submit (which waits), so that the pass itself can be a kept one.
		c, err := m.dev.Begin()
		if err != nil {
			return err
		}
		m.recordCopies(c)
		if err := c.Submit(); err != nil {
			return err
		}
	}
	if oneTime {
		c, err := m.dev.Begin()
		if err != nil {
			return err
		}
		if err := m.record(c, s, keys, false); err != nil {
			return err
		}
		return c.Submit()
	}
	key := keptKey{s, keyBucket(keys, m.cfg.CtxSize)}
	m.keptClock++
	if g := m.kept[key]; g != nil {
		g.used = m.keptClock
		err := g.r.Submit()
		if err == nil {
			m.keptRuns++
		}
		if !errors.Is(err, vk.ErrStale) {
			return err
		}
		g.r.Release()
		delete(m.kept, key)
	}
	if len(m.kept) >= maxKept {
		m.evictKept()
	}
	c, err := m.dev.BeginKept()
	if err != nil {
		return err
	}
	if err := m.record(c, s, key.keys, true); err != nil {
		return err
	}
	r, err := c.Keep()
	if err != nil {
		return err
	}
	m.kept[key] = &keptGraph{r, m.keptClock}
	return r.Submit()
}

// record records the forward pass into c; on an error it aborts c. On
// discrete GPUs the pass starts with the copy of its inputs from staging
// (a one-time graph copies the regions written this step; a kept one
// every region its shape reads, and the whole page table) and ends with
// the copy of the rows the host reads. A one-time graph also makes the
// pending copy-on-write page copies.
func (m *GPUModel) record(c *vk.Cmd, s passShape, keys int, kept bool) error {
	if m.inStage != nil {
		regions := m.inCopy
		if kept {
			regions = m.shapeInputs(s.n, s.outRows())
		}
		if len(regions) > 0 {
			c.CopyRegions(m.in, m.inStage, regions)
		}
	}
	if !kept {
		m.recordCopies(c)
	}
	m.g.start(c, s, keys)
	m.model.forward(&m.g)
	if m.g.err != nil {
		c.Abort()
		return m.g.err
	}
	if m.readback != nil {
		V := uint64(m.o.Vocab)
		lo := 4 * uint64(s.argmax+s.top) * V
		nt := 4 * uint64(s.top*s.topK)
		m.readCopy[0] = vk.CopyRegion{SrcOffset: lo, DstOffset: lo, Size: 4 * uint64(s.logits) * V}
		m.readCopy[1] = vk.CopyRegion{SrcOffset: m.tokOff, DstOffset: m.tokOff, Size: 4 * uint64(s.argmax)}
		m.readCopy[2] = vk.CopyRegion{SrcOffset: m.topIDOff, DstOffset: m.topIDOff, Size: nt}
		m.readCopy[3] = vk.CopyRegion{SrcOffset: m.topValOff, DstOffset: m.topValOff, Size: nt}
		c.CopyRegions(m.readback, m.logits, m.readCopy[:])
	}
	return nil
}

// shapeInputs returns the input regions a pass of n rows, nOut of them
// giving output, reads: what a kept graph copies from staging every time
// it runs (the page table whole, since any of its rows may change).
func (m *GPUModel) shapeInputs(n, nOut int) []vk.CopyRegion {
	r := m.keptIn[:0]
	add := func(i int, bytes uint64) {
		if bytes > 0 {
			r = append(r, vk.CopyRegion{SrcOffset: m.inOff[i], DstOffset: m.inOff[i], Size: bytes})
		}
	}
	add(inIDs, 4*uint64(n))
	add(inSlots, 4*uint64(n))
	add(inPos, 4*uint64(n))
	add(inRows, 4*uint64(nOut))
	if m.o.Encoder {
		add(inSeqEnd, 4*uint64(n))
	}
	if m.kv != nil {
		add(inTable, 4*uint64(m.cfg.Slots*m.kv.tableLen))
	}
	if m.o.Recurrent != nil {
		add(inRuns, 16*uint64(m.maxRuns(n)))
	}
	m.keptIn = r
	return r
}

// releaseKept gives back every kept graph.
func (m *GPUModel) releaseKept() {
	for k, g := range m.kept {
		g.r.Release()
		delete(m.kept, k)
	}
}

// evictKept releases the least recently used kept graph.
func (m *GPUModel) evictKept() {
	var oldest keptKey
	var g *keptGraph
	for k, h := range m.kept {
		if g == nil || h.used < g.used {
			oldest, g = k, h
		}
	}
	if g != nil {
		g.r.Release()
		delete(m.kept, oldest)
	}
}

// KeptGraphs reports how many forward passes were submitted from a kept
// graph rather than recorded, and how many graphs are kept now.
func (m *GPUModel) KeptGraphs() (reused int64, kept int) { return m.keptRuns, len(m.kept) }
