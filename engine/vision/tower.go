package vision

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/gguf/quant"
)

// tower is the vision tower (v.* tensors) every family starts with: patch
// embedding (+ bias), the class token (LLaVA), position embeddings,
// optional pre-LN, the pre-norm blocks, optional post-LN.
type tower struct {
	Patch   *engine.Tensor `gguf:"patch_embd.weight"` // [Embd][3*P*P] after bindTower
	PatchB  *engine.Tensor `gguf:"patch_embd.bias,optional"`
	Class   *engine.Tensor `gguf:"class_embd,optional"`
	Pos     *engine.Tensor `gguf:"position_embd.weight"`
	PreLN   *engine.Tensor `gguf:"pre_ln.weight,optional"`
	PreLNB  *engine.Tensor `gguf:"pre_ln.bias,optional"`
	PostLN  *engine.Tensor `gguf:"post_ln.weight,optional"`
	PostLNB *engine.Tensor `gguf:"post_ln.bias,optional"`
	Blocks  []block        `gguf:"blk"`
}

// block is one pre-norm transformer block of the vision tower.
type block struct {
	Q     *engine.Tensor `gguf:"attn_q.weight"`
	QB    *engine.Tensor `gguf:"attn_q.bias,optional"`
	K     *engine.Tensor `gguf:"attn_k.weight"`
	KB    *engine.Tensor `gguf:"attn_k.bias,optional"`
	V     *engine.Tensor `gguf:"attn_v.weight"`
	VB    *engine.Tensor `gguf:"attn_v.bias,optional"`
	O     *engine.Tensor `gguf:"attn_out.weight"`
	OB    *engine.Tensor `gguf:"attn_out.bias,optional"`
	LN1   *engine.Tensor `gguf:"ln1.weight"`
	LN1B  *engine.Tensor `gguf:"ln1.bias,optional"`
	LN2   *engine.Tensor `gguf:"ln2.weight"`
	LN2B  *engine.Tensor `gguf:"ln2.bias,optional"`
	Up    *engine.Tensor `gguf:"ffn_up.weight"` // fc1 (Embd -> FF)
	UpB   *engine.Tensor `gguf:"ffn_up.bias,optional"`
	Down  *engine.Tensor `gguf:"ffn_down.weight"` // fc2 (FF -> Embd)
	DownB *engine.Tensor `gguf:"ffn_down.bias,optional"`
}

// bindTower binds t with its first n blocks and checks every
// shape. class says whether the family has a class token and patchBias
// whether it has a patch bias; a file with one the family lacks is an
// error. Legacy LLaVA files store the FFN's first matrix (Embd -> FF) as
// ffn_down and the second as ffn_up; as the reference does, they are
// swapped back when ffn_down's rows are Embd wide (ne0 == Embd). LayerNorm
// biases the file lacks are zeros.
func bindTower(m *Model, t *tower, n int, class, patchBias bool) error {
	p := &m.P
	if p.FF == p.Embd {
		return fmt.Errorf("clip.vision.feed_forward_length equals embedding_length (%d): the legacy FFN tensor names would be ambiguous", p.FF)
	}
	if _, ok := m.f.Tensor("v.patch_embd.weight.1"); ok {
		return errors.New("tensor v.patch_embd.weight.1 (a temporal patch kernel, Qwen2-VL) is not supported")
	}
	if _, ok := m.f.Tensor("v.blk.0.ffn_gate.weight"); ok {
		return errors.New("tensor v.blk.0.ffn_gate.weight: gated vision FFNs are not supported")
	}
	t.Blocks = make([]block, n)
	if err := engine.BindTensors(m.f, "v.", t); err != nil {
		return err
	}
	switch {
	case t.Class != nil && !class:
		return fmt.Errorf("tensor v.class_embd: a class token is not part of the %s family", p.ProjectorType)
	case t.PatchB != nil && !patchBias:
		return fmt.Errorf("tensor v.patch_embd.bias: a patch bias is not part of the %s family", p.ProjectorType)
	}
	// The patch kernel [P][P][3][Embd] (ggml order) is the matrix
	// [Embd][3*P*P] that multiplies the unfolded patches.
	P, E, F := uint64(p.PatchSize), uint64(p.Embd), p.FF
	if want := []uint64{P, P, 3, E}; fmt.Sprint(t.Patch.Dims) != fmt.Sprint(want) {
		return fmt.Errorf("tensor %s has shape %v, want %v", t.Patch.Name, t.Patch.Dims, want)
	}
	t.Patch.Dims = []uint64{3 * P * P, E}
	np := p.PatchesPerSide() * p.PatchesPerSide()
	if t.Class != nil {
		np++
	}
	if err := shape(t.Pos, p.Embd, np); err != nil {
		return err
	}
	zero := &engine.Tensor{Name: "(no bias)", Type: gguf.TypeF32, Dims: []uint64{E}, Data: make([]byte, 4*E)}
	for _, v := range []*engine.Tensor{t.PatchB, t.Class, t.PreLN, t.PreLNB, t.PostLN, t.PostLNB} {
		if err := vector(v, p.Embd); err != nil {
			return err
		}
	}
	t.PreLNB, t.PostLNB = orZero(t.PreLNB, t.PreLN, zero), orZero(t.PostLNB, t.PostLN, zero)
	for i := range t.Blocks {
		b := &t.Blocks[i]
		if len(b.Down.Dims) > 0 && b.Down.Dims[0] == E {
			b.Up, b.Down, b.UpB, b.DownB = b.Down, b.Up, b.DownB, b.UpB
		}
		for _, s := range []struct {
			t          *engine.Tensor
			cols, rows int
		}{
			{b.Q, p.Embd, p.Embd}, {b.K, p.Embd, p.Embd}, {b.V, p.Embd, p.Embd}, {b.O, p.Embd, p.Embd},
			{b.Up, p.Embd, F}, {b.Down, F, p.Embd},
		} {
			if err := shape(s.t, s.cols, s.rows); err != nil {
				return err
			}
		}
		for _, v := range []*engine.Tensor{b.QB, b.KB, b.VB, b.OB, b.LN1, b.LN1B, b.LN2, b.LN2B, b.DownB} {
			if err := vector(v, p.Embd); err != nil {
				return err
			}
		}
		if err := vector(b.UpB, F); err != nil {
			return err
		}
		b.LN1B, b.LN2B = orZero(b.LN1B, b.LN1, zero), orZero(b.LN2B, b.LN2, zero)
	}
	return nil
}

// orZero is a LayerNorm's bias b, or zero where the norm w has none.
func orZero(b, w, zero *engine.Tensor) *engine.Tensor {
	if b == nil && w != nil {
		return zero
	}
	return b
}

// shape checks that t has rows of cols values (rows 0: the vector of
// cols), ignoring trailing dimensions of 1, which it drops.
func shape(t *engine.Tensor, cols, rows int) error {
	want := []uint64{uint64(cols)}
	if rows > 0 {
		want = append(want, uint64(rows))
	}
	dims := t.Dims
	for len(dims) > len(want) && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1]
	}
	if fmt.Sprint(dims) != fmt.Sprint(want) {
		return fmt.Errorf("tensor %s has shape %v, want %v", t.Name, t.Dims, want)
	}
	t.Dims = dims
	return nil
}

// vector checks that t (nil: absent and optional) is a vector of cols
// values and makes it f32, as the kernels read vectors.
func vector(t *engine.Tensor, cols int) error {
	if t == nil {
		return nil
	}
	if err := shape(t, cols, 0); err != nil {
		return err
	}
	if t.Type == gguf.TypeF32 {
		return nil
	}
	v, err := values(t)
	if err != nil {
		return err
	}
	t.Type, t.Data = gguf.TypeF32, make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(x))
	}
	return nil
}

// matrix checks that t is a matrix of rows of cols values (cols < 0: any)
// with up to 1<<20 rows.
func matrix(t *engine.Tensor, cols int) error {
	if len(t.Dims) != 2 || cols >= 0 && t.Dims[0] != uint64(cols) || t.Dims[1] == 0 || t.Dims[1] > 1<<20 {
		return fmt.Errorf("tensor %s has shape %v, want [%d rows]", t.Name, t.Dims, cols)
	}
	return nil
}

// values returns t's values as float32.
func values(t *engine.Tensor) ([]float32, error) {
	v := make([]float32, t.Rows()*t.Cols())
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return v, nil
}

// transposed returns a copy of the matrix t transposed, in f16 when t is
// f16 (exact) and f32 otherwise.
func transposed(t *engine.Tensor) (*engine.Tensor, error) {
	v, err := values(t)
	if err != nil {
		return nil, err
	}
	R, C := t.Rows(), t.Cols()
	out := &engine.Tensor{Name: t.Name + " (transposed)", Dims: []uint64{uint64(R), uint64(C)}}
	if t.Type == gguf.TypeF16 {
		out.Type, out.Data = gguf.TypeF16, make([]byte, 2*len(v))
		for r := range R {
			for c := range C {
				binary.LittleEndian.PutUint16(out.Data[2*(c*R+r):], ops.F16FromF32(v[r*C+c]))
			}
		}
	} else {
		out.Type, out.Data = gguf.TypeF32, make([]byte, 4*len(v))
		for r := range R {
			for c := range C {
				binary.LittleEndian.PutUint32(out.Data[4*(c*R+r):], math.Float32bits(v[r*C+c]))
			}
		}
	}
	return out, nil
}

// embed records the tower's input: the image's patches times the patch
// kernel (+ bias), the class token after the patches (LLaVA, as the
// reference appends it), the position embeddings, and the pre-LN.
func (t *tower) embed(g engine.Graph, p *Params) engine.Act {
	x := g.Im2Col(g.Input(3, p.ImageSize*p.ImageSize), im2colParams(p, t.Patch))
	x = linear(g, t.Patch, t.PatchB, x)
	if t.Class != nil {
		x = g.AppendRows(x, t.Class)
	}
	g.Add(x, g.EmbedPositions(t.Pos))
	if t.PreLN != nil {
		x = g.LayerNorm(x, t.PreLN, t.PreLNB, p.Eps)
	}
	return x
}

// forward records the whole tower: embed, every bound block, post-LN.
func (t *tower) forward(g engine.Graph, p *Params) engine.Act {
	x := t.embed(g, p)
	for i := range t.Blocks {
		x = vitBlock(g, &t.Blocks[i], x, p)
	}
	if t.PostLN != nil {
		x = g.LayerNorm(x, t.PostLN, t.PostLNB, p.Eps)
	}
	return x
}

// vitBlock records one pre-norm transformer block: x += attn(LN1(x)),
// x += fc2(act(fc1(LN2(x)))), attention in both directions over all the
// image's rows.
func vitBlock(g engine.Graph, b *block, x engine.Act, p *Params) engine.Act {
	g.Layer()
	h := g.LayerNorm(x, b.LN1, b.LN1B, p.Eps)
	q := linear(g, b.Q, b.QB, h)
	k := linear(g, b.K, b.KB, h)
	v := linear(g, b.V, b.VB, h)
	hd := p.Embd / p.Heads
	a := g.Attention(q, k, v, engine.Attn{Kind: engine.Bidirectional, Heads: p.Heads, KVHeads: p.Heads, HeadDim: hd,
		Scale: float32(1 / math.Sqrt(float64(hd)))})
	g.Add(x, linear(g, b.O, b.OB, a))
	h = g.LayerNorm(x, b.LN2, b.LN2B, p.Eps)
	h = linear(g, b.Up, b.UpB, h)
	activate(g, h, p.Act)
	g.Add(x, linear(g, b.Down, b.DownB, h))
	return x
}

// linear returns x times w transposed, plus b (nil: none).
func linear(g engine.Graph, w, b *engine.Tensor, x engine.Act) engine.Act {
	y := g.MatMul(w, x)
	if b != nil {
		g.AddBias(y, b)
	}
	return y
}

// activate applies a to x.
func activate(g engine.Graph, x engine.Act, a Activation) {
	switch a {
	case QuickGELU:
		g.QuickGELU(x)
	case GELU:
		g.GELU(x)
	case SiLU:
		g.SiLU(x)
	}
}
