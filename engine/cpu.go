package engine

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/gguf/quant"
)

// Batch is one forward pass's rows. Row i feeds token Tokens[i] at position
// Pos[i] of sequence slot Slots[i]; rows of one slot must come in increasing
// position order, and a row attends to the positions 0..Pos[i] of its own
// slot (the earlier ones from the KV cache). Logits[i] asks for row i's
// logits; Forward returns them in row order. Hidden, when not nil, asks
// for rows' final hidden states (after the output norm) instead, for
// embeddings: a row may want logits or its hidden state, not both.
type Batch struct {
	Tokens []int32
	Slots  []int32
	Pos    []int32
	Logits []bool
	Hidden []bool
}

// Len returns the number of rows.
func (b *Batch) Len() int { return len(b.Tokens) }

// check validates the batch against the model and cache sizes.
func (b *Batch) check(vocab, slots, ctx int) error {
	n := len(b.Tokens)
	if n == 0 {
		return fmt.Errorf("engine: empty batch")
	}
	if len(b.Slots) != n || len(b.Pos) != n || len(b.Logits) != n || b.Hidden != nil && len(b.Hidden) != n {
		return fmt.Errorf("engine: batch has %d tokens but %d slots, %d positions, %d logit flags, %d hidden flags", n, len(b.Slots), len(b.Pos), len(b.Logits), len(b.Hidden))
	}
	for i := range n {
		switch {
		case b.Tokens[i] < 0 || int(b.Tokens[i]) >= vocab:
			return fmt.Errorf("engine: batch row %d: token %d outside the vocabulary of %d", i, b.Tokens[i], vocab)
		case b.Slots[i] < 0 || int(b.Slots[i]) >= slots:
			return fmt.Errorf("engine: batch row %d: slot %d outside 0..%d", i, b.Slots[i], slots-1)
		case b.Pos[i] < 0 || int(b.Pos[i]) >= ctx:
			return fmt.Errorf("engine: batch row %d: position %d outside the context of %d", i, b.Pos[i], ctx)
		case b.Hidden != nil && b.Hidden[i] && b.Logits[i]:
			return fmt.Errorf("engine: batch row %d asks for both logits and its hidden state", i)
		}
	}
	return nil
}

// CPUModel is the plain-Go reference of the forward pass: weights
// dequantized to f32, arithmetic accumulated in f64, an f32 KV cache. It is
// slow and exists to check the GPU path (tests and --verify).
type CPUModel struct {
	o      Options
	slots  int
	ctx    int
	embd   []float32 // [vocab][embd]
	outN   []float32
	output []float32 // [vocab][embd]
	freqs  []float32 // rope_freqs.weight, nil when absent
	blocks []cpuBlock
}

type cpuBlock struct {
	attnNorm, q, k, v, qBias, kBias, vBias, qNorm, kNorm []float32
	out, ffnNorm, gate, up, down                         []float32
	kCache, vCache                                       []float32 // [slot][pos][kvhead][dim]
}

func dequant(t *Tensor) ([]float32, error) {
	if t == nil {
		return nil, nil
	}
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	out := make([]float32, n)
	if err := quant.Dequantize(t.Type, t.Data, out); err != nil {
		return nil, fmt.Errorf("engine: tensor %s: %w", t.Name, err)
	}
	return out, nil
}

// NewCPUModel dequantizes w and makes a KV cache of slots sequences of ctx
// positions each.
func NewCPUModel(o Options, w *Weights, ctx, slots int) (*CPUModel, error) {
	m := &CPUModel{o: o, slots: slots, ctx: ctx, blocks: make([]cpuBlock, o.Layers)}
	var err error
	load := func(dst *[]float32, t *Tensor) {
		if err == nil {
			*dst, err = dequant(t)
		}
	}
	load(&m.embd, w.TokenEmbd)
	load(&m.outN, w.OutputNorm)
	load(&m.output, w.OutputMatrix())
	load(&m.freqs, w.RopeFreqs)
	for i := range m.blocks {
		b, wb := &m.blocks[i], &w.Blocks[i]
		for _, p := range []struct {
			dst *[]float32
			t   *Tensor
		}{
			{&b.attnNorm, wb.AttnNorm}, {&b.q, wb.Q}, {&b.k, wb.K}, {&b.v, wb.V},
			{&b.qBias, wb.QBias}, {&b.kBias, wb.KBias}, {&b.vBias, wb.VBias},
			{&b.qNorm, wb.QNorm}, {&b.kNorm, wb.KNorm}, {&b.out, wb.Out},
			{&b.ffnNorm, wb.FFNNorm}, {&b.gate, wb.Gate}, {&b.up, wb.Up}, {&b.down, wb.Down},
		} {
			load(p.dst, p.t)
		}
		b.kCache = make([]float32, slots*ctx*o.KVHeads*o.HeadDim)
		b.vCache = make([]float32, slots*ctx*o.KVHeads*o.HeadDimV)
	}
	return m, err
}

// Options returns the model's hyper-parameters.
func (m *CPUModel) Options() Options { return m.o }

// Forward runs the batch and returns the logits of the rows that asked for
// them, concatenated in row order ([rows][vocab]).
func (m *CPUModel) Forward(b Batch) ([]float32, error) {
	hidden, err := m.forwardHidden(b)
	if err != nil {
		return nil, err
	}
	o := m.o
	var logits []float32
	for i := range b.Len() {
		if !b.Logits[i] {
			continue
		}
		row := make([]float32, o.Vocab)
		refMatVec(row, m.output, hidden[i*o.Embd:(i+1)*o.Embd], o.Vocab, o.Embd)
		logits = append(logits, row...)
	}
	return logits, nil
}

// Hidden runs the batch and returns every row's final hidden state (after
// the output norm), [rows][embd].
func (m *CPUModel) Hidden(b Batch) ([]float32, error) { return m.forwardHidden(b) }

func (m *CPUModel) forwardHidden(b Batch) ([]float32, error) {
	o := m.o
	if err := b.check(o.Vocab, m.slots, m.ctx); err != nil {
		return nil, err
	}
	n, E := b.Len(), o.Embd
	x := make([]float32, n*E)
	for i, t := range b.Tokens {
		copy(x[i*E:(i+1)*E], m.embd[int(t)*E:(int(t)+1)*E])
	}
	h := make([]float32, n*E)
	for l := range m.blocks {
		blk := &m.blocks[l]
		refRMSNorm(h, x, blk.attnNorm, n, E, o.NormEps)
		attn := m.attention(blk, h, b)
		for i := range x {
			x[i] += attn[i]
		}
		refRMSNorm(h, x, blk.ffnNorm, n, E, o.NormEps)
		ffn := m.feedForward(blk, h, n)
		for i := range x {
			x[i] += ffn[i]
		}
	}
	refRMSNorm(h, x, m.outN, n, E, o.NormEps)
	return h, nil
}

// attention is the self-attention sublayer: projections, optional biases
// and q/k norms, RoPE, the KV-cache write, scaled-dot-product attention over
// the row's own slot, and the output projection.
func (m *CPUModel) attention(blk *cpuBlock, h []float32, b Batch) []float32 {
	o := m.o
	n, E := b.Len(), o.Embd
	D, DV := o.HeadDim, o.HeadDimV
	qw, kw, vw := o.Heads*D, o.KVHeads*D, o.KVHeads*DV
	q := make([]float32, n*qw)
	k := make([]float32, n*kw)
	v := make([]float32, n*vw)
	for i := range n {
		x := h[i*E : (i+1)*E]
		refMatVec(q[i*qw:(i+1)*qw], blk.q, x, qw, E)
		refMatVec(k[i*kw:(i+1)*kw], blk.k, x, kw, E)
		refMatVec(v[i*vw:(i+1)*vw], blk.v, x, vw, E)
	}
	if blk.qBias != nil {
		addRows(q, blk.qBias)
		addRows(k, blk.kBias)
		addRows(v, blk.vBias)
	}
	if blk.qNorm != nil {
		refRMSNorm(q, q, blk.qNorm, n*o.Heads, D, o.NormEps)
		refRMSNorm(k, k, blk.kNorm, n*o.KVHeads, D, o.NormEps)
	}
	for i := range n {
		pos := float64(b.Pos[i])
		for hd := range o.Heads {
			RefRoPE(q[i*qw+hd*D:i*qw+(hd+1)*D], pos, o.RopeDim, o.RopeBase, o.RopeScale, o.RopeNeoX, m.freqs)
		}
		for hd := range o.KVHeads {
			RefRoPE(k[i*kw+hd*D:i*kw+(hd+1)*D], pos, o.RopeDim, o.RopeBase, o.RopeScale, o.RopeNeoX, m.freqs)
		}
		at := (int(b.Slots[i])*m.ctx + int(b.Pos[i]))
		copy(blk.kCache[at*kw:(at+1)*kw], k[i*kw:(i+1)*kw])
		copy(blk.vCache[at*vw:(at+1)*vw], v[i*vw:(i+1)*vw])
	}
	out := make([]float32, n*o.Heads*DV)
	scale := 1 / math.Sqrt(float64(D))
	group := o.Heads / o.KVHeads
	scores := make([]float64, m.ctx)
	for i := range n {
		base := int(b.Slots[i]) * m.ctx
		npos := int(b.Pos[i]) + 1
		for hd := range o.Heads {
			kvh := hd / group
			qv := q[i*qw+hd*D : i*qw+(hd+1)*D]
			maxS := math.Inf(-1)
			for p := range npos {
				kv := blk.kCache[(base+p)*kw+kvh*D : (base+p)*kw+(kvh+1)*D]
				s := 0.0
				for d := range D {
					s += float64(qv[d]) * float64(kv[d])
				}
				scores[p] = s * scale
				maxS = math.Max(maxS, scores[p])
			}
			sum := 0.0
			for p := range npos {
				scores[p] = math.Exp(scores[p] - maxS)
				sum += scores[p]
			}
			dst := out[(i*o.Heads+hd)*DV : (i*o.Heads+hd+1)*DV]
			for d := range DV {
				acc := 0.0
				for p := range npos {
					acc += scores[p] * float64(blk.vCache[(base+p)*vw+kvh*DV+d])
				}
				dst[d] = float32(acc / sum)
			}
		}
	}
	res := make([]float32, n*E)
	ow := o.Heads * DV
	for i := range n {
		refMatVec(res[i*E:(i+1)*E], blk.out, out[i*ow:(i+1)*ow], E, ow)
	}
	return res
}

// feedForward is the SwiGLU sublayer: down(silu(gate(h)) * up(h)).
func (m *CPUModel) feedForward(blk *cpuBlock, h []float32, n int) []float32 {
	E, F := m.o.Embd, m.o.FFN
	g := make([]float32, F)
	u := make([]float32, F)
	res := make([]float32, n*E)
	for i := range n {
		x := h[i*E : (i+1)*E]
		refMatVec(g, blk.gate, x, F, E)
		refMatVec(u, blk.up, x, F, E)
		for j := range g {
			s := float64(g[j])
			g[j] = float32(s / (1 + math.Exp(-s)) * float64(u[j]))
		}
		refMatVec(res[i*E:(i+1)*E], blk.down, g, E, F)
	}
	return res
}

// refMatVec computes y[r] = sum_k w[r][k] * x[k] for a [rows][cols] matrix.
func refMatVec(y, w, x []float32, rows, cols int) {
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		s := 0.0
		for k, xv := range x[:cols] {
			s += float64(row[k]) * float64(xv)
		}
		y[r] = float32(s)
	}
}

// refRMSNorm normalizes each of rows rows of cols values and multiplies by
// weight (dst may be src).
func refRMSNorm(dst, src, weight []float32, rows, cols int, eps float32) {
	for r := range rows {
		x := src[r*cols : (r+1)*cols]
		ss := 0.0
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(cols)+float64(eps))
		d := dst[r*cols : (r+1)*cols]
		for i, v := range x {
			d[i] = float32(float64(v) * scale * float64(weight[i]))
		}
	}
}

func addRows(x, bias []float32) {
	for i := range x {
		x[i] += bias[i%len(bias)]
	}
}

// RefRoPE rotates the first dims values of one head's vector x by position
// pos: pairs (x[2i], x[2i+1]) in normal mode, (x[i], x[i+dims/2]) in NeoX
// mode, by the angle pos*scale*base^(-2i/dims)/factors[i] (factors nil:
// 1). Values past dims are left.
func RefRoPE(x []float32, pos float64, dims int, base, scale float32, neox bool, factors []float32) {
	half := dims / 2
	for i := range half {
		theta := pos * float64(scale) * math.Pow(float64(base), -2*float64(i)/float64(dims))
		if factors != nil {
			theta /= float64(factors[i])
		}
		c, s := math.Cos(theta), math.Sin(theta)
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+half
		}
		x0, x1 := float64(x[a]), float64(x[b])
		x[a] = float32(x0*c - x1*s)
		x[b] = float32(x0*s + x1*c)
	}
}

// CopyPrefix copies the keys and values of positions 0..n-1 of slot src to
// slot dst (GPUModel.CopyPrefix's reference).
func (m *CPUModel) CopyPrefix(dst, src, n int) {
	kw, vw := m.o.KVHeads*m.o.HeadDim, m.o.KVHeads*m.o.HeadDimV
	for i := range m.blocks {
		b := &m.blocks[i]
		copy(b.kCache[dst*m.ctx*kw:(dst*m.ctx+n)*kw], b.kCache[src*m.ctx*kw:(src*m.ctx+n)*kw])
		copy(b.vCache[dst*m.ctx*vw:(dst*m.ctx+n)*vw], b.vCache[src*m.ctx*vw:(src*m.ctx+n)*vw])
	}
}
